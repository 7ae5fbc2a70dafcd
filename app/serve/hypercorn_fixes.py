"""Three fixes for hypercorn 0.18: two installed where hypercorn looks its classes up
(`install()`), one wrapped around the app (`RequestBodyDrain`).

**A refusal that breaks keep-alive.** When a response ends before HTTP/1.1 has parsed the end of
its request's body (a 401, 413 or 400 answered without reading the body), hypercorn cannot reuse
the connection and closes it right after the response, which did not say `Connection: close`.
A client that has sent its whole body, read that response and reused the connection in the
moment before the close reached it got "server disconnected without a response" (a
few in 200 unauthenticated POSTs on one client, more on a busy machine). `RequestBodyDrain`
reads and discards up to `DRAIN_BYTES` of the unread body before the answer goes out, so the
connection stays usable; a body longer than that (or slower than `DRAIN_SECONDS`) is answered
with `Connection: close`, and the end of the response waits while up to `LINGER_BYTES` more
(`LINGER_SECONDS`) are read, so the client can finish its upload and read the answer and the
close is a clean one (closing a socket with unread data sends a reset, and some stacks, Windows
among them, then drop the answer the client had not read yet). HTTP/2 needs none of this: a
stream ends on its own and the connection goes on (the `H2Protocol` fix below). app.serve.listeners
wraps the app in it for every listener, the Unix socket included.

**Closed connections kept for 120 s.** When a client closes an idle keep-alive connection (or
one that never completed a head), `TCPServer` stops reading but its task group still waits for
the keep-alive timer, so the socket sits in CLOSE-WAIT, holding a descriptor, for
`keep_alive_timeout`. Our `TCPServer` stops that timer once reading has ended, so the socket is
closed at once; app.serve.admission relies on it (a connection it shuts down is gone, not parked).

**HTTP/2 `KeyError`** (pgjones/hypercorn#329, fixes not merged). When a response completes
before the request body has arrived (a 401 to an upload, a 413 for an oversized one), hypercorn
forgets the stream; the client's next DATA frame for it then raises
`KeyError` in `H2Protocol._handle_events`, which ends the whole connection and every other
stream on it, SSE streams included.

`H2Protocol` below discards such a DATA frame and hands its flow-control credit back (stream and
connection: without it the whole connection would stall once 64 KiB were discarded), so the
client finishes its body and reads the response it already has. Resetting the stream with
NO_ERROR (RFC 9113 §8.1) would spare that upload, but httpx (httpcore) then fails the request
instead of returning the 401 or 413 it received. Every other event goes to hypercorn unchanged,
one at a time and in order, so a stream created earlier in the same batch is found. `install()`
puts the class where hypercorn's `ProtocolWrapper` looks it up (ALPN `h2` and h2c prior knowledge
alike). Offering only HTTP/1.1 through ALPN was the alternative: it would not cover h2c prior
knowledge on plaintext listeners, and it costs multiplexing.

Remove each once hypercorn ships its fix.
"""

from __future__ import annotations

import asyncio
import contextlib

import h2.events
import hypercorn.asyncio.run as hypercorn_run
import hypercorn.protocol as hypercorn_protocol
from hypercorn.asyncio.tcp_server import TCPServer as _HypercornTCPServer
from hypercorn.protocol.h2 import H2Protocol as _HypercornH2Protocol
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# How much unread body an answer waits for, keeping the connection: any JSON request's whole
# body, with room to spare (Go's server reads 256 KiB for the same purpose).
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 1.0
# What is read, after an answer with `Connection: close`, so the client can finish sending.
LINGER_BYTES = 64 * 1024 * 1024
LINGER_SECONDS = 5.0
_CLOSE = (b"connection", b"close")


class TCPServer(_HypercornTCPServer):
    """hypercorn's connection handler, closing the socket as soon as the peer is gone."""

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()


class H2Protocol(_HypercornH2Protocol):
    """hypercorn's HTTP/2 protocol, tolerant of request bodies that outlive their response."""

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        discarded = False
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self._discard(event)
                discarded = True
            else:
                await super()._handle_events([event])  # which flushes our credit too
                discarded = False
        if discarded:  # the credit handed back, once per batch of frames
            await self._flush()

    def _discard(self, event: h2.events.DataReceived) -> None:
        assert event.stream_id is not None
        self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)


class RequestBodyDrain:
    """Never ends an HTTP/1.x response while its request body is unread (see the module text):
    up to `DRAIN_BYTES` are read before the answer; past them the answer says `Connection: close`
    and its end waits while up to `LINGER_BYTES` more are read. A request whose body was read,
    or that has none, passes through untouched (every route that accepts a body reads it before
    answering, app.http.guard, so only refusals are held)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["http_version"] not in ("1.0", "1.1"):
            await self.app(scope, receive, send)
            return
        if not _has_body(scope):
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(receive, send)
        await self.app(scope, exchange.receive, exchange.send)


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:  # lower-case names (h11)
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return bytes(value).strip() != b"0"
    return False


def _closing(start: Message) -> Message:
    """`start` saying `Connection: close` (once, whatever the app already said)."""
    headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"connection"]
    return {**start, "headers": [*headers, _CLOSE]}


class _Exchange:
    """One request's `receive` and `send`, noting whether the request body has ended."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive, self._send = receive, send
        self.ended = False  # the whole body was received, or the client left

    async def receive(self) -> Message:
        message = await self._receive()
        self._note(message)
        return message

    def _note(self, message: Message) -> None:
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.ended = True

    async def send(self, message: Message) -> None:
        if self.ended:
            await self._send(message)
        elif message["type"] == "http.response.start":
            await self._drain(DRAIN_BYTES, DRAIN_SECONDS)
            if not self.ended:
                message = _closing(message)
            await self._send(message)
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            # The client has the whole answer now (its length is known); hypercorn ends the
            # response, and closes a `Connection: close` one, only on this last part.
            await self._send({**message, "more_body": True})
            await self._drain(LINGER_BYTES, LINGER_SECONDS)
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            await self._send(message)

    async def _drain(self, limit: int, seconds: float) -> None:
        size = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while not self.ended and size <= limit:
                    message = await self._receive()
                    self._note(message)
                    size += len(message.get("body", b""))


def install() -> None:
    """Make hypercorn use our `TCPServer` and `H2Protocol` (idempotent)."""
    hypercorn_run.TCPServer = TCPServer  # type: ignore[attr-defined]
    hypercorn_protocol.H2Protocol = H2Protocol  # type: ignore[attr-defined]
