"""Turns benchmark: model deltas through a real `foya serve` turn vs straight from the provider.

Run from the repository root:

    .venv/bin/python bench/turns.py            # table on stdout, progress on stderr
    .venv/bin/python bench/turns.py --json     # machine-readable results on stdout

Three processes besides this (orchestrating) one, all on 127.0.0.1 or a Unix socket:

- fake provider: this file in a hidden `--fake` mode, a Starlette app under hypercorn on a free
  127.0.0.1 port. `POST /v1/chat/completions` with `stream: true` answers with a role chunk, N
  `chat.completion.chunk` frames whose `delta.content` is `f"{i:05d} "` (6 characters), a finish
  chunk, a usage chunk (when `stream_options.include_usage`) and `data: [DONE]`, each frame its
  own `send()` (as a real provider writes them), as fast as the socket takes them. N comes from
  the last user message, `deltas=N`. Frames are string templates, so the fake costs little CPU.
- kernel: the real `python -m app serve --socket PATH` in a temporary data dir
  (FOYA_LOG_FORMAT=json, stdout to a file). A connection points at the fake
  (`POST /connections`, api_key "bench", models ["m"]); sessions use approval_mode full_access.
- client: this file in a hidden `--client` mode, taking commands as JSON lines on stdin. It runs
  both sides with the same code (httpx, `aiter_lines`, `json.loads` of every `data:` line):
  - direct: `POST /v1/chat/completions` straight to the fake;
  - kernel: `GET /sessions/{id}/events` over the Unix socket, wait for the `: ok` comment (the
    subscription is live), then `POST /sessions/{id}/turns {"message": "deltas=N"}`, count
    `message_delta` frames until `turn_complete`, then wait for the `session_updated` that sets
    the phase back to idle before the next turn.

Timestamps are `time.monotonic_ns()`, all taken in the client process.

1. Throughput: a turn of 20k deltas. deltas/s = deltas of text received / (last delta frame -
   first delta frame), as the client sees them; text is counted in deltas of 6 characters, so
   the figure stays right should the kernel ever merge deltas into fewer frames (frames are
   reported too). The kernel publishes deltas lossily (`Broker.publish`: dropped when the
   subscriber's 256-slot buffer is full), so the kernel side also reports how many of the 20k
   arrived, the broker's `foya_broker_dropped_deltas_total` over the run (from `/metrics`),
   whether the joined `message_delta` texts and the assistant `message_end` each hold the
   complete text, and how fast the kernel consumed the provider's stream whatever reached the
   client (20k / first delta received -> assistant `message_end` received). A warm-up run per
   side, then rounds alternating direct/kernel (order flipped every round); medians over rounds.
   Every kernel throughput turn gets a fresh session, so every request carries the same short
   history. CPU seconds of the kernel, the fake and the client over each run come from
   /proc/PID/stat; before each run the script waits (bounded, `--quiet-budget`) for other load
   on the machine to drop.
2. Time to first delta: 15 pairs of short turns (20 deltas), alternating, after two warm-up
   pairs. Direct: request sent -> first content delta. Kernel: POST /turns sent -> first
   `message_delta` frame. Overhead = p50 of (kernel - direct) over pairs. These turns share one
   session (a conversation of short messages). The median receipt time of every event kind of
   the kernel turn (POST answered, session_updated, message_end user, turn_started, first delta,
   ...) is printed as a timeline: where the time to first delta goes.

`--profile py-spy|cprofile` then profiles the kernel over one more 20k-delta turn and over 30
short turns, and summarises where its time went. py-spy (PATH or /tmp/pyspy/bin/py-spy) samples
every thread of the running kernel from outside; cProfile starts a fresh kernel per phase under
`python -m cProfile` (event-loop thread only, startup included in its totals).

Processes are not pinned (`--pin` pins the kernel to one core, fake and client to the other).
Traffic goes only to 127.0.0.1 and the Unix socket. Every process started is stopped by PID
(SIGTERM, then SIGKILL) in a finally block; the kernel also gets FOYA_PARENT_PID. No assertion is
made on any figure: targets are printed next to the results.
"""

from __future__ import annotations

# First of all: importing `common` drops bench/ from sys.path, where bench/http.py would
# shadow the standard library's `http` package, and makes the repository importable.
from common import (
    ROOT,
    SPY_FRAME,
    Processes,
    Quiet,
    child_env,
    fs_type,
    machine_busy,
    now_ns,
    percentile,
    pinned,
    process_cpu,
    say,
    short_path,
    workspace,
)

# isort: split

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import select
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

HOST = "127.0.0.1"
MODEL = "m"
API_KEY = "bench"
TARGET_RATE_RATIO = 0.5  # kernel / direct deltas/s, at least
TARGET_TTFD_OVERHEAD_MS = 5.0  # p50 of kernel - direct time to first delta, at most
RUN_TIMEOUT = 60.0  # seconds, any one run


DELTA_CHARS = 6


def delta_text(i: int) -> str:
    """The i-th content delta: always DELTA_CHARS characters, no JSON escaping needed."""
    return f"{i % 100_000:05d} "


def expected_text(n: int) -> str:
    return "".join(delta_text(i) for i in range(n))


_DELTAS = re.compile(r"deltas=(\d+)")


# ---------------------------------------------------------------------------------------------
# Fake provider (hidden `--fake`): Starlette + hypercorn, prints {"port": N} once listening


def _fake_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    created = int(time.time())

    def envelope(model: str) -> str:
        return (
            f'data: {{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":{created},'
            f'"model":{json.dumps(model)},"system_fingerprint":null,'
        )

    async def completions(request: Request) -> Response:
        body = await request.json()
        model = str(body.get("model") or MODEL)
        users = [m for m in body.get("messages") or () if m.get("role") == "user"]
        found = _DELTAS.search(str(users[-1].get("content") or "")) if users else None
        n = int(found.group(1)) if found else 10
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": expected_text(n)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": n,
                        "total_tokens": prompt_tokens + n,
                    },
                }
            )
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        head = envelope(model)
        pre = head + '"choices":[{"index":0,"delta":{"content":"'
        post = '"},"logprobs":null,"finish_reason":null}]}\n\n'

        async def frames() -> Any:
            yield (
                head + '"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                '"logprobs":null,"finish_reason":null}]}\n\n'
            ).encode()
            for i in range(n):
                yield (pre + delta_text(i) + post).encode()
            yield (
                head + '"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}'
                "\n\n"
            ).encode()
            if usage:
                yield (
                    head + f'"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},'
                    f'"completion_tokens":{n},"total_tokens":{prompt_tokens + n}}}}}\n\n'
                ).encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(
            frames(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def models(_: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]}
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


async def _fake_main() -> None:
    import logging
    import socket

    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    logging.basicConfig(level=logging.WARNING)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((HOST, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = Config()
    config.keep_alive_timeout = 300  # never close the kernel's pooled connection mid-benchmark
    config.include_server_header = False
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.bind = [f"fd://{sock.detach()}"]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = asyncio.create_task(serve(_fake_app(), config, shutdown_trigger=stop.wait))
    await asyncio.sleep(0)
    print(json.dumps({"port": port, "pid": os.getpid()}), flush=True)
    await server


# ---------------------------------------------------------------------------------------------
# Client (hidden `--client`): one process, both sides, commands as JSON lines on stdin


class ClientWorker:
    def __init__(self) -> None:
        self.direct: Any = None
        self.kernel: Any = None

    async def run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        import httpx

        op = cmd["op"]
        if op == "setup":
            timeout = httpx.Timeout(RUN_TIMEOUT)
            self.direct = httpx.AsyncClient(
                base_url=f"http://{HOST}:{cmd['fake_port']}", timeout=timeout, trust_env=False
            )
            self.kernel = httpx.AsyncClient(
                base_url="http://foya",
                transport=httpx.AsyncHTTPTransport(uds=cmd["socket"]),
                timeout=timeout,
                trust_env=False,
            )
            return {"ok": True}
        if op == "direct":
            return await asyncio.wait_for(self.direct_run(cmd["n"]), RUN_TIMEOUT)
        if op == "kernel":
            return await asyncio.wait_for(self.kernel_run(cmd["session"], cmd["n"]), RUN_TIMEOUT)
        raise ValueError(f"unknown op {op!r}")

    async def direct_run(self, n: int) -> dict[str, Any]:
        body = {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are a benchmark."},
                {"role": "user", "content": f"deltas={n}"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"authorization": f"Bearer {API_KEY}"}
        parts: list[str] = []
        first = last = 0
        finish = None
        usage = None
        done = False
        t0 = now_ns()
        async with self.direct.stream(
            "POST", "/v1/chat/completions", json=body, headers=headers
        ) as resp:
            t_head = now_ns()
            if resp.status_code != 200:
                return {"problem": f"HTTP {resp.status_code}"}
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        last = now_ns()
                        first = first or last
                        parts.append(text)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        t_end = now_ns()
        text = "".join(parts)
        problem = None
        if not done or finish != "stop" or usage is None:
            problem = f"incomplete stream (done {done}, finish {finish}, usage {bool(usage)})"
        return {
            "t0": t0,
            "first": first,
            "last": last,
            "end": t_end,
            "marks": {"response_head": t_head - t0},
            "received": len(parts),
            "received_chars": len(text),
            "complete": text == expected_text(n),
            "text_len": len(text),
            "problem": problem,
        }

    async def kernel_run(self, session: str, n: int) -> dict[str, Any]:
        parts: list[str] = []
        first = last = 0
        final: str | None = None
        complete_at = 0
        turn_status = None
        kinds: dict[str, int] = {}
        marks: dict[str, int] = {}  # first receipt of each kind (or "kind:detail"), ns after t0
        post: asyncio.Task[Any] | None = None
        t0 = 0
        async with self.kernel.stream(
            "GET", f"/sessions/{session}/events", headers={"accept": "text/event-stream"}
        ) as resp:
            if resp.status_code != 200:
                return {"problem": f"events: HTTP {resp.status_code}"}
            lines = resp.aiter_lines()
            async for line in lines:
                if line.startswith(":"):
                    break  # `: ok`: subscribed
            t0 = now_ns()
            post = asyncio.create_task(
                self.kernel.post(f"/sessions/{session}/turns", json={"message": f"deltas={n}"})
            )
            post.add_done_callback(
                lambda _: marks.setdefault("POST /turns answered", now_ns() - t0)
            )
            kind = ""
            async for line in lines:
                if line.startswith("event: "):
                    kind = line[7:]
                    continue
                if not line.startswith("data: "):
                    continue
                if kind == "message_delta":
                    t = now_ns()
                    first = first or t
                    last = t
                    parts.append(json.loads(line[6:])["payload"])
                    continue
                kinds[kind] = kinds.get(kind, 0) + 1
                payload = json.loads(line[6:]).get("payload")
                mark = kind
                if kind == "message_end":
                    mark = f"message_end {payload.get('role')}"
                elif kind == "session_updated":
                    mark = f"session_updated {payload.get('phase')}"
                marks.setdefault(mark, now_ns() - t0)
                if kind == "message_end" and payload.get("role") == "assistant":
                    final = payload.get("content")
                elif kind == "turn_complete":
                    complete_at = now_ns()
                    turn_status = payload.get("status")
                elif kind == "session_updated" and complete_at and payload.get("phase") == "idle":
                    break
                elif kind == "error":
                    turn_status = f"error: {payload}"
        t_end = now_ns()
        answer = await post
        accepted = answer.json().get("status") if answer.status_code == 200 else None
        problems = []
        if answer.status_code != 200 or accepted != "started":
            problems.append(f"POST /turns: HTTP {answer.status_code} {accepted}")
        if turn_status != "completed":
            problems.append(f"turn {turn_status}")
        want = expected_text(n)
        received_text = "".join(parts)
        return {
            "t0": t0,
            "first": first,
            "last": last,
            "complete_at": complete_at,
            "end": t_end,
            "received": len(parts),
            "marks": marks,
            "received_chars": len(received_text),
            "received_text_matches": received_text == want,
            "complete": final == want,
            "text_len": len(final or ""),
            "other_events": kinds,
            "problem": "; ".join(problems) or None,
        }


async def _client_main() -> None:
    worker = ClientWorker()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return  # the orchestrator went away
        try:
            reply = await worker.run(json.loads(line))
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)


# ---------------------------------------------------------------------------------------------
# Orchestrator: processes


class Child:
    """A child speaking JSON lines on stdout (and taking commands on stdin)."""

    def __init__(
        self, name: str, argv: list[str], procs: Any, workdir: str, cpu: int | None, env: Any
    ) -> None:
        self.name = name
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc: subprocess.Popen[bytes] = procs.add(
                subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    preexec_fn=pinned(cpu),
                )
            )

    def reply(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise RuntimeError(f"{self.name}: no reply in {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited:\n{self.stderr_tail()}")
        out: dict[str, Any] = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.name}: {out['error']}")
        return out

    def call(self, cmd: dict[str, Any], timeout: float = RUN_TIMEOUT + 10) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return self.reply(timeout)

    def stderr_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError), open(self.stderr_path, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
        return ""


class Kernel:
    """`python -m app serve --socket PATH` (optionally under cProfile), driven over httpx."""

    def __init__(
        self, procs: Any, workdir: str, tag: str, cpu: int | None, profile_to: str | None = None
    ) -> None:
        import httpx

        self.data_dir = os.path.join(workdir, f"data-{tag}")
        self.socket = os.path.join(self.data_dir, "kernel.sock")
        self.stdout_path = os.path.join(workdir, f"{tag}.stdout")
        self.stderr_path = os.path.join(workdir, f"{tag}.stderr")
        argv = [sys.executable]
        if profile_to:
            argv += ["-m", "cProfile", "-o", profile_to]
        argv += ["-m", "app", "serve", "--socket", self.socket]
        env = child_env(
            {
                "FOYA_DATA_DIR": self.data_dir,
                "FOYA_LOG_FORMAT": "json",
                "FOYA_LOG_LEVEL": "info",
                "FOYA_PARENT_PID": str(os.getpid()),
                "XDG_CONFIG_HOME": os.path.join(workdir, "xdg"),
                "NO_PROXY": "127.0.0.1,localhost",
            }
        )
        for key in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            env.pop(key, None)
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc: subprocess.Popen[bytes] = procs.add(
                subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    preexec_fn=pinned(cpu),
                )
            )
        self.http = httpx.Client(
            base_url="http://foya",
            transport=httpx.HTTPTransport(uds=self.socket),
            timeout=30.0,
            trust_env=False,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kernel exited with {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(httpx.TransportError):
                if self.http.get("/healthz").status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"kernel not healthy after {timeout} s:\n{self.tail()}")
            time.sleep(0.01)

    def tail(self, lines: int = 20) -> str:
        out = []
        for path in (self.stderr_path, self.stdout_path):
            with contextlib.suppress(OSError), open(path, errors="replace") as fh:
                out += fh.readlines()[-lines:]
        return "".join(out)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.http.post(path, json=body)
        if resp.status_code not in (200, 201):
            raise RuntimeError(f"POST {path}: HTTP {resp.status_code} {resp.text[:300]}")
        out: dict[str, Any] = resp.json()
        return out

    def setup(self, fake_port: int) -> str:
        """The connection to the fake; returns its id."""
        connection = self.post(
            "/connections",
            {
                "name": "bench fake",
                "base_url": f"http://{HOST}:{fake_port}/v1",
                "api_key": API_KEY,
                "models": [MODEL],
            },
        )
        return str(connection["id"])

    def new_session(self, connection: str) -> str:
        body = {"connection_id": connection, "model": MODEL, "approval_mode": "full_access"}
        return str(self.post("/sessions", body)["id"])

    def dropped(self) -> float:
        text = self.http.get("/metrics").text
        found = re.search(r"^foya_broker_dropped_deltas_total (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else float("nan")

    def log_problems(self) -> list[str]:
        """Error-level lines of the kernel's JSON log."""
        out = []
        with contextlib.suppress(OSError), open(self.stdout_path, errors="replace") as fh:
            for line in fh:
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if entry.get("level") in ("error", "critical", "exception"):
                        out.append(str(entry.get("event"))[:200])
        return out

    def close(self) -> None:
        self.http.close()
        Processes.stop(self.proc)


# ---------------------------------------------------------------------------------------------
# Measurements


QUIET = Quiet(0.0)


class CPU:
    """CPU seconds of each of our processes and of everything else, over one run."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.used: dict[str, float] = {}

    def __enter__(self) -> CPU:
        self.t0 = time.monotonic()
        self.start = {k: process_cpu(p) for k, p in self.pids.items()}
        self.busy0 = machine_busy()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.monotonic() - self.t0
        self.used = {k: process_cpu(p) - self.start[k] for k, p in self.pids.items()}
        busy = machine_busy() - self.busy0
        self.used["others"] = max(0.0, busy - sum(self.used.values()))


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def throughput_run(
    side: str, client: Child, kernel: Kernel, connection: str, n: int, pids: dict[str, int]
) -> dict[str, Any]:
    dropped0 = kernel.dropped()
    cmd: dict[str, Any] = {"op": side, "n": n}
    if side == "kernel":
        cmd["session"] = kernel.new_session(connection)
    QUIET.wait()
    with CPU(pids) as cpu:
        try:
            r = client.call(cmd)
        except RuntimeError as exc:  # a timeout or a client failure: record it, go on
            r = {"problem": str(exc)[:300]}
    if "t0" not in r or not r.get("first"):
        problem = r.get("problem") or "no delta received"
        return {"problem": problem, "rate": 0.0, "consumed_rate": 0.0, "received": 0}
    span = max(1, r["last"] - r["first"])
    out = {
        # Frames (kernel: message_delta events; direct: chunks with content) ...
        "received": r["received"],
        # ... and the text they carried, counted in deltas of DELTA_CHARS: the rate stays right
        # if the kernel ever merges several deltas into one frame.
        "received_deltas_of_text": r["received_chars"] // DELTA_CHARS,
        "rate": round(r["received_chars"] / DELTA_CHARS / (span / 1e9), 1),
        "first_to_last_s": round(span / 1e9, 4),
        "ttfd_ms": _ms(r["first"] - r["t0"]),
        "request_to_last_delta_s": round((r["last"] - r["t0"]) / 1e9, 4),
        "request_to_end_s": round((r["end"] - r["t0"]) / 1e9, 4),
        "complete": r["complete"],
        "text_len": r["text_len"],
        "cpu_s": {k: round(v, 3) for k, v in cpu.used.items()},
        "cpu_us_per_delta": {
            k: round(v / max(1, n) * 1e6, 2) for k, v in cpu.used.items() if k != "others"
        },
        "others_cores": round(cpu.used["others"] / max(cpu.seconds, 1e-9), 3),
        "problem": r["problem"],
    }
    if side == "kernel":
        out["dropped_by_broker"] = kernel.dropped() - dropped0
        out["received_text_matches"] = r["received_text_matches"]
        out["post_to_turn_complete_s"] = round((r["complete_at"] - r["t0"]) / 1e9, 4)
        # How fast the kernel consumed the provider's stream, whatever reached the client: all
        # n deltas between the first delta received and the assistant message_end received.
        end = r["t0"] + r["marks"].get("message_end assistant", r["last"] - r["t0"])
        out["consumed_rate"] = round(n / (max(1, end - r["first"]) / 1e9), 1)
        out["other_events"] = r["other_events"]
    else:
        out["consumed_rate"] = out["rate"]
    return out


def throughput(
    args: argparse.Namespace, client: Child, kernel: Kernel, connection: str, pids: dict[str, int]
) -> dict[str, Any]:
    n = args.deltas
    runs: dict[str, list[dict[str, Any]]] = {"direct": [], "kernel": []}
    for side in ("direct", "kernel"):
        warm = throughput_run(side, client, kernel, connection, max(500, n // 10), pids)
        say(f"  warm-up {side}: {warm['rate']:,.0f} deltas/s")
    for round_no in range(1, args.rounds + 1):
        order = ("direct", "kernel") if round_no % 2 else ("kernel", "direct")
        for side in order:
            run = throughput_run(side, client, kernel, connection, n, pids)
            runs[side].append(run)
            extra = ""
            if side == "kernel":
                extra = (
                    f", dropped {run.get('dropped_by_broker', 0):,.0f}, "
                    f"message_end complete {run.get('complete')}"
                )
            say(
                f"  round {round_no} {side}: {run['rate']:,.0f} deltas/s, "
                f"{run['received']:,}/{n:,} received{extra}, "
                f"cpu/delta us {run.get('cpu_us_per_delta')}"
                + (f"  PROBLEM {run['problem']}" if run.get("problem") else "")
            )
            time.sleep(0.1)
    out: dict[str, Any] = {"deltas": n, "rounds": args.rounds, "runs": runs}
    for side, rs in runs.items():
        out[side] = {
            "rate_median": statistics.median(r["rate"] for r in rs),
            "received_median": statistics.median(r["received"] for r in rs),
            "received_min": min(r["received"] for r in rs),
            "text_deltas_median": statistics.median(
                r.get("received_deltas_of_text", 0) for r in rs
            ),
            "text_deltas_min": min(r.get("received_deltas_of_text", 0) for r in rs),
            "all_complete": all(r.get("complete") for r in rs),
            "consumed_rate_median": statistics.median(r.get("consumed_rate", 0.0) for r in rs),
            "request_to_end_s_median": statistics.median(
                r.get("request_to_end_s", 0.0) for r in rs
            ),
            "cpu_us_per_delta_median": {
                k: statistics.median(r["cpu_us_per_delta"][k] for r in rs)
                for k in rs[0].get("cpu_us_per_delta", {})
            },
            "others_cores_max": max(r.get("others_cores", 0.0) for r in rs),
            "problems": [r["problem"] for r in rs if r.get("problem")],
        }
    k = out["kernel"]
    k["all_received_text_matches"] = all(r.get("received_text_matches") for r in runs["kernel"])
    k["dropped_by_broker_median"] = statistics.median(
        r.get("dropped_by_broker", 0) for r in runs["kernel"]
    )
    k["post_to_turn_complete_s_median"] = statistics.median(
        r.get("post_to_turn_complete_s", 0.0) for r in runs["kernel"]
    )
    out["ratio"] = round(k["rate_median"] / out["direct"]["rate_median"], 3)
    out["ratio_per_round"] = [
        round(a["rate"] / b["rate"], 3) if b["rate"] else None
        for a, b in zip(runs["kernel"], runs["direct"], strict=True)
    ]
    return out


def ttfd(
    args: argparse.Namespace, client: Child, kernel: Kernel, connection: str
) -> dict[str, Any]:
    n = args.short_deltas
    session = kernel.new_session(connection)
    pairs: list[dict[str, Any]] = []
    problems: list[str] = []
    marks: dict[str, dict[str, list[float]]] = {"kernel": {}, "direct": {}}
    for i in range(args.warmup_pairs + args.pairs):
        order = ("direct", "kernel") if i % 2 else ("kernel", "direct")
        got: dict[str, float] = {}
        for side in order:
            cmd: dict[str, Any] = {"op": side, "n": n}
            if side == "kernel":
                cmd["session"] = session
            try:
                r = client.call(cmd)
            except RuntimeError as exc:  # a timeout or a client failure: record it, go on
                r = {"problem": str(exc)[:300]}
            got_all = r.get("received_chars") == n * DELTA_CHARS
            if r.get("problem") or not r.get("complete") or not got_all:
                problems.append(
                    f"pair {i} {side}: {r.get('problem')}, received {r.get('received')}, "
                    f"complete {r.get('complete')}"
                )
            if "t0" in r and r.get("first"):
                got[side] = (r["first"] - r["t0"]) / 1e6
                if i >= args.warmup_pairs:
                    for name, ns in r.get("marks", {}).items():
                        marks[side].setdefault(name, []).append(ns / 1e6)
                    marks[side].setdefault("first delta", []).append(got[side])
            time.sleep(0.02)
        if i >= args.warmup_pairs and len(got) == 2:
            pairs.append({**got, "overhead": got["kernel"] - got["direct"]})
    if not pairs:
        return {"pairs": 0, "problems": problems}

    def stats(key: str) -> dict[str, float]:
        values = [p[key] for p in pairs]
        return {
            "p50_ms": round(statistics.median(values), 3),
            "p90_ms": round(percentile(values, 0.9), 3),
            "min_ms": round(min(values), 3),
            "max_ms": round(max(values), 3),
        }

    out = {
        "deltas_per_turn": n,
        "pairs": len(pairs),
        "direct": stats("direct"),
        "kernel": stats("kernel"),
        "overhead": stats("overhead"),
        "overhead_runs_ms": [round(p["overhead"], 3) for p in pairs],
        # Median receipt time of each event kind after the request was sent (kernel side), in
        # the order they arrive: where the time to first delta goes.
        "timeline_p50_ms": {
            side: dict(
                sorted(
                    ((name, round(statistics.median(v), 3)) for name, v in m.items()),
                    key=lambda kv: kv[1],
                )
            )
            for side, m in marks.items()
        },
        "problems": problems,
    }
    say(
        f"  TTFD p50: kernel {out['kernel']['p50_ms']:.2f} ms, direct "
        f"{out['direct']['p50_ms']:.2f} ms, overhead p50 {out['overhead']['p50_ms']:.2f} ms"
    )
    return out


# ---------------------------------------------------------------------------------------------
# Profiling


def _pyspy_summary(raw_path: str) -> dict[str, Any]:
    """py-spy raw stacks (root first): share of samples by thread, by own frame, by innermost
    `app/` frame, and by function anywhere on the stack below the event loop (inclusive)."""
    threads: dict[str, int] = {}
    own: dict[str, int] = {}
    innermost: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    with open(raw_path) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = stack.split(";")
            thread = "store thread" if "foya-store" in frames[0] else "other threads"
            if "MainThread" in frames[0]:
                thread = "event loop thread"
            threads[thread] = threads.get(thread, 0) + n
            where = []
            for frame in frames[1:]:
                m = SPY_FRAME.match(frame)
                where.append(
                    (m["func"], short_path(m["file"]), m["line"]) if m else (frame, "", "")
                )
            if not where:
                continue
            func, file, line_no = where[-1]
            key = f"{func} ({file}:{line_no})"
            own[key] = own.get(key, 0) + n
            app_frames = [w for w in where if w[1].startswith("app/")]
            func, file, _ = app_frames[-1] if app_frames else (where[-1][0], where[-1][1], "")
            key = f"{func} ({file})" if app_frames else f"[no app/ frame] {func} ({file})"
            innermost[key] = innermost.get(key, 0) + n
            # Inclusive: only what runs below the loop's callback dispatch (or the store
            # thread's `run`), so the shared frames (runpy, typer, asyncio.run) don't crowd it.
            cut = [i for i, w in enumerate(where) if w[0] in ("Handle._run", "Thread.run")]
            if cut:
                below = {f"{f} ({fl})" for f, fl, _ in where[cut[-1] + 1 :]}
            else:
                below = {f"[loop, outside callbacks] {where[-1][0]} ({where[-1][1]})"}
            for key in below:
                inclusive[key] = inclusive.get(key, 0) + n

    def top(counts: dict[str, int], k: int) -> list[dict[str, Any]]:
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
        return [{"share": round(v / max(1, total), 4), "where": w} for w, v in ranked]

    return {
        "samples": total,
        "threads": top(threads, 4),
        "top_self": top(own, 25),
        "top_innermost_app": top(innermost, 25),
        "top_inclusive": top(inclusive, 40),
        "file": raw_path,
    }


def _cprofile_summary(stats_path: str) -> dict[str, Any]:
    import pstats

    stats: Any = pstats.Stats(stats_path)
    rows = []
    for (file, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        rows.append((tottime, cumtime, ncalls, f"{short_path(file)}:{line}({func})"))
    total = stats.total_tt or 1.0

    def fmt(r: tuple[float, float, int, str]) -> dict[str, Any]:
        return {"self_s": round(r[0], 3), "cum_s": round(r[1], 3), "calls": r[2], "where": r[3]}

    by_self = sorted(rows, reverse=True)[:20]
    by_cum = sorted((r for r in rows if "app/" in r[3]), key=lambda r: -r[1])[:20]
    return {
        "total_s": round(total, 3),
        "top_self": [{"share": round(r[0] / total, 4), **fmt(r)} for r in by_self],
        "top_cumulative_app": [fmt(r) for r in by_cum],
        "file": stats_path,
    }


PROFILE_SHORT_TURNS = 30


def _short_turns(
    client: Child, kernel: Kernel, connection: str, n: int, turns: int
) -> dict[str, Any]:
    session = kernel.new_session(connection)
    ttfd_ms = []
    for _ in range(turns):
        r = client.call({"op": "kernel", "session": session, "n": n})
        if r.get("first"):
            ttfd_ms.append((r["first"] - r["t0"]) / 1e6)
    return {
        "turns": turns,
        "deltas": n,
        "ttfd_p50_ms": round(statistics.median(ttfd_ms), 3) if ttfd_ms else None,
    }


def profile(
    args: argparse.Namespace,
    procs: Any,
    workdir: str,
    client: Child,
    kernel: Kernel,
    connection: str,
    fake_port: int,
    pids: dict[str, int],
) -> dict[str, Any]:
    """Two phases under the profiler: one throughput turn, then short turns (TTFD path).

    py-spy attaches to the running kernel once per phase. cProfile needs a fresh kernel per
    phase (`python -m cProfile -m app serve`, stats written when SIGTERM ends it cleanly).
    """
    out: dict[str, Any] = {"method": args.profile}
    where = args.profile_dir or workdir
    phases: list[tuple[str, Any]] = [
        ("throughput", lambda k, c, p: throughput_run("kernel", client, k, c, args.deltas, p)),
        (
            "short_turns",
            lambda k, c, p: _short_turns(client, k, c, args.short_deltas, PROFILE_SHORT_TURNS),
        ),
    ]
    for phase, run_phase in phases:
        if args.profile == "py-spy":
            raw = os.path.join(where, f"kernel-{phase}.pyspy.txt")
            argv = [args.py_spy, "record", "--pid", str(kernel.proc.pid), "--rate", "1000"]
            argv += ["--threads", "--nonblocking", "--format", "raw", "-o", raw]
            spy = procs.add(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
            try:
                time.sleep(1.0)  # attach
                run = run_phase(kernel, connection, pids)
            finally:
                if spy.poll() is None:
                    spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        spy.wait(20)
                Processes.stop(spy)
            if not os.path.exists(raw):
                err = spy.stderr.read().decode(errors="replace") if spy.stderr else ""
                out[phase] = {"error": f"py-spy wrote nothing: {err[-500:]}"}
            else:
                out[phase] = {"run": run, **_pyspy_summary(raw)}
            continue
        stats_path = os.path.join(where, f"kernel-{phase}.pstats")
        prof = Kernel(procs, workdir, f"kernel-cprofile-{phase}", args.cpus[0], stats_path)
        try:
            prof.wait_ready()
            conn = prof.setup(fake_port)
            client.call({"op": "setup", "fake_port": fake_port, "socket": prof.socket})
            _short_turns(client, prof, conn, args.short_deltas, 2)  # warm-up
            run = run_phase(prof, conn, {**pids, "kernel": prof.proc.pid})
        finally:
            prof.close()
            client.call({"op": "setup", "fake_port": fake_port, "socket": kernel.socket})
        if not os.path.exists(stats_path):
            out[phase] = {"error": "cProfile wrote nothing (kernel did not exit cleanly?)"}
        else:
            out[phase] = {"run": run, **_cprofile_summary(stats_path)}
    return out


# ---------------------------------------------------------------------------------------------
# Output


def render(results: dict[str, Any]) -> str:
    tp, td, meta = results["throughput"], results["ttfd"], results["meta"]
    d, k = tp["direct"], tp["kernel"]
    n = tp["deltas"]
    kc, dc = k["cpu_us_per_delta_median"], d["cpu_us_per_delta_median"]
    rows: list[tuple[str, str, str, str, str]] = [
        (
            f"deltas/s, {n:,}-delta turn (text received, first -> last delta)",
            f"{k['rate_median']:,.0f}",
            f"{d['rate_median']:,.0f}",
            f"{tp['ratio']:.2f}x",
            f">= {TARGET_RATE_RATIO}x",
        ),
        (
            f"  provider deltas consumed/s ({n:,} / first delta -> message_end)",
            f"{k['consumed_rate_median']:,.0f}",
            f"{d['consumed_rate_median']:,.0f}",
            f"{k['consumed_rate_median'] / max(d['consumed_rate_median'], 1e-9):.2f}x",
            "",
        ),
        (
            f"  deltas received of {n:,}, by text (median; min)",
            f"{k['text_deltas_median']:,.0f}; {k['text_deltas_min']:,}",
            f"{d['text_deltas_median']:,.0f}; {d['text_deltas_min']:,}",
            f"{k['text_deltas_median'] / n:.1%}",
            "",
        ),
        (
            "  frames carrying them (message_delta / content chunks), median",
            f"{k['received_median']:,.0f}",
            f"{d['received_median']:,.0f}",
            "",
            "",
        ),
        (
            "  dropped by the broker (foya_broker_dropped_deltas_total)",
            f"{k['dropped_by_broker_median']:,.0f}",
            "",
            "",
            "",
        ),
        (
            "  final text complete (message_end / stream) in every round",
            "yes" if k["all_complete"] else "NO",
            "yes" if d["all_complete"] else "NO",
            "",
            "",
        ),
        (
            "  message_delta texts joined == full text, every round",
            "yes" if k["all_received_text_matches"] else "NO",
            "",
            "",
            "",
        ),
        (
            "  request sent -> stream done, s (kernel: idle again)",
            f"{k['request_to_end_s_median']:.3f}",
            f"{d['request_to_end_s_median']:.3f}",
            f"{k['request_to_end_s_median'] / max(d['request_to_end_s_median'], 1e-9):.2f}x",
            "",
        ),
        (
            "  CPU us per delta: kernel process",
            f"{kc.get('kernel', 0):.1f}",
            "",
            "",
            "",
        ),
        (
            "  CPU us per delta: client process",
            f"{kc.get('client', 0):.1f}",
            f"{dc.get('client', 0):.1f}",
            "",
            "",
        ),
        (
            "  CPU us per delta: fake provider",
            f"{kc.get('fake', 0):.1f}",
            f"{dc.get('fake', 0):.1f}",
            "",
            "",
        ),
    ]
    if td.get("pairs"):
        rows += [
            (
                f"time to first delta p50 ms ({td['deltas_per_turn']}-delta turns)",
                f"{td['kernel']['p50_ms']:.2f}",
                f"{td['direct']['p50_ms']:.2f}",
                "",
                "",
            ),
            (
                f"  TTFD overhead (kernel - direct), p50 of {td['pairs']} pairs, ms",
                f"{td['overhead']['p50_ms']:.2f}",
                "",
                "",
                f"<= {TARGET_TTFD_OVERHEAD_MS:g} ms",
            ),
            (
                "  TTFD overhead p90 / max, ms",
                f"{td['overhead']['p90_ms']:.2f} / {td['overhead']['max_ms']:.2f}",
                "",
                "",
                "",
            ),
        ]
    head = ("metric", "value (kernel)", "baseline (direct)", "ratio", "target")
    widths = [max(len(r[i]) for r in [*rows, head]) for i in range(5)]

    def line(r: tuple[str, ...]) -> str:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, 5)]
        return "  ".join(cells).rstrip()

    out = [
        f"Foya turns benchmark  ({meta['python']}, {meta['cpus']} CPUs, pinning: "
        f"{meta['pinning']}, data dir on {meta['data_fs']})",
        f"fake OpenAI-compatible provider: {n:,} content deltas of 6 chars, one SSE frame per "
        f"send; median of {tp['rounds']} alternating rounds",
        "",
        line(head),
        line(tuple("-" * w for w in widths)),
        *(line(r) for r in rows),
        "",
        "per round, deltas/s: "
        + "; ".join(
            f"{side} " + " ".join(f"{r['rate']:,.0f}" for r in tp["runs"][side])
            for side in ("kernel", "direct")
        )
        + "; received: "
        + " ".join(f"{r.get('received_deltas_of_text', 0):,}" for r in tp["runs"]["kernel"]),
        "per round, kernel/direct: "
        + " ".join(f"{x:.2f}x" if x is not None else "-" for x in tp["ratio_per_round"]),
        f"throughput ratio {tp['ratio']:.2f}x vs target >= {TARGET_RATE_RATIO}x: "
        + ("meets target" if tp["ratio"] >= TARGET_RATE_RATIO else "MISSES target"),
    ]
    if td.get("pairs"):
        ok = td["overhead"]["p50_ms"] <= TARGET_TTFD_OVERHEAD_MS
        out.append(
            f"TTFD overhead p50 {td['overhead']['p50_ms']:.2f} ms vs target <= "
            f"{TARGET_TTFD_OVERHEAD_MS:g} ms: " + ("meets target" if ok else "MISSES target")
        )
        out.append(
            "TTFD timeline, p50 ms after the request was sent: kernel "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in td["timeline_p50_ms"]["kernel"].items())
            + "; direct "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in td["timeline_p50_ms"]["direct"].items())
        )
    if k["text_deltas_min"] < n:
        out.append(
            f"FINDING: the SSE client missed up to {n - k['text_deltas_min']:,} of {n:,} deltas "
            "(dropped lossily by the broker); the final message_end text was "
            + ("complete." if k["all_complete"] else "NOT complete.")
        )
    problems = [f"throughput {s}: {p}" for s in ("kernel", "direct") for p in tp[s]["problems"]]
    problems += [f"ttfd: {p}" for p in td.get("problems", [])]
    problems += [f"kernel log: {p}" for p in meta.get("kernel_log_errors", [])]
    if problems:
        out.append("PROBLEMS: " + "; ".join(problems[:10]))
    other = max(tp[s]["others_cores_max"] for s in ("kernel", "direct"))
    if other > 0.1:
        out.append(f"NOTE: other processes used up to {other:.2f} cores during throughput runs")
    if "profile" in results:
        out += render_profile(results["profile"])
    out.append(
        f"\ntotal {meta['elapsed_s']:.0f} s (waited {meta['quiet_wait_s']:.1f} s for other load "
        f"to drop; {meta['runs_started_while_busy']} throughput runs started while others used "
        f">= {Quiet.THRESHOLD} cores)"
    )
    return "\n".join(out)


def render_profile(prof: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for phase in ("throughput", "short_turns"):
        part = prof.get(phase, {})
        run = part.get("run", {})
        if phase == "throughput":
            title = (
                f"one {run.get('received', '?')}-of-{results_deltas(run)} delta kernel turn, "
                f"{run.get('rate', 0):,.0f} deltas/s received under the profiler"
            )
        else:
            title = (
                f"{run.get('turns')} short kernel turns of {run.get('deltas')} deltas, TTFD p50 "
                f"{run.get('ttfd_p50_ms')} ms under the profiler"
            )
        out += ["", f"{prof['method']} profile, {title}:"]
        if "error" in part:
            out.append(f"  {part['error']}")
            continue
        if "threads" in part:
            out.append(
                "  threads: "
                + ", ".join(f"{t['where']} {t['share']:.0%}" for t in part["threads"])
                + f" of {part['samples']} samples (idle excluded)"
            )
            out.append("  innermost app/ frame (share of samples):")
            out += [f"    {r['share']:6.1%}  {r['where']}" for r in part["top_innermost_app"][:12]]
            out.append("  function anywhere on the stack (inclusive share, below the loop):")
            out += [f"    {r['share']:6.1%}  {r['where']}" for r in part["top_inclusive"][:25]]
        else:
            out.append(f"  total {part['total_s']} s in the event-loop thread; own time:")
            out += [
                f"    {r['share']:6.1%}  {r['self_s']:7.3f} s  {r['calls']:>8}  {r['where']}"
                for r in part["top_self"][:15]
            ]
            out.append("  cumulative, app/ functions:")
            out += [
                f"    {r['cum_s']:7.3f} s  {r['calls']:>8}  {r['where']}"
                for r in part["top_cumulative_app"][:15]
            ]
    return out


def results_deltas(run: dict[str, Any]) -> str:
    return f"{run.get('received', 0) + int(run.get('dropped_by_broker', 0)):,}"


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    p.add_argument("--deltas", type=int, default=20_000, help="deltas in a throughput turn")
    p.add_argument("--rounds", type=int, default=3, help="alternating throughput rounds")
    p.add_argument("--pairs", type=int, default=15, help="TTFD pairs (kernel, direct)")
    p.add_argument("--warmup-pairs", type=int, default=2)
    p.add_argument("--short-deltas", type=int, default=20, help="deltas in a TTFD turn")
    p.add_argument(
        "--quiet-budget",
        type=float,
        default=10.0,
        help="seconds, in total, to wait for other load to drop before runs (0: never wait)",
    )
    p.add_argument("--pin", action="store_true", help="kernel on one core, the rest on another")
    p.add_argument(
        "--profile",
        choices=("py-spy", "cprofile"),
        help="one more kernel throughput turn under a profiler, summarised after the table",
    )
    p.add_argument("--py-spy", default=None, help="py-spy binary (default: PATH, /tmp/pyspy)")
    p.add_argument("--profile-dir", help="keep profiler output here (default: discarded)")
    p.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_all(args: argparse.Namespace, procs: Any, workdir: str, results: dict[str, Any]) -> None:
    me = [sys.executable, os.path.abspath(__file__)]
    env = child_env({"NO_PROXY": "127.0.0.1,localhost"})
    fake = Child("fake", [*me, "--fake"], procs, workdir, args.cpus[1], env)
    client = Child("client", [*me, "--client"], procs, workdir, args.cpus[1], env)
    kernel = Kernel(procs, workdir, "kernel", args.cpus[0])
    try:
        fake_port = int(fake.reply(60)["port"])
        kernel.wait_ready()
        connection = kernel.setup(fake_port)
        client.call({"op": "setup", "fake_port": fake_port, "socket": kernel.socket})
        say(
            f"fake pid {fake.proc.pid} port {fake_port}; kernel pid {kernel.proc.pid} "
            f"socket {kernel.socket}; client pid {client.proc.pid}"
        )
        pids = {"kernel": kernel.proc.pid, "fake": fake.proc.pid, "client": client.proc.pid}
        say(f"throughput ({args.deltas:,} deltas x {args.rounds} rounds):")
        results["throughput"] = throughput(args, client, kernel, connection, pids)
        say(f"time to first delta ({args.pairs} pairs of {args.short_deltas}-delta turns):")
        results["ttfd"] = ttfd(args, client, kernel, connection)
        if args.profile:
            say(f"profiling one kernel turn ({args.profile}):")
            results["profile"] = profile(
                args, procs, workdir, client, kernel, connection, fake_port, pids
            )
        results["kernel_log_errors"] = kernel.log_problems()
    finally:
        kernel.close()
        for child in (client, fake):
            Processes.stop(child.proc)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.fake:
        asyncio.run(_fake_main())
        return 0
    if args.client:
        asyncio.run(_client_main())
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    pin = args.pin and len(cpus) >= 2
    args.cpus = (cpus[-1], cpus[0]) if pin else (None, None)  # (kernel, fake + client)
    if pin:
        os.sched_setaffinity(0, {cpus[0]})
    if args.profile == "py-spy":
        args.py_spy = args.py_spy or shutil_which("py-spy") or "/tmp/pyspy/bin/py-spy"
        if not os.access(args.py_spy, os.X_OK):
            say(f"py-spy not found at {args.py_spy}; use --py-spy PATH or --profile cprofile")
            return 2
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
    QUIET.left = args.quiet_budget
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.perf_counter()
    procs = Processes()
    results: dict[str, Any] = {}
    data_fs = None
    try:
        with workspace() as workdir:
            data_fs = fs_type(workdir)
            run_all(args, procs, workdir, results)
    finally:
        procs.stop_all()
    results["meta"] = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpus": len(cpus),
        "pinning": f"kernel cpu {args.cpus[0]}, fake+client cpu {args.cpus[1]}" if pin else "off",
        "data_fs": data_fs,
        "elapsed_s": round(time.perf_counter() - began, 1),
        "kernel_log_errors": results.pop("kernel_log_errors", []),
        "quiet_wait_s": round(QUIET.waited, 2),
        "runs_started_while_busy": QUIET.gave_up,
        "clock": "time.monotonic_ns() in the client process",
        "targets": {
            "rate_ratio_min": TARGET_RATE_RATIO,
            "ttfd_overhead_p50_ms_max": TARGET_TTFD_OVERHEAD_MS,
        },
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(render(results))
    return 0


def shutil_which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
