"""Helpers for the service-foundation tests: real `foya` processes, free ports, TLS files, routes.

Nothing here fakes our own code: every kernel is a real `python -m app serve` subprocess, stopped
by PID when its test (or module, or session) ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.ops.certs import self_signed

REPO = Path(__file__).resolve().parents[2]
FOYA = (sys.executable, "-m", "app")
READY_DEADLINE = 30.0  # upper bound while polling; a healthy start takes about a second
STOP_DEADLINE = 10.0  # graceful shutdown within 10 s
UNAUTHORIZED = {"code": "unauthorized", "message": "valid bearer token required"}
# Bearer tokens around the 32-character minimum.
TOKEN_31 = "abcdefghijklmnopqrstuvwxyz01234"
TOKEN_32 = TOKEN_31 + "5"
SECURITY_HEADERS = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def base_env(**extra: str) -> dict[str, str]:
    """This environment without any FOYA_* or NOTIFY_SOCKET, with JSON logs, plus `extra`."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FOYA_") and k != "NOTIFY_SOCKET"
    }
    env.update(FOYA_LOG_FORMAT="json", PYTHONUNBUFFERED="1", COLUMNS="200", TERM="dumb")
    env.update(extra)
    return env


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free a moment ago (all held open while picking)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def threaded_server(
    handler: type[http.server.BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0
) -> Iterator[http.server.ThreadingHTTPServer]:
    """A threaded HTTP server for a test's fake service (port 0: any free one); shut down and
    closed afterwards."""
    server = http.server.ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(READY_DEADLINE)


def wait_until(predicate: Callable[[], bool], what: str, deadline: float = READY_DEADLINE) -> None:
    """Poll `predicate` until it holds; fail naming `what` after `deadline` seconds."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline:.0f} s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def short_tmpdir() -> Iterator[Path]:
    """A short directory under /tmp: Unix socket paths must stay below 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="fy", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    cert_pem: bytes

    def client_context(self) -> ssl.SSLContext:
        """A fresh verifying client context that trusts exactly this certificate."""
        return ssl.create_default_context(cadata=self.cert_pem.decode())


_CONTEXTS: dict[bytes, ssl.SSLContext] = {}


def _shared_context(tls: TlsFiles | None) -> ssl.SSLContext:
    """One client context per certificate, reused: httpx's default context loads every system CA
    on each client, which costs more CPU than the requests themselves. Plain-HTTP and Unix-socket
    clients get a context that trusts nothing; it is never used for a handshake."""
    key = tls.cert_pem if tls else b""
    if key not in _CONTEXTS:
        _CONTEXTS[key] = tls.client_context() if tls else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return _CONTEXTS[key]


def write_tls_pair(directory: Path) -> TlsFiles:
    pair = self_signed(["127.0.0.1", "localhost"])
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    key.chmod(0o600)
    return TlsFiles(cert, key, pair.cert_pem)


def fastapi_routes(asgi_app: Any) -> list[Any]:
    """Unwrap the middleware (`Observe.app`, `BearerAuth.app`) down to FastAPI's `.routes`."""
    app = asgi_app
    while not hasattr(app, "routes"):
        app = app.app
    return list(app.routes)


def iter_endpoints(routes: Iterable[Any], prefix: str = "") -> Iterator[tuple[str, list[str]]]:
    """(path template, methods) of every route, descending into included routers and mounts."""
    for route in routes:
        candidates = getattr(route, "effective_candidates", None)
        if callable(candidates):  # newer FastAPI wraps each included router
            yield from iter_endpoints(candidates(), prefix)
        elif isinstance(getattr(route, "routes", None), list):  # Mount / nested router
            yield from iter_endpoints(route.routes, prefix + getattr(route, "path", ""))
        else:
            yield prefix + route.path, sorted(getattr(route, "methods", None) or ["GET"])


def app_endpoints(data_dir: Path, token_sha256: str) -> list[tuple[str, str]]:
    """(method, path template) of every route of the real app, as `foya serve` builds it."""
    from app.main import create_app
    from app.settings import Settings

    service = create_app(Settings(data_dir=data_dir), token_sha256=token_sha256)
    endpoints = iter_endpoints(fastapi_routes(service.app))
    return sorted({(method, path) for path, methods in endpoints for method in methods})


def concrete_path(template: str) -> str:
    """`/sessions/{id}` → `/sessions/x`."""
    return re.sub(r"\{[^}]*\}", "x", template)


def run_foya(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run a short-lived `foya` command to completion."""
    return subprocess.run(
        [*FOYA, *args],
        cwd=REPO,
        env=env if env is not None else base_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of `text` parsed as JSON (fails on a line that is not)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Kernel:
    """One real `foya` process whose stdout/stderr go to files under `workdir`."""

    def __init__(
        self,
        args: Iterable[str],
        *,
        workdir: Path,
        env: dict[str, str] | None = None,
        url: str | None = None,
        uds: Path | None = None,
        tls: TlsFiles | None = None,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.args = [*FOYA, *args]
        self.url, self.uds, self.tls = url, uds, tls
        self.port = int(url.rsplit(":", 1)[1]) if url else None
        self.stdout_path = workdir / "stdout.log"
        self.stderr_path = workdir / "stderr.log"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.proc = subprocess.Popen(
                self.args,
                cwd=REPO,
                env=env if env is not None else base_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def logs(self) -> list[dict[str, Any]]:
        return json_lines(self.stdout())

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        """An httpx client for this kernel (Unix socket, plain TCP or verified TLS)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # httpx sets ALPN on the context it is given, so an HTTP/2 client gets its own.
        fresh = self.tls is not None and kwargs.get("http2")
        verify = self.tls.client_context() if fresh and self.tls else _shared_context(self.tls)
        if self.uds is not None:
            return httpx.Client(
                transport=httpx.HTTPTransport(uds=str(self.uds), verify=verify),
                base_url="http://foya",
                headers=headers,
                timeout=10,
                **kwargs,
            )
        assert self.url is not None
        return httpx.Client(base_url=self.url, verify=verify, headers=headers, timeout=10, **kwargs)

    def describe(self) -> str:
        return (
            f"{' '.join(self.args)} (pid {self.pid}, exit {self.proc.returncode})\n"
            f"--- stderr ---\n{self.stderr()}\n--- stdout ---\n{self.stdout()}"
        )

    def wait_ready(self, deadline: float = READY_DEADLINE) -> Kernel:
        """Poll GET /healthz until it answers 200; fail early if the process exits."""
        end = time.monotonic() + deadline
        with self.client() as client:
            while True:
                if self.proc.poll() is not None:
                    raise AssertionError(f"kernel exited before it was ready: {self.describe()}")
                if self.uds is None or self.uds.exists():
                    with contextlib.suppress(httpx.TransportError):
                        if client.get("/healthz").status_code == 200:
                            return self
                if time.monotonic() > end:
                    raise AssertionError(f"kernel not ready after {deadline} s: {self.describe()}")
                time.sleep(0.05)

    def wait_exit(self, timeout: float = READY_DEADLINE) -> int | None:
        """The exit code, or None if the process is still running after `timeout` seconds."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def send(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_DEADLINE) -> int:
        """Stop by PID: `sig`, wait, then SIGKILL if it did not exit in time."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.send(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class Launcher:
    """Starts kernels and stops every one of them, by PID, in `close()`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.kernels: list[Kernel] = []

    def __call__(self, args: Iterable[str], *, ready: bool = True, **kwargs: Any) -> Kernel:
        kernel = Kernel(args, workdir=self.workdir / f"proc{len(self.kernels)}", **kwargs)
        self.kernels.append(kernel)
        if ready:
            kernel.wait_ready()
        return kernel

    def tcp(
        self,
        extra_args: Iterable[str] = (),
        *,
        tls: TlsFiles | None = None,
        port: int | None = None,
        **kwargs: Any,
    ) -> Kernel:
        """A TCP kernel on 127.0.0.1 with a free port (`--listen` is added here)."""
        port = port or free_port()
        scheme = "https" if tls else "http"
        return self(
            ["serve", "--listen", f"127.0.0.1:{port}", *extra_args],
            url=f"{scheme}://127.0.0.1:{port}",
            tls=tls,
            **kwargs,
        )

    def close(self) -> None:
        """SIGTERM every kernel still running, then wait for each (SIGKILL after the deadline)."""
        for kernel in self.kernels:
            if kernel.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    kernel.send(signal.SIGTERM)
        for kernel in self.kernels:
            kernel.stop()


@dataclass(frozen=True)
class UnixSetup:
    kernel: Kernel
    root: Path  # short directory holding data dir and socket dir
    data_dir: Path
    socket: Path
    env_socket: Path  # FOYA_SOCKET_PATH, overridden by --socket


@dataclass
class Fleet:
    """Shared, query-only kernels, each started the first time a test asks for it.

    Starting a kernel costs about a second of CPU, and each test worker holds a fleet of its
    own: a worker that runs one module needing one kernel starts that one, not all of them."""

    starters: dict[str, Callable[[], Kernel]]
    unix_root: Path
    env_data_dir: Path
    kernels: dict[str, Kernel] = field(default_factory=dict)

    def ready(self, name: str) -> Kernel:
        if name not in self.kernels:
            self.kernels[name] = self.starters[name]()
        return self.kernels[name].wait_ready()
