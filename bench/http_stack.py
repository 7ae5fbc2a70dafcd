"""HTTP benchmark: the full `foya serve` stack against a bare FastAPI app under the same hypercorn.

Run from the repository root:

    .venv/bin/python -m bench.http_stack            # table
    .venv/bin/python -m bench.http_stack --json     # machine-readable results on stdout
    .venv/bin/python -m bench.http_stack --quick    # 1 round of 2 s, 3 startup runs (~25 s)

What it measures, all in one run so the ratios compare like with like:

1. Throughput. The full side is the real `python -m app serve --listen 127.0.0.1:PORT
   --allow-plaintext` (JSON logs to a file, as in production: every request pays for its log
   line, metrics, request id and security headers). It is driven with an authenticated
   `GET /readyz` (Observe -> BearerAuth -> route -> readiness checks) and with `GET /healthz`
   (auth-exempt). The bare side is a FastAPI app with one route returning
   `PlainTextResponse("ok")`, served by hypercorn with the settings of
   `app.serve.listeners.hypercorn_config()` (checked attribute by attribute at start). Every request
   carries the same bearer header, so request bytes differ only by path. The load generator is
   `wrk` (one thread) when installed, else an asyncio keep-alive client in its own process: a
   fixed number of persistent HTTP/1.1 connections, no pipelining. Each server process is pinned
   to one core and the generator (and this script) to the other (2-core machine). After a
   warm-up, sides alternate A B C, C B A, ... for a few bounded rounds, so drift cancels out.
   Besides req/s, the server's own CPU time per request is reported: it moves much less than
   req/s when other work shares the machine (the CPU others used is reported too).
2. Idle resident memory (VmRSS) of a fresh `foya serve` after its first `/healthz` 200 and ~1 s
   of settling, and of the bare app started the same way.
3. Startup: from exec to the first `/healthz` 200, `foya serve` against the bare app, median of
   several alternating runs (one discarded warm-up run each).

Traffic goes only to 127.0.0.1. Every process started is stopped by PID (SIGTERM, then SIGKILL).
No assertion is made on any figure: targets are printed next to the results.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.harness import (
    HOST,
    PYCACHE,
    Processes,
    child_env,
    machine_busy,
    process_cpu,
    say,
    spawn,
    workspace,
)
from bench.report import (
    Row,
    at_least,
    at_most,
    dist_version,
    finish,
    python,
    rows_of,
    table,
    verdicts,
)

TOKEN = "bench-" + "x" * 42  # 48 characters: above BearerAuth's 32-character minimum
TOKEN_SHA256 = hashlib.sha256(TOKEN.encode()).hexdigest()
AUTH_HEADER = f"Bearer {TOKEN}"

TARGET_THROUGHPUT_RATIO = 0.8  # full / bare, at least
TARGET_RSS_MB = 60.0  # foya serve idle, at most (MB = 10^6 bytes)
TARGET_STARTUP_RATIO = 1.3  # full / bare, at most
BUSY_CORES = 0.1  # other processes using more than this during load runs: say so

# What `app.serve.listeners.hypercorn_config()` sets on a plain-TCP listener, besides `bind` and
# the two loggers. `check_hypercorn_parity()` compares this with the real thing before anything
# runs.
HYPERCORN_SETTINGS: dict[str, Any] = {
    "ssl_handshake_timeout": 10.0,
    "keep_alive_timeout": 120,
    "graceful_timeout": 8.0,
    "h11_max_incomplete_size": 1024 * 1024,
    "h2_max_header_list_size": 1024 * 1024,
    "include_server_header": False,
}

# The bare side: one FastAPI route under hypercorn's in-process API, bound the way
# app.serve.listeners binds (our own socket handed over as fd://N), stopped by SIGTERM through a
# shutdown trigger. A `-c` script, so its startup and memory include nothing of this file or of
# `app`.
BARE_SERVER = r"""
import asyncio, json, logging, signal, socket, sys
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from hypercorn.asyncio import serve
from hypercorn.config import Config

port, settings = int(sys.argv[1]), json.loads(sys.argv[2])
app = FastAPI()

@app.get("/healthz")
async def healthz() -> PlainTextResponse:
    return PlainTextResponse("ok")

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sock.bind(("127.0.0.1", port))
sock.listen(1024)

async def main() -> None:
    config = Config()
    for key, value in settings.items():
        setattr(config, key, value)
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.bind = [f"fd://{sock.detach()}"]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await serve(app, config, shutdown_trigger=stop.wait)

asyncio.run(main())
"""


# ---------------------------------------------------------------------------------------------
# Processes


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    started: float  # perf_counter() just before exec
    stdout_path: str
    stderr_path: str

    def rss_kib(self) -> dict[str, int]:
        return read_status(self.proc.pid)

    def stderr_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError), open(self.stderr_path, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
        return ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def read_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in KiB from /proc/PID/status."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def children_cpu() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _home(workdir: str) -> str:
    home = os.path.join(workdir, "home")
    os.makedirs(home, exist_ok=True)
    return home


def start_server(
    kind: str, procs: Processes, workdir: str, cpu: int | None, tag: str, data_dir: str
) -> Server:
    """Start `foya serve` ("full") or the bare app ("bare") on a free port; don't wait."""
    port = free_port()
    stdout_path = os.path.join(workdir, f"{tag}.stdout")
    stderr_path = os.path.join(workdir, f"{tag}.stderr")
    if kind == "full":
        argv = [sys.executable, "-m", "app", "serve"]
        argv += ["--listen", f"{HOST}:{port}", "--allow-plaintext"]
        env = child_env(
            {
                "FOYA_AUTH_TOKEN_SHA256": TOKEN_SHA256,
                "FOYA_DATA_DIR": data_dir,
                "FOYA_LOG_FORMAT": "json",
                "FOYA_LOG_LEVEL": "info",
                # A home of its own: the user's ~/.foya (MCP servers, plugins) is not measured.
                "HOME": _home(workdir),
            }
        )
    else:
        argv = [sys.executable, "-c", BARE_SERVER, str(port), json.dumps(HYPERCORN_SETTINGS)]
        env = child_env()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        started = time.perf_counter()
        proc = spawn(procs, argv, env=env, stdout=out, stderr=err, cpu=cpu)
    return Server(kind, proc, port, started, stdout_path, stderr_path)


def get_once(port: int, path: str, timeout: float) -> int:
    """One `GET path` on a fresh connection; the status code."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def wait_healthy(server: Server, timeout: float = 30.0) -> float:
    """Poll `/healthz` until 200; return perf_counter() at that answer.

    A refused connect (not bound yet) is retried every 2 ms. Once the socket is bound, the
    request waits in the backlog until hypercorn serves it, so the answer marks readiness exactly.
    """
    deadline = time.perf_counter() + timeout
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"{server.name} server exited with {server.proc.returncode}:\n"
                + server.stderr_tail()
            )
        try:
            remaining = max(0.1, deadline - time.perf_counter())
            if get_once(server.port, "/healthz", timeout=remaining) == 200:
                return time.perf_counter()
        except (ConnectionRefusedError, ConnectionResetError, TimeoutError, OSError):
            pass
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{server.name} server not healthy after {timeout} s")
        time.sleep(0.002)


# ---------------------------------------------------------------------------------------------
# Load generation


@dataclass
class LoadResult:
    requests: int
    seconds: float
    rps: float
    non_2xx: int = 0
    errors: int = 0
    latency_avg_ms: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    server_cpu_s: float = 0.0  # filled in by `measure()`
    other_cpu_s: float = 0.0  # CPU used meanwhile by anything but the server and the generator


_WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def _wrk_ms(text: str, label: str) -> float | None:
    m = re.search(rf"^\s*{re.escape(label)}\s+([\d.]+)(us|ms|s|m)\b", text, re.MULTILINE)
    return float(m.group(1)) * _WRK_UNITS[m.group(2)] if m else None


def run_load(argv: list[str], seconds: int, cpu: int | None, procs: Processes) -> bytes:
    """Run a load generator (wrk or our worker) for `seconds`; its stdout."""
    proc = spawn(
        procs, argv, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cpu=cpu
    )
    try:
        out, err = proc.communicate(timeout=seconds + 30)
    finally:
        Processes.stop(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {err.decode(errors='replace')}")
    return out


def run_wrk(
    port: int, path: str, connections: int, seconds: int, cpu: int | None, procs: Processes
) -> LoadResult:
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    argv += ["-H", f"Authorization: {AUTH_HEADER}", f"http://{HOST}:{port}{path}"]
    text = run_load(argv, seconds, cpu, procs).decode(errors="replace")
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)\b", text)
    if not done:
        raise RuntimeError(f"cannot parse wrk output:\n{text}")
    requests = int(done.group(1))
    elapsed = float(done.group(2)) * _WRK_UNITS[done.group(3)] / 1000
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    sock_err = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    return LoadResult(
        requests=requests,
        seconds=round(elapsed, 3),
        rps=round(requests / elapsed, 1),
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        errors=sum(int(g) for g in sock_err.groups()) if sock_err else 0,
        latency_avg_ms=_wrk_ms(text, "Latency"),
        latency_p50_ms=_wrk_ms(text, "50%"),
        latency_p99_ms=_wrk_ms(text, "99%"),
    )


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r]*chunked", re.IGNORECASE)


class _Client(asyncio.Protocol):
    """One keep-alive connection: send a request, read its whole response, send the next."""

    def __init__(self, request: bytes, run: _Run) -> None:
        self.request = request
        self.run = run
        self.buf = b""
        self.need: int | None = None
        self.status = 0
        self.sent_at = 0.0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send(self) -> None:
        assert self.transport is not None
        self.sent_at = time.perf_counter()
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            if self.need is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buf[:end]
                if _CHUNKED.search(head):
                    self.run.fail("chunked responses are not supported by this client")
                    return
                m = _CONTENT_LENGTH.search(head)
                self.need = end + 4 + (int(m.group(1)) if m else 0)
                self.status = int(head[9:12])
            if len(self.buf) < self.need:
                return
            self.buf = self.buf[self.need :]
            self.need = None
            self.run.record(self.status, time.perf_counter() - self.sent_at)
            if self.run.stopping:
                self.run.idle(self)
                return
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        self.run.lost(self)


@dataclass
class _Run:
    measuring: bool = False
    stopping: bool = False
    requests: int = 0
    non_2xx: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)
    idle_clients: set[_Client] = field(default_factory=set)
    live: int = 0
    all_idle: asyncio.Event = field(default_factory=asyncio.Event)
    failure: str | None = None

    def record(self, status: int, latency: float) -> None:
        if not self.measuring:
            return
        self.requests += 1
        self.latencies.append(latency)
        if not 200 <= status < 300:
            self.non_2xx += 1

    def idle(self, client: _Client) -> None:
        self.idle_clients.add(client)
        if len(self.idle_clients) >= self.live:
            self.all_idle.set()

    def lost(self, client: _Client) -> None:
        self.live -= 1
        if client not in self.idle_clients and not self.stopping:
            self.errors += 1
        if len(self.idle_clients) >= self.live:
            self.all_idle.set()

    def fail(self, message: str) -> None:
        self.failure = message
        self.all_idle.set()


async def _python_load(port: int, path: str, connections: int, seconds: float) -> LoadResult:
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nAuthorization: {AUTH_HEADER}\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    run = _Run()
    clients: list[_Client] = []
    for _ in range(connections):
        _, client = await loop.create_connection(lambda: _Client(request, run), HOST, port)
        clients.append(client)
    run.live = len(clients)
    run.measuring = True
    start = time.perf_counter()
    for client in clients:
        client.send()
    await asyncio.sleep(seconds)
    run.stopping = True
    elapsed = time.perf_counter() - start
    run.measuring = False  # responses still in flight are drained, not counted
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run.all_idle.wait(), 10)
    for client in clients:
        if client.transport is not None:
            client.transport.close()
    if run.failure:
        raise RuntimeError(run.failure)
    lat = sorted(run.latencies)

    def pct(q: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 3) if lat else None

    return LoadResult(
        requests=run.requests,
        seconds=round(elapsed, 3),
        rps=round(run.requests / elapsed, 1),
        non_2xx=run.non_2xx,
        errors=run.errors,
        latency_avg_ms=round(statistics.fmean(lat) * 1000, 3) if lat else None,
        latency_p50_ms=pct(0.5),
        latency_p99_ms=pct(0.99),
    )


def run_python_load(
    port: int, path: str, connections: int, seconds: int, cpu: int | None, procs: Processes
) -> LoadResult:
    """The asyncio client, in its own process (so it never shares the orchestrator's loop)."""
    spec = json.dumps({"port": port, "path": path, "connections": connections, "seconds": seconds})
    argv = [sys.executable, "-m", "bench.http_stack", "--load-worker", spec]
    return LoadResult(**json.loads(run_load(argv, seconds, cpu, procs)))


def load_worker(spec_json: str) -> None:
    spec = json.loads(spec_json)
    result = asyncio.run(
        _python_load(spec["port"], spec["path"], spec["connections"], spec["seconds"])
    )
    print(json.dumps(asdict(result)))


# ---------------------------------------------------------------------------------------------
# The three measurements


def check_hypercorn_parity() -> dict[str, Any]:
    """Compare the bare side's hypercorn settings with
    `app.serve.listeners.hypercorn_config()`'s."""
    from hypercorn.config import Config

    from app.serve.listeners import hypercorn_config
    from app.settings import ServePlan

    real = hypercorn_config(ServePlan("tcp", host=HOST, port=0))
    replica = Config()
    for key, value in HYPERCORN_SETTINGS.items():
        setattr(replica, key, value)
    replica.accesslog = None
    replica.errorlog = logging.getLogger("hypercorn.error")

    def settings(config: Config) -> dict[str, Any]:
        out = {}
        for key, value in vars(config).items():
            if key in ("_bind", "_log"):
                continue
            out[key] = value.name if isinstance(value, logging.Logger) else value
        return out

    want, have = settings(real), settings(replica)
    diff = {
        k: {"foya": want.get(k), "bare": have.get(k)}
        for k in sorted(set(want) | set(have))
        if want.get(k) != have.get(k)
    }
    return {"identical": not diff, "settings": want, "differences": diff}


def measure(
    drive: Any, server: Server, path: str, args: argparse.Namespace, seconds: int, procs: Processes
) -> LoadResult:
    """One bounded load run, with the CPU the server, the generator and everything else used."""
    _, load_cpu = args.cpus
    server0, busy0, ours0 = process_cpu(server.proc.pid), machine_busy(), children_cpu()
    result: LoadResult = drive(server.port, path, args.connections, seconds, load_cpu, procs)
    server_cpu = process_cpu(server.proc.pid) - server0
    ours = children_cpu() - ours0  # the generator (waited for) and this process
    result.server_cpu_s = round(server_cpu, 3)
    result.other_cpu_s = round(max(0.0, machine_busy() - busy0 - server_cpu - ours), 3)
    return result


def throughput(args: argparse.Namespace, procs: Processes, workdir: str) -> dict[str, Any]:
    server_cpu, _ = args.cpus
    data_dir = os.path.join(workdir, "data-throughput")
    full = start_server("full", procs, workdir, server_cpu, "throughput-full", data_dir)
    bare = start_server("bare", procs, workdir, server_cpu, "throughput-bare", data_dir)
    wait_healthy(full, timeout=120)  # the first start may fill the bytecode cache
    wait_healthy(bare, timeout=120)
    # The two servers share a core but never serve load at the same time.
    bare_name = "bare GET /healthz"
    sides = [
        (bare_name, bare, "/healthz"),
        ("full GET /readyz (auth)", full, "/readyz"),
        ("full GET /healthz", full, "/healthz"),
    ]
    drive = run_wrk if args.loadgen == "wrk" else run_python_load
    results: dict[str, list[LoadResult]] = {name: [] for name, _, _ in sides}
    sent = {full.name: 0, bare.name: 0}
    for name, server, path in sides:
        say(f"  warm-up {name} ({args.warmup} s)")
        warm = measure(drive, server, path, args, args.warmup, procs)
        sent[server.name] += warm.requests
    for round_no in range(1, args.rounds + 1):
        order = sides if round_no % 2 else sides[::-1]  # A B C, C B A, ... cancels drift
        for name, server, path in order:
            result = measure(drive, server, path, args, args.duration, procs)
            results[name].append(result)
            sent[server.name] += result.requests
            say(
                f"  round {round_no} {name}: {result.rps:,.0f} req/s, "
                f"{result.server_cpu_s / max(1, result.requests) * 1e6:,.0f} us CPU/req, "
                f"others {result.other_cpu_s / result.seconds:.2f} cores"
            )
    after = {s.name: s.rss_kib() for s in (full, bare)}
    for server in (full, bare):
        Processes.stop(server.proc)
    with open(full.stdout_path, "rb") as fh:
        request_lines = sum(1 for line in fh if b'"event": "request"' in line)

    def summary(name: str) -> dict[str, Any]:
        runs = results[name]
        requests = sum(r.requests for r in runs)
        return {
            "rps_mean": round(statistics.fmean(r.rps for r in runs), 1),
            "rps_median": round(statistics.median(r.rps for r in runs), 1),
            "rps_runs": [r.rps for r in runs],
            "cpu_us_per_request": round(sum(r.server_cpu_s for r in runs) / requests * 1e6, 1),
            "latency_avg_ms": [r.latency_avg_ms for r in runs],
            "latency_p99_ms": [r.latency_p99_ms for r in runs],
            "non_2xx": sum(r.non_2xx for r in runs),
            "errors": sum(r.errors for r in runs),
            "other_load_cores": round(
                sum(r.other_cpu_s for r in runs) / sum(r.seconds for r in runs), 3
            ),
        }

    out = {name: summary(name) for name, _, _ in sides}
    base = out[bare_name]
    for name, _, _ in sides:
        if name != bare_name:
            pairs = zip(results[name], results[bare_name], strict=True)
            out[name]["ratio_vs_bare"] = round(out[name]["rps_mean"] / base["rps_mean"], 3)
            out[name]["ratio_per_round"] = [round(f.rps / b.rps, 3) for f, b in pairs]
            out[name]["cpu_ratio_vs_bare"] = round(
                base["cpu_us_per_request"] / out[name]["cpu_us_per_request"], 3
            )
    return {
        "loadgen": args.loadgen,
        "connections": args.connections,
        "seconds_per_run": args.duration,
        "rounds": args.rounds,
        "sides": out,
        "other_load_cores": round(statistics.fmean(v["other_load_cores"] for v in out.values()), 3),
        "rss_after_load_kib": after,
        "full_log_lines_request": request_lines,
        "full_requests_counted_by_generator": sent["full"],
    }


def startup_and_rss(args: argparse.Namespace, procs: Processes, workdir: str) -> dict[str, Any]:
    server_cpu, _ = args.cpus
    times: dict[str, list[float]] = {"full": [], "bare": []}
    cpu: dict[str, list[float]] = {"full": [], "bare": []}
    rss: dict[str, list[int]] = {"full": [], "bare": []}
    data_dir = os.path.join(workdir, "data-startup")
    for run_no in range(args.startup_runs + 1):  # run 0 warms the page cache; not counted
        order = ("full", "bare") if run_no % 2 else ("bare", "full")
        for kind in order:
            server = start_server(kind, procs, workdir, server_cpu, f"startup-{kind}", data_dir)
            try:
                ready = wait_healthy(server, timeout=120 if run_no == 0 else 30)
                cpu_at_ready = process_cpu(server.proc.pid)
                time.sleep(args.settle)
                status = server.rss_kib()
            finally:
                Processes.stop(server.proc)
            if server.proc.returncode not in (0, -signal.SIGTERM):
                say(f"  warning: {kind} exited with {server.proc.returncode}")
            if run_no == 0:
                continue
            times[kind].append(round(ready - server.started, 4))
            cpu[kind].append(round(cpu_at_ready, 3))
            rss[kind].append(status["VmRSS"])
            say(
                f"  startup run {run_no} {kind}: {times[kind][-1] * 1000:.0f} ms "
                f"({cpu_at_ready * 1000:.0f} ms CPU), VmRSS {status['VmRSS'] / 1024:.1f} MiB"
            )
    median_s = {k: round(statistics.median(v), 4) for k, v in times.items()}
    median_cpu = {k: round(statistics.median(v), 3) for k, v in cpu.items()}
    median_rss = {k: int(statistics.median(v)) for k, v in rss.items()}
    return {
        "startup": {
            "runs": times,
            "median_s": median_s,
            "ratio": round(median_s["full"] / median_s["bare"], 3),
            "cpu_runs": cpu,
            "cpu_median_s": median_cpu,
            "cpu_ratio": round(median_cpu["full"] / median_cpu["bare"], 3),
        },
        "idle_rss": {
            "settle_s": args.settle,
            "runs_kib": rss,
            "median_kib": median_rss,
            "full_mb": round(median_rss["full"] * 1024 / 1e6, 1),
            "bare_mb": round(median_rss["bare"] * 1024 / 1e6, 1),
        },
    }


# ---------------------------------------------------------------------------------------------
# Output


def table_rows(results: dict[str, Any]) -> list[Row]:
    """The three figures of the issue, each against its target."""
    tp, st, mem = results["throughput"], results["startup"], results["idle_rss"]
    readyz = tp["sides"]["full GET /readyz (auth)"]
    bare = next(v for k, v in tp["sides"].items() if k.startswith("bare"))
    return [
        Row(
            "throughput req/s, authenticated /readyz (full vs bare)",
            f"{readyz['rps_mean']:,.0f}",
            f"{bare['rps_mean']:,.0f}",
            f"{readyz['ratio_vs_bare']:.2f}x",
            f">= {TARGET_THROUGHPUT_RATIO}x",
            at_least(readyz["ratio_vs_bare"], TARGET_THROUGHPUT_RATIO),
        ),
        Row(
            "idle RSS of foya serve, MB",
            f"{mem['full_mb']:.1f}",
            f"{mem['bare_mb']:.1f}",
            f"{mem['full_mb'] / mem['bare_mb']:.2f}x",
            f"<= {TARGET_RSS_MB:.0f}",
            at_most(mem["full_mb"], TARGET_RSS_MB),
        ),
        Row(
            "exec -> first /healthz 200, ms (full vs bare)",
            f"{st['median_s']['full'] * 1000:.0f}",
            f"{st['median_s']['bare'] * 1000:.0f}",
            f"{st['ratio']:.2f}x",
            f"<= {TARGET_STARTUP_RATIO}x",
            at_most(st["ratio"], TARGET_STARTUP_RATIO),
        ),
    ]


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def render(results: dict[str, Any]) -> str:
    tp, st, mem = results["throughput"], results["startup"], results["idle_rss"]
    meta = results["meta"]
    lines = [
        f"Foya HTTP benchmark  ({meta['python']}, hypercorn {meta['hypercorn']}, "
        f"{meta['cpus']} CPUs, pinning: {meta['pinning']})",
        f"hypercorn settings identical to app.serve.listeners.hypercorn_config(): "
        f"{results['hypercorn_parity']['identical']}",
        "",
        f"1. Throughput  ({tp['loadgen']}, {tp['connections']} keep-alive connections, "
        f"{tp['rounds']} rounds x {tp['seconds_per_run']} s per side, alternating)",
        f"   {'side':<24} {'req/s':>7} {'per round':>20} {'avg ms':>7} {'err':>4} "
        f"{'ratio':>6} {'CPU us/req':>11} {'CPU ratio':>9}",
    ]
    for name, side in tp["sides"].items():
        rounds = " ".join(f"{r:.0f}" for r in side["rps_runs"])
        avg = [x for x in side["latency_avg_ms"] if x is not None]
        ratio = f"{side.get('ratio_vs_bare', 1.0):.2f}x"
        cpu_ratio = f"{side.get('cpu_ratio_vs_bare', 1.0):.2f}x"
        lines.append(
            f"   {name:<24} {side['rps_mean']:>7.0f} {rounds:>20} "
            f"{statistics.fmean(avg) if avg else float('nan'):>7.2f} "
            f"{side['non_2xx'] + side['errors']:>4} {ratio:>6} "
            f"{side['cpu_us_per_request']:>11.0f} {cpu_ratio:>9}"
        )
    readyz = tp["sides"]["full GET /readyz (auth)"]
    healthz = tp["sides"]["full GET /healthz"]
    ok = readyz["ratio_vs_bare"] >= TARGET_THROUGHPUT_RATIO
    lines += [
        f"   full/bare req/s, authenticated /readyz: {readyz['ratio_vs_bare']:.2f}x  "
        f"(target >= {TARGET_THROUGHPUT_RATIO}x: {verdict(ok)}); "
        f"/healthz: {healthz['ratio_vs_bare']:.2f}x",
        f"   full/bare by server CPU per request:    {readyz['cpu_ratio_vs_bare']:.2f}x; "
        f"/healthz: {healthz['cpu_ratio_vs_bare']:.2f}x",
        f"   foya wrote {tp['full_log_lines_request']:,} request log lines "
        f"for {tp['full_requests_counted_by_generator']:,} responses counted by the generator",
        f"   VmRSS after load: full {tp['rss_after_load_kib']['full']['VmRSS'] / 1024:.1f} MiB "
        f"(peak {tp['rss_after_load_kib']['full']['VmHWM'] / 1024:.1f}), "
        f"bare {tp['rss_after_load_kib']['bare']['VmRSS'] / 1024:.1f} MiB",
    ]
    if tp["other_load_cores"] > BUSY_CORES:
        lines.append(
            f"   NOTE: other processes used {tp['other_load_cores']:.2f} cores on average "
            "during the runs; req/s is disturbed, the CPU-per-request ratio much less so"
        )
    lines += [
        "",
        f"2. Idle resident memory  (VmRSS {mem['settle_s']} s after the first /healthz 200, "
        f"median of {len(mem['runs_kib']['full'])})",
        f"   foya serve: {mem['median_kib']['full'] / 1024:.1f} MiB = {mem['full_mb']:.1f} MB  "
        f"(target <= {TARGET_RSS_MB:.0f} MB: {verdict(mem['full_mb'] <= TARGET_RSS_MB)})",
        f"   bare app:   {mem['median_kib']['bare'] / 1024:.1f} MiB = {mem['bare_mb']:.1f} MB",
        "",
        f"3. Startup  (exec to first /healthz 200, median of {len(st['runs']['full'])}; "
        "CPU = the server's own CPU time until then)",
    ]
    for kind, label in (("full", "foya serve"), ("bare", "bare app")):
        runs = " ".join(f"{t * 1000:.0f}" for t in st["runs"][kind])
        lines.append(
            f"   {label + ':':<11} {st['median_s'][kind] * 1000:>5.0f} ms  "
            f"(CPU {st['cpu_median_s'][kind] * 1000:.0f} ms)   runs {runs}"
        )
    ok = st["ratio"] <= TARGET_STARTUP_RATIO
    lines += [
        f"   full/bare: {st['ratio']:.2f}x  (target <= {TARGET_STARTUP_RATIO}x: {verdict(ok)}); "
        f"by CPU time: {st['cpu_ratio']:.2f}x",
        "",
        *table(rows_of(results)),
        "",
        *verdicts(rows_of(results)),
        f"total {meta['elapsed_s']:.0f} s",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


QUICK = {"duration": 2, "rounds": 1, "warmup": 1, "startup_runs": 3, "settle": 0.5}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    p.add_argument("--quick", action="store_true", help=f"a short run: {QUICK}")
    p.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    p.add_argument("--connections", type=int, default=16, help="keep-alive connections")
    p.add_argument("--duration", type=int, default=3, help="seconds per measured run")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per side")
    p.add_argument("--warmup", type=int, default=1, help="seconds of warm-up per side")
    p.add_argument("--startup-runs", type=int, default=5, help="startup runs per side")
    p.add_argument("--settle", type=float, default=1.0, help="seconds before reading VmRSS")
    p.add_argument("--no-pin", action="store_true", help="don't pin servers and load to cores")
    p.add_argument("--load-worker", metavar="SPEC", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.load_worker:
        load_worker(args.load_worker)
        return 0
    if args.quick:
        vars(args).update(QUICK)
    if args.loadgen == "auto":
        args.loadgen = "wrk" if shutil.which("wrk") else "python"
    elif args.loadgen == "wrk" and not shutil.which("wrk"):
        say("wrk not found; using the Python load generator")
        args.loadgen = "python"
    cpus = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cpus) >= 2
    args.cpus = (cpus[-1], cpus[0]) if pin else (None, None)  # (servers, load generator)
    if pin:
        os.sched_setaffinity(0, {cpus[0]})  # our own polling stays off the servers' core

    import hypercorn

    # A SIGTERM unwinds like Ctrl-C, through the `finally` that stops every child by PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.perf_counter()
    parity = check_hypercorn_parity()
    if not parity["identical"]:
        say(f"warning: bare hypercorn settings differ from foya's: {parity['differences']}")
    procs = Processes()
    results: dict[str, Any] = {}
    try:
        with workspace() as workdir:
            say(f"throughput ({args.loadgen}):")
            results["throughput"] = throughput(args, procs, workdir)
            say("startup and idle memory:")
            results.update(startup_and_rss(args, procs, workdir))
    finally:
        procs.stop_all()
    results["hypercorn_parity"] = parity
    results["meta"] = {
        "python": python(),
        "quick": args.quick,
        "hypercorn": getattr(hypercorn, "__version__", None) or dist_version("hypercorn"),
        "cpus": len(cpus),
        "pinning": f"servers cpu {args.cpus[0]}, load cpu {args.cpus[1]}" if pin else "off",
        "elapsed_s": round(time.perf_counter() - began, 1),
        "bytecode_cache": PYCACHE,
    }
    finish(results, table_rows(results), render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
