"""Server-Sent Events framing and the streaming ASGI response.

Frames are `id: <seq>` / `event: <kind>` / `data: <json>`, as Foya writes them: unstored events
(deltas, snapshots, seq 0) carry `id: 0` too. An EventSource client sets its last event id from
every `id:` field, so after a delta it would reconnect with `Last-Event-ID: 0` and lose its place.
Whenever a chunk ends on such a frame, a data-less `id: <cursor>` frame follows in the same chunk
(the last stored seq this client has, empty when it has none): per the HTML standard it resets
the last event id and dispatches nothing, and Foya's own clients read only `data:` lines. A
`Last-Event-ID: 0` that still arrives (a connection cut inside a chunk) names no stored event; the
session route treats it as no cursor (live only, like Foya), where `?after=0` replays everything.
A comment heartbeat goes out every `HEARTBEAT` seconds of silence so proxies keep the connection
open.

Streams per client: given a `StreamSlots` (the app has one on TCP listeners, `foya serve
--listen`), a client address may hold at most its `per_client` streams at once; one more is
answered 429 `too_many_streams` (`TooManyStreams`) before anything is subscribed.

hypercorn's `send()` does not fail when a client stops reading; it blocks once its buffer is full.
Each send is therefore bounded by `SEND_TIMEOUT`, after which the stream ends; the
broker cuts such a subscriber off independently, so the producer never waits on it. One timer
per stream (`app.http.sse_watch.Watch`) keeps both the heartbeat and that bound.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from typing import Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.errors import BadRequest, FoyaError
from app.events import Event
from app.http.models.common import SQLITE_END
from app.http.sse_watch import Watch

HEARTBEAT = 15.0
BATCH = 64
SEND_TIMEOUT = 10.0
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"keep-alive"),
]


class TooManyStreams(FoyaError):
    """An event stream over the limit of open streams, refused before anything is subscribed."""

    status = 429
    code = "too_many_streams"


class StreamSlots:
    """Counts the open event streams of each client address against a per-client cap."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        self.open: Counter[str] = Counter()

    @contextmanager
    def hold(self, client: str) -> Iterator[None]:
        if self.open[client] >= self.per_client:
            raise TooManyStreams(
                f"this client already has {self.per_client} event streams open; close one first"
            )
        self.open[client] += 1
        try:
            yield
        finally:
            self.open[client] -= 1
            if not self.open[client]:
                del self.open[client]


class EventSource(Protocol):
    async def next(self) -> Event | None: ...

    def ready(self, limit: int) -> list[Event]: ...

    @property
    def cursor(self) -> int:
        """The last stored seq the client has (sent or given as `after`); 0 for none."""
        ...


class _Frames:
    """The frames built last, by event identity: every subscriber of a topic sends the same
    event objects within a few loop turns of each other, so each frame is built once. Bounded
    in count and in bytes; a frame above an eighth of the bytes is not kept."""

    def __init__(self, count: int, size: int) -> None:
        self.count, self.size = count, size
        self._kept: OrderedDict[int, tuple[Event, bytes]] = OrderedDict()  # keeps the event: its
        # id names no other one meanwhile
        self._bytes = 0

    def get(self, event: Event) -> bytes:
        found = self._kept.get(id(event))
        if found is not None and found[0] is event:
            return found[1]
        data = f"id: {event.seq}\nevent: {event.kind}\ndata: {event.json()}\n\n".encode()
        if len(data) <= self.size // 8:
            kept = self._kept
            while kept and (len(kept) >= self.count or self._bytes + len(data) > self.size):
                self._bytes -= len(kept.popitem(last=False)[1][1])  # the oldest first
            kept[id(event)] = (event, data)
            self._bytes += len(data)
        return data


_FRAMES = _Frames(256, 1024 * 1024)  # a subscriber up to a buffer behind still shares


def frame(event: Event) -> bytes:
    """One SSE frame for `event` (`id: 0` when it is not stored, as Foya writes it)."""
    return _FRAMES.get(event)


def cursor_frame(cursor: int) -> bytes:
    """A data-less frame that sets the client's last event id back to `cursor` (empty for 0)."""
    return f"id: {cursor}\n\n".encode() if cursor else b"id:\n\n"


class EventStreamResponse:
    """Streams events from `open_source()` until it ends, the client leaves or a send stalls.

    Events already waiting when one is sent go out in the same chunk (`BATCH` at most), so a
    burst costs one send, not one per event.
    """

    def __init__(
        self,
        open_source: Callable[[], AbstractAsyncContextManager[EventSource]],
        slots: StreamSlots | None = None,
    ) -> None:
        self.open_source = open_source
        self.slots = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        slots = self.slots
        held = slots.hold(str(client[0]) if client else "") if slots else nullcontext()
        with held:
            await self._stream(receive, send)

    async def _stream(self, receive: Receive, send: Send) -> None:
        async with self.open_source() as source:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            await send({"type": "http.response.body", "body": b": ok\n\n", "more_body": True})
            task = asyncio.current_task()
            assert task is not None
            left = False

            def client_left(watcher: asyncio.Future[None]) -> None:
                nonlocal left
                if not watcher.cancelled():
                    left = True
                    task.cancel()

            watcher = asyncio.ensure_future(_disconnected(receive))
            watcher.add_done_callback(client_left)
            try:
                await _pump(source, send)
            except asyncio.CancelledError:
                if not left:
                    raise
                task.uncancel()
                return
            except (TimeoutError, OSError):
                return  # a stalled or vanished client: drop the connection
            finally:
                watcher.remove_done_callback(client_left)
                watcher.cancel()


async def _pump(source: EventSource, send: Send) -> None:
    """Frames and heartbeats until the source ends."""
    task = asyncio.current_task()
    assert task is not None
    watch = Watch(task, send, HEARTBEAT, SEND_TIMEOUT)
    try:
        while True:
            try:
                event = await source.next()
            except asyncio.CancelledError:
                if not watch.ours():
                    raise
                await watch.send(b": heartbeat\n\n")
                continue
            if event is None:
                break
            events = [event, *source.ready(BATCH)]
            chunk = b"".join([frame(e) for e in events])
            if not events[-1].seq:
                chunk += cursor_frame(source.cursor)
            await watch.send(chunk)
        await watch.send(b"", more=False)
    finally:
        watch.stop()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class StreamRoute(Response):
    """Lets a route return an `EventStreamResponse` (a pure ASGI callable) through FastAPI."""

    def __init__(self, app: EventStreamResponse) -> None:
        self.app = app
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def cursor(after: int | None, last_event_id: str | None, what: str) -> int | None:
    """Where a client resumes a stream: `?after=N`, else its `Last-Event-ID` (400 unless it is
    `what`, a number from 0 to 2^63 - 1), else None (it has seen nothing)."""
    if after is not None or not last_event_id:
        return after
    try:
        seq = int(last_event_id)
    except ValueError:
        raise BadRequest(f"Last-Event-ID: must be {what}") from None
    if not 0 <= seq < SQLITE_END:
        raise BadRequest(f"Last-Event-ID: must be {what} (0 to 2^63 - 1)")
    return seq
