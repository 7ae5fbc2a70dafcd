"""Connection admission for `foya serve --listen`: a request-head deadline and a connection cap.

hypercorn 0.18 has no timeout for reading a request head. Its `read_timeout` bounds every read, so
it would also cut SSE streams whose client never sends anything; its `keep_alive_timeout` (120 s)
is what closes a connection that never completes a head. Thousands of idle sockets sending a
partial head therefore held their descriptors for two minutes, and at the descriptor limit
`accept()` failed (asyncio then logs "socket.accept() out of system resource", many times a
second) and `/readyz` could not connect.

The hook is the listening socket itself: `Admission.listening_socket` wraps it in a socket whose
`accept()` admits every new connection, and each accepted socket reports its own `close()`, so
the count covers every descriptor a client holds, TLS handshakes included. hypercorn's public
`worker_serve(sockets=...)` serves on it unchanged. The ASGI wrapper `Admission.track` tells it
when a connection starts and ends a request (the head is complete once the app is called).

- **Head deadline.** A connection that has not started a request `head_timeout` seconds after
  `accept()` (TLS handshake included) is shut down. Once a request started, the connection is
  hypercorn's again: an SSE stream may stay silent for hours, an idle keep-alive connection is
  closed after 120 s.
- **Cap.** At `max_connections` live connections a new one evicts the connection that has been
  idle (no request in flight: a partial head or an idle keep-alive) the longest; with none idle,
  or past `hard_limit` (half as many again: evicted sockets take a few loop turns to close, and
  one turn accepts up to 100), the new one is closed at once. `connection_budget` derives the
  cap from the descriptor limit, so `accept()` does not run out of descriptors and a fresh
  `/readyz` is served while a flood is on (a client may need to retry during a burst).
- **Accept failures.** Should descriptors run out anyway (tools, an operator's
  `FOYA_MAX_CONNECTIONS` above the limit), `throttle_accept_failures` turns asyncio's line per
  failed `accept()` (with a traceback; its retry loop repeats it) into one line per 10 s.

Unix-socket listeners are not wrapped: only their owner can connect (0600).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.logs import Throttle, get_logger
from app.settings import Settings

CONNECTIONS_CEILING = 4096
ACCEPT_FAILURE = "socket.accept() out of system resource"
REFUSALS_PER_ACCEPT = 64  # refused connections drained per accept() call before yielding
LOG_INTERVAL = 10.0

Peer = tuple[str, int]


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    peer: Peer
    deadline: asyncio.TimerHandle
    in_flight: int = 0
    started: bool = False
    closing: bool = False


def _peer(address: Any) -> Peer:
    return (str(address[0]), int(address[1])) if isinstance(address, tuple | list) else ("", 0)


def connection_budget(settings: Settings) -> int:
    """How many TCP connections may live at once (app.serve.admission): `FOYA_MAX_CONNECTIONS`, else
    half the descriptor limit, at most `CONNECTIONS_CEILING`. With the evicted ones still closing
    that is at most 3/4 of the limit; the rest is for SQLite, tools and provider connections."""
    if settings.max_connections is not None:
        return settings.max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = soft if soft != resource.RLIM_INFINITY else CONNECTIONS_CEILING * 2
    return max(16, min(CONNECTIONS_CEILING, limit // 2))


def throttle_accept_failures(loop: asyncio.AbstractEventLoop) -> None:
    """One log line per 10 s for `accept()` failing for lack of descriptors (asyncio would log
    each failure with a traceback, thousands of times a minute); other loop errors unchanged."""
    throttle, log = Throttle(10.0), get_logger("foya.admission")

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != ACCEPT_FAILURE:
            loop.default_exception_handler(context)
            return
        suppressed = throttle.allow(ACCEPT_FAILURE)
        if suppressed is not None:
            exc = context.get("exception")
            log.error(
                "accept() failed: out of file descriptors or memory",
                error=getattr(exc, "strerror", None) or str(exc),
                suppressed=suppressed,
            )

    loop.set_exception_handler(handle)


class Admission:
    """Admits TCP connections under a cap and closes those that send no request head in time."""

    def __init__(self, *, max_connections: int, head_timeout: float) -> None:
        self.max_connections = max_connections
        self.hard_limit = max_connections + max(16, max_connections // 2)
        self.head_timeout = head_timeout
        self._live: dict[Peer, _Conn] = {}
        self._idle: OrderedDict[Peer, _Conn] = OrderedDict()  # no request in flight, oldest first
        self._throttle = Throttle(LOG_INTERVAL)
        self._log = get_logger("foya.admission")

    @property
    def live(self) -> int:
        return len(self._live)

    def listening_socket(self, sock: socket.socket) -> socket.socket:
        """`sock` (bound, listening) re-wrapped so that every accepted connection is admitted."""
        wrapped = _Listening(sock.family, sock.type, sock.proto, fileno=sock.detach())
        wrapped.admission = self
        return wrapped

    def track(self, app: ASGIApp) -> ASGIApp:
        """`app` wrapped to report when each connection starts and ends a request."""

        async def tracked(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            conn = self._started(_peer(scope.get("client")))
            try:
                await app(scope, receive, send)
            finally:
                if conn is not None:
                    self._ended(conn)

        return tracked

    # -- accept side -------------------------------------------------------------------------

    def _admit(self, sock: _Accepted, address: Any) -> bool:
        if len(self._live) >= self.max_connections:
            if not self._idle or len(self._live) >= self.hard_limit:
                self._note("refused")
                return False
            self._shut(self._idle.popitem(last=False)[1], "evicted")
        peer = _peer(address)
        loop = asyncio.get_running_loop()
        conn = _Conn(sock, peer, loop.call_later(self.head_timeout, self._expire, sock, peer))
        self._live[peer] = self._idle[peer] = conn
        sock.admission = self
        return True

    def _release(self, sock: socket.socket, peer: Peer) -> None:
        conn = self._live.get(peer)
        if conn is None or conn.sock is not sock:
            return
        del self._live[peer]
        self._idle.pop(peer, None)
        conn.deadline.cancel()

    def _expire(self, sock: socket.socket, peer: Peer) -> None:
        conn = self._live.get(peer)
        if conn is not None and conn.sock is sock and not (conn.started or conn.closing):
            self._idle.pop(peer, None)
            self._shut(conn, "head_timeout")

    def _shut(self, conn: _Conn, reason: str) -> None:
        # shutdown, not close: the transport still owns the descriptor and closes it on EOF.
        conn.closing = True
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)
        self._note(reason)

    def _note(self, reason: str) -> None:
        suppressed = self._throttle.allow(reason)
        if suppressed is not None:
            self._log.warning(
                "connection closed by admission",
                reason=reason,
                live=len(self._live),
                max_connections=self.max_connections,
                suppressed=suppressed,
            )

    # -- request side ------------------------------------------------------------------------

    def _started(self, peer: Peer) -> _Conn | None:
        conn = self._live.get(peer)
        if conn is None:
            return None
        if not conn.started:
            conn.started = True
            conn.deadline.cancel()
        conn.in_flight += 1
        self._idle.pop(peer, None)
        return conn

    def _ended(self, conn: _Conn) -> None:
        conn.in_flight -= 1
        if conn.in_flight == 0 and self._live.get(conn.peer) is conn:
            self._idle[conn.peer] = conn  # newest idle: evicted last


class _Accepted(socket.socket):
    """An accepted connection that reports its close to the admission that let it in."""

    admission: Admission | None = None
    peer: Peer = ("", 0)

    def close(self) -> None:
        admission, self.admission = self.admission, None
        if admission is not None:
            admission._release(self, self.peer)
        super().close()


class _Listening(socket.socket):
    """The listening socket: `accept()` returns only admitted connections."""

    admission: Admission

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(REFUSALS_PER_ACCEPT):
            fd, address = self._accept()  # type: ignore[attr-defined]
            conn = _Accepted(self.family, self.type, self.proto, fileno=fd)
            conn.peer = _peer(address)
            if self.admission._admit(conn, address):
                return conn, address
            conn.close()
        raise BlockingIOError  # the loop comes back on its next turn
