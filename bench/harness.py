"""What every benchmark in bench/ shares: child processes, the kernel child, one SSE reader, CPU.

Run a benchmark from the repository root as `python -m bench.NAME` (the package is not
installed; the current directory makes it importable). Children are started with `cwd=ROOT`, so
a benchmark that runs itself as a child (`python -m bench.turns --fake`) finds itself too.

- `Processes` records every child; `stop_all` ends each one by PID (SIGTERM, then SIGKILL).
- `Child`: a child speaking JSON lines (one command on stdin, one reply on stdout).
- `KernelProcess`: the real `python -m app serve` on a Unix socket or a 127.0.0.1 port, in a
  data dir of its own, with a synchronous httpx client; `wait_ready` polls `/healthz`.
- `SSE`: the one SSE line parser of the benchmarks (`feed` one line, get a frame back).
- `Quiet` and `CPU`: wait for other load to drop before a run; CPU seconds per process over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"


def say(message: str) -> None:
    """Progress goes to stderr so `--json` keeps stdout clean."""
    print(message, file=sys.stderr, flush=True)


def now_ns() -> int:
    return time.monotonic_ns()


# --------------------------------------------------------------------------------- processes


class Processes:
    """Every child this benchmark starts; `stop_all` ends each one by PID."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def add(self, proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                self.stop(proc)


# Compiled bytecode for every child lives here, outside the work tree, and is kept between runs.
# Without it, a PYTHONDONTWRITEBYTECODE environment makes `app` (not installed as a wheel, so
# never compiled ahead) recompile at every start while the bare side's site-packages do not.
PYCACHE = os.path.join(tempfile.gettempdir(), f"foya-bench-pycache-{os.getuid()}")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without FOYA_ settings, proxies or NOTIFY_SOCKET, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOYA_")}
    for key in (*_PROXIES, "NOTIFY_SOCKET", "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    env["NO_PROXY"] = "127.0.0.1,localhost"
    env.update(extra or {})
    return env


def pinned(cpu: int | None) -> Callable[[], None] | None:
    """A `preexec_fn` pinning the child to one core (None: not pinned)."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def spawn(
    procs: Processes,
    argv: list[str],
    *,
    env: dict[str, str],
    stdout: Any,
    stderr: Any,
    stdin: Any = subprocess.DEVNULL,
    cpu: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start a child in the repository root and record it in `procs`."""
    return procs.add(
        subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            preexec_fn=pinned(cpu),
        )
    )


def tail(paths: list[str], lines: int = 20) -> str:
    """The last lines of each file, for an error message."""
    out: list[str] = []
    for path in paths:
        with contextlib.suppress(OSError), open(path, errors="replace") as fh:
            out += fh.readlines()[-lines:]
    return "".join(out)


@contextlib.contextmanager
def workspace(keep: bool = False) -> Iterator[str]:
    """A fresh temporary directory (short: Unix socket paths live in it), removed afterwards
    unless `keep`."""
    path = tempfile.mkdtemp(prefix="foya-bench-")
    try:
        yield path
    finally:
        if keep:
            say(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


class Child:
    """A child speaking JSON lines: a command on its stdin, one reply line on its stdout."""

    def __init__(
        self, name: str, argv: list[str], procs: Processes, workdir: str, cpu: int | None = None
    ) -> None:
        self.name = name
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = spawn(
                procs, argv, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, cpu=cpu,
            )  # fmt: skip

    def reply(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise RuntimeError(f"{self.name}: no reply in {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited:\n{tail([self.stderr_path])}")
        out: dict[str, Any] = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.name}: {out['error']}")
        return out

    def call(self, cmd: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return self.reply(timeout)


async def serve_json_lines(run: Callable[[dict[str, Any]], Any]) -> None:
    """The child side of `Child`: `await run(command)` for each stdin line, reply on stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return  # the orchestrator went away
        try:
            reply = await run(json.loads(line))
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), flush=True)


# ------------------------------------------------------------------------------ kernel child


class KernelProcess:
    """`python -m app serve` on a Unix socket (default) or `listen` ("127.0.0.1:PORT"), with
    JSON logs to a file and `FOYA_PARENT_PID` set; `http` talks to it (over the socket)."""

    def __init__(
        self,
        procs: Processes,
        workdir: str,
        tag: str = "kernel",
        *,
        data_dir: str | None = None,
        cpu: int | None = None,
        profile_to: str | None = None,
        listen: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.data_dir = data_dir or os.path.join(workdir, f"data-{tag}")
        self.socket = os.path.join(workdir, f"{tag}.sock")
        self.stdout_path = os.path.join(workdir, f"{tag}.stdout")
        self.stderr_path = os.path.join(workdir, f"{tag}.stderr")
        argv = [sys.executable]
        if profile_to:
            argv += ["-m", "cProfile", "-o", profile_to]
        argv += ["-m", "app", "serve", "--data-dir", self.data_dir]
        argv += ["--listen", listen, "--allow-plaintext"] if listen else ["--socket", self.socket]
        base = {
            "FOYA_LOG_FORMAT": "json",
            "FOYA_LOG_LEVEL": "info",
            "FOYA_PARENT_PID": str(os.getpid()),
            "XDG_CONFIG_HOME": os.path.join(workdir, "xdg"),
            "HOME": os.path.join(workdir, "home"),  # no ~/.foya: the data dir alone
        }
        os.makedirs(base["HOME"], exist_ok=True)
        self.started = time.perf_counter()  # just before exec
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = spawn(
                procs, argv, env=child_env({**base, **(env or {})}), stdout=out, stderr=err,
                cpu=cpu,
            )  # fmt: skip
        if listen:
            transport = httpx.HTTPTransport()
            base_url = f"http://{listen}"
        else:
            transport = httpx.HTTPTransport(uds=self.socket)
            base_url = "http://foya"
        self.http = httpx.Client(
            base_url=base_url, transport=transport, timeout=timeout, trust_env=False
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
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
        return tail([self.stderr_path, self.stdout_path], lines)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.http.post(path, json=body)
        if resp.status_code not in (200, 201):
            raise RuntimeError(f"POST {path}: HTTP {resp.status_code} {resp.text[:300]}")
        out: dict[str, Any] = resp.json()
        return out

    def connect(self, base_url: str, api_key: str, models: list[str]) -> str:
        """A connection to a (fake) provider; its id."""
        body = {"name": "bench", "base_url": base_url, "api_key": api_key, "models": models}
        return str(self.post("/connections", body)["id"])

    def new_session(self, connection: str, model: str) -> str:
        body = {"connection_id": connection, "model": model, "approval_mode": "full_access"}
        return str(self.post("/sessions", body)["id"])

    def metric(self, name: str) -> float:
        """An unlabelled sample from `/metrics` (NaN when absent)."""
        text = self.http.get("/metrics").text
        found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
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
        Processes.stop(self.proc, timeout=15.0)


# -------------------------------------------------------------------------------------- SSE


@dataclass(frozen=True)
class Frame:
    """One SSE event as the kernel sends it: `event:` and the raw `data:` text."""

    event: str
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


class SSE:
    """The benchmarks' one SSE line parser (the raw-byte counting client of `bench.stream`
    aside, which must stay cheaper than the server it loads). Feed it lines as
    `iter_lines`/`aiter_lines` give them; `subscribed` turns true at the kernel's `: ok`."""

    def __init__(self) -> None:
        self.subscribed = False
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> Frame | None:
        if not line:
            frame = Frame(self._event, "\n".join(self._data)) if self._data else None
            self._event, self._data = "", []
            return frame
        if line.startswith(":"):
            self.subscribed = True
        elif line.startswith("event: "):
            self._event = line[7:]
        elif line.startswith("data: "):
            self._data.append(line[6:])
        return None


# -------------------------------------------------------------------------------------- CPU


_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (all its threads)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy() -> float:
    """CPU seconds spent busy on the whole machine so far (steal included)."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK


class CPU:
    """CPU seconds of each of our processes and of everything else (`others`), over one run."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.used: dict[str, float] = {}
        self.seconds = 0.0

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


class Quiet:
    """Before each measured run, wait (within a total budget) for other load to drop.

    The machine may be shared; our own processes are idle between runs, so the whole machine's
    busy CPU over a short window is what others use. `wait` blocks; `wait_async` awaits.
    """

    WINDOW = 0.25
    THRESHOLD = 0.3  # cores

    def __init__(self, budget: float) -> None:
        self.left = budget
        self.waited = 0.0
        self.gave_up = 0

    def _settled(self, before: float) -> bool:
        """After one window that began at `before`: stop waiting?"""
        cores = (machine_busy() - before) / self.WINDOW
        if cores < self.THRESHOLD:
            return True
        if self.left <= 0:
            self.gave_up += 1
            return True
        self.left -= self.WINDOW
        self.waited += self.WINDOW
        return False

    def wait(self) -> None:
        while True:
            before = machine_busy()
            time.sleep(self.WINDOW)
            if self._settled(before):
                return

    async def wait_async(self) -> None:
        while True:
            before = machine_busy()
            await asyncio.sleep(self.WINDOW)
            if self._settled(before):
                return
