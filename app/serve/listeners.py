"""Listeners and the server loop for `foya serve`.

We open the listening socket ourselves (app.serve.sockets) and hand hypercorn its file descriptor
(`fd://N`), so the Unix-socket rules (data-dir lock, stale-socket check, 0600 mode, removal on
exit) and bind errors are ours to enforce and report before anything is served. hypercorn runs
in this process through its Python API: a worker subprocess would double resident memory.

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
import logging
import os
import signal
import socket
import ssl
from typing import TYPE_CHECKING

from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config, Sockets
from hypercorn.utils import wrap_app
from starlette.types import ASGIApp

from app.errors import ConfigError, FoyaError
from app.files import data_dir_lock
from app.logs import get_logger
from app.main import Service, create_app
from app.serve import hypercorn_fixes
from app.serve.admission import Admission, connection_budget, throttle_accept_failures
from app.serve.sockets import Listener, open_tcp, open_unix, warn_if_exposed
from app.settings import ServePlan, Settings

if TYPE_CHECKING:
    from app.ops.replicate import Replicator

GRACEFUL_TIMEOUT = 8.0
KEEP_ALIVE_TIMEOUT = 120
MAX_HEAD_BYTES = 1024 * 1024
PARENT_POLL_SECONDS = 0.25

__all__ = ["Listener", "hypercorn_config", "open_tcp", "open_unix", "run", "sd_notify"]


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
    watcher = _install_loop_handlers(settings, stop)

    def on_started() -> None:
        gc.freeze()  # start-up's objects are permanent: later collections skip them
        gc.enable()  # off since the process began (app.__main__)
        log.info(f"foya kernel listening on {listener.address}", transport=plan.transport)
        sd_notify("READY=1")

    replicator = _replicator(settings)
    service = create_app(
        settings,
        token_sha256=plan.token_sha256,
        on_started=on_started,
        replication=replicator.status if replicator is not None else None,
    )
    await _start(service, settings, replicator)

    async def shutdown_trigger() -> None:
        await stop.wait()
        sd_notify("STOPPING=1")
        log.info("shutting down")
        await service.kernel.begin_shutdown()

    app, sock = _admitted(settings, plan, listener.sock, service.app)
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


def _install_loop_handlers(settings: Settings, stop: asyncio.Event) -> asyncio.Task[None] | None:
    """Signals and the parent's exit set `stop`; accept failures are logged sparingly and the
    hypercorn fixes are in place. The task watching the parent, if there is one."""
    loop = asyncio.get_running_loop()
    throttle_accept_failures(loop)
    hypercorn_fixes.install()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if not settings.parent_pid:
        return None
    return asyncio.create_task(_watch_parent(settings.parent_pid, stop))


def _replicator(settings: Settings) -> Replicator | None:
    """The replicator of `--replica-url`, if one is given (its checks refuse with exit 2)."""
    if not settings.replica_url:
        return None
    # Imported only when replicating: start-up stays light without it.
    from app.ops.replicate import Replicator

    return Replicator(settings, settings.replica_url)


async def _start(service: Service, settings: Settings, replicator: Replicator | None) -> None:
    """Start the kernel, then replication; a refusal of either stops before listening."""
    try:
        await service.kernel.start()
    except FoyaError as exc:  # e.g. a database newer than this code: refuse before listening
        raise ConfigError(f"--data-dir {settings.data_dir}: {exc.message}") from exc
    if replicator is None:
        return
    try:
        # On this thread, which lives as long as the server: Litestream's parent-death
        # signal follows the thread that started it (app.ops.replicate).
        replicator.start()
    except ConfigError:
        await service.kernel.close()
        raise


def _admitted(
    settings: Settings, plan: ServePlan, sock: socket.socket, app: ASGIApp
) -> tuple[ASGIApp, socket.socket]:
    """The app and listening socket as served: request bodies drained before a refusal and,
    on TCP, the admission rules (head timeout, connection cap)."""
    app = hypercorn_fixes.RequestBodyDrain(app)
    if plan.transport != "tcp":
        return app, sock
    admission = Admission(
        max_connections=connection_budget(settings), head_timeout=settings.head_timeout
    )
    get_logger().info(
        "transport limits",
        max_connections=admission.max_connections,
        head_timeout=settings.head_timeout,
        max_streams_per_client=settings.max_streams_per_client,
    )
    return admission.track(app), admission.listening_socket(sock)


def run(settings: Settings, plan: ServePlan) -> None:
    """Serve until a signal; raise `ConfigError` for any refusal before listening."""
    with data_dir_lock(settings.data_dir):
        listener = open_unix(plan.socket_path) if plan.socket_path else open_tcp(plan)
        warn_if_exposed(plan, listener)
        try:
            asyncio.run(_serve(settings, plan, listener))
        finally:
            listener.remove()
