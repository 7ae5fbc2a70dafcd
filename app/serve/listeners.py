"""Listeners and the server loop for `foya serve`.

We open the listening socket ourselves and hand hypercorn its file descriptor (`fd://N`), so the
Unix-socket rules (data-dir lock, stale-socket check, 0600 mode, removal on exit) and bind errors
are ours to enforce and report before anything is served. hypercorn runs in this process through
its Python API: a worker subprocess would double resident memory.

Shutdown: SIGINT/SIGTERM (or the parent named by FOYA_PARENT_PID exiting) sets an event; our
`shutdown_trigger` first tells the kernel to end long-lived streams, then returns so hypercorn
closes listeners and waits at most `GRACEFUL_TIMEOUT` for requests in flight.

We call hypercorn's `worker_serve` with our own sockets rather than `serve` with `fd://N`: that is
where the transport hardening of a TCP listener plugs in.

- Request heads (app.serve.admission): hypercorn has no head timeout (its `read_timeout` bounds
  every read and would cut silent SSE streams, so it stays off). The listening socket is wrapped so
  each accepted connection must start a request within `FOYA_HEAD_TIMEOUT` (10 s, TLS handshake
  included) and the live connections stay under a cap derived from RLIMIT_NOFILE (half of it,
  at most 4096; `FOYA_MAX_CONNECTIONS` overrides): at the cap the longest-idle connection is
  evicted. Once a request started, hypercorn's own timers apply
  (120 s keep-alive idle; none while a response such as an SSE stream is in flight).
- `accept()` failures for lack of descriptors (asyncio logs each one, with a traceback, many
  times a second) go through a loop exception handler that logs one line per 10 s with the
  number held back.
- app.serve.hypercorn_fixes: a refusal answered before its request body was read (401, 413, 400) no
  longer breaks HTTP/1.1 keep-alive (the body is drained, up to a bound, before the answer goes
  out; past it the answer says `Connection: close`), on every listener, the Unix socket included;
  a socket whose peer left is closed at once (hypercorn kept it in CLOSE-WAIT for the 120 s
  keep-alive timeout), and HTTP/2 survives a request body that outlives its response
  (hypercorn's `KeyError` ended every stream of the connection, SSE included).
- SSE: at most `FOYA_MAX_STREAMS_PER_CLIENT` concurrent event streams per client address
  (app.http.sse); a Unix socket has one local client, its owner, and no cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config, Sockets
from hypercorn.utils import wrap_app
from starlette.types import ASGIApp

from app.errors import ConfigError, FoyaError
from app.files import data_dir_lock
from app.logs import get_logger
from app.main import create_app
from app.serve import hypercorn_fixes
from app.serve.admission import Admission, connection_budget, throttle_accept_failures
from app.settings import ServePlan, Settings

GRACEFUL_TIMEOUT = 8.0
KEEP_ALIVE_TIMEOUT = 120
MAX_HEAD_BYTES = 1024 * 1024
PARENT_POLL_SECONDS = 0.25
STALE_DIAL_SECONDS = 0.2


@dataclass
class Listener:
    """A bound, listening socket and what it takes to describe and clean it up."""

    sock: socket.socket
    address: str
    unix_path: Path | None = None
    unix_inode: tuple[int, int] | None = None

    def remove(self) -> None:
        """Unlink our Unix socket file, unless something else has replaced it meanwhile."""
        if self.unix_path is None:
            return
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(self.unix_path)
            if (st.st_dev, st.st_ino) == self.unix_inode:
                self.unix_path.unlink()


def open_unix(path: Path) -> Listener:
    """Bind the Unix socket: 0700 dir, refuse a live socket, replace a stale one."""
    if len(os.fsencode(path)) > 107:
        raise ConfigError(f"--socket (FOYA_SOCKET_PATH): path too long for a Unix socket: {path}")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ConfigError(f"--socket {path}: something that is not a socket is there")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(STALE_DIAL_SECONDS)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()  # nobody listens: a stale socket left by a killed kernel
        except OSError as exc:
            raise ConfigError(f"--socket {path}: cannot probe it: {exc.strerror}") from exc
        else:
            raise ConfigError(f"--socket {path}: a kernel is already listening there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # no window in which the socket is reachable by others
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--socket {path}: cannot listen: {exc.strerror}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(1024)
    st = os.stat(path)
    return Listener(sock, f"unix:{path}", path, (st.st_dev, st.st_ino))


def open_tcp(plan: ServePlan) -> Listener:
    """Bind `host:port` (a port of 0 picks a free one; the log line shows the real port)."""
    try:
        infos = socket.getaddrinfo(
            plan.host, plan.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigError(f"--listen: cannot resolve {plan.host!r}: {exc.strerror}") from exc
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--listen {plan.host}:{plan.port}: {exc.strerror}") from exc
    sock.listen(1024)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return Listener(sock, f"{'https' if plan.tls else 'http'}://{shown}:{port}")


def hypercorn_config(plan: ServePlan, head_timeout: float = 10.0) -> Config:
    """hypercorn settings: HTTP/1.1 + HTTP/2 (ALPN on TLS), TLS ≥ 1.2, 1 MiB heads, 120 s idle."""
    config = Config()
    config.ssl_handshake_timeout = head_timeout
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
    config.graceful_timeout = GRACEFUL_TIMEOUT
    config.h11_max_incomplete_size = MAX_HEAD_BYTES
    config.h2_max_header_list_size = MAX_HEAD_BYTES
    config.include_server_header = False
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    if plan.tls:
        config.certfile = str(plan.tls_cert)
        config.keyfile = str(plan.tls_key)
        try:
            config.create_ssl_context()  # hypercorn pins TLS ≥ 1.2 and sets ALPN h2/http1.1
        except OSError as exc:  # ssl.SSLError included
            raise ConfigError(_key_pair_refusal(plan, exc)) from exc
    return config


def _key_pair_refusal(plan: ServePlan, exc: OSError) -> str:
    """Why the key pair does not load, in words (what each file holds was checked before, by
    `serve_plan`): OpenSSL's own text is "[X509: KEY_VALUES_MISMATCH]" or "[SSL] PEM lib"."""
    files = f"--tls-cert {plan.tls_cert} and --tls-key {plan.tls_key}"
    if isinstance(exc, ssl.SSLError) and exc.reason == "KEY_VALUES_MISMATCH":
        return f"{files} do not belong together: the key is not the certificate's"
    reason = exc.reason if isinstance(exc, ssl.SSLError) else exc.strerror
    return f"{files}: cannot load the key pair ({reason or exc})"


def _warn_if_exposed(plan: ServePlan, listener: Listener) -> None:
    if plan.tls or plan.socket_path is not None:
        return
    host = str(listener.sock.getsockname()[0]).partition("%")[0]
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return
    get_logger().warning(
        "plaintext HTTP on a non-loopback address: the bearer token and every request cross "
        "the network unencrypted; serve behind a TLS proxy or give --tls-cert and --tls-key",
        address=listener.address,
    )


def sd_notify(state: str) -> None:
    """Tell systemd (Type=notify) about our state, if it is listening."""
    target = os.environ.get("NOTIFY_SOCKET")
    if not target:
        return
    address = "\0" + target[1:] if target.startswith("@") else target
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s,
        contextlib.suppress(OSError),
    ):
        s.connect(address)
        s.sendall(state.encode())


async def _watch_parent(pid: int, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            get_logger().info("parent process exited; shutting down", parent_pid=pid)
            stop.set()
            return
        except PermissionError:
            pass  # alive, owned by someone else
        await asyncio.sleep(PARENT_POLL_SECONDS)


async def _serve(settings: Settings, plan: ServePlan, listener: Listener) -> None:
    log = get_logger()
    config = hypercorn_config(plan, settings.head_timeout)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    throttle_accept_failures(loop)
    hypercorn_fixes.install()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watcher = (
        asyncio.create_task(_watch_parent(settings.parent_pid, stop))
        if settings.parent_pid
        else None
    )

    def on_started() -> None:
        gc.freeze()  # start-up's objects are permanent: later collections skip them
        gc.enable()  # off since the process began (app.__main__)
        log.info(f"foya kernel listening on {listener.address}", transport=plan.transport)
        sd_notify("READY=1")

    replicator = None
    if settings.replica_url:
        # Imported only when replicating: start-up stays light without it.
        from app.ops.replicate import Replicator

        replicator = Replicator(settings, settings.replica_url)  # checks refuse with exit 2
    service = create_app(
        settings,
        token_sha256=plan.token_sha256,
        on_started=on_started,
        replication=replicator.status if replicator is not None else None,
    )
    try:
        await service.kernel.start()
    except FoyaError as exc:  # e.g. a database newer than this code: refuse before listening
        raise ConfigError(f"--data-dir {settings.data_dir}: {exc.message}") from exc
    if replicator is not None:
        try:
            # On this thread, which lives as long as the server: Litestream's parent-death
            # signal follows the thread that started it (app.ops.replicate).
            replicator.start()
        except ConfigError:
            await service.kernel.close()
            raise

    async def shutdown_trigger() -> None:
        await stop.wait()
        sd_notify("STOPPING=1")
        log.info("shutting down")
        await service.kernel.begin_shutdown()

    app: ASGIApp = hypercorn_fixes.RequestBodyDrain(service.app)
    sock = listener.sock
    if plan.transport == "tcp":
        admission = Admission(
            max_connections=connection_budget(settings), head_timeout=settings.head_timeout
        )
        sock = admission.listening_socket(sock)
        app = admission.track(app)
        log.info(
            "transport limits",
            max_connections=admission.max_connections,
            head_timeout=settings.head_timeout,
            max_streams_per_client=settings.max_streams_per_client,
        )
    # hypercorn now owns the listening socket and closes it when it stops.
    sockets = Sockets([sock] if plan.tls else [], [] if plan.tls else [sock], [])
    try:
        await worker_serve(
            wrap_app(app, config.wsgi_max_body_size, "asgi"),  # type: ignore[arg-type]
            config,
            sockets=sockets,
            shutdown_trigger=shutdown_trigger,
        )
    finally:
        if watcher is not None:
            watcher.cancel()
        if replicator is not None:
            replicator.stop()  # after the lifespan closed the store: Litestream sees it whole
        log.info("stopped")


def run(settings: Settings, plan: ServePlan) -> None:
    """Serve until a signal; raise `ConfigError` for any refusal before listening."""
    with data_dir_lock(settings.data_dir):
        listener = open_unix(plan.socket_path) if plan.socket_path else open_tcp(plan)
        _warn_if_exposed(plan, listener)
        try:
            asyncio.run(_serve(settings, plan, listener))
        finally:
            listener.remove()
