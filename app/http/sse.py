"""Server-Sent Events framing and the streaming ASGI response.

Frames are `id: <seq>` / `event: <kind>` / `data: <json>`; unstored events (deltas, seq 0) carry
no `id:` so a reconnecting client's Last-Event-ID still names the last stored event. A comment
heartbeat goes out every `HEARTBEAT` seconds of silence so proxies keep the connection open.

hypercorn's `send()` does not fail when a client stops reading; it blocks once its buffer is full
(DESIGN §7). Each send is therefore bounded by `SEND_TIMEOUT`, after which the stream ends; the
broker cuts such a subscriber off independently, so the producer never waits on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from starlette.types import Receive, Scope, Send

from app.events import Event

HEARTBEAT = 15.0
BATCH = 64
SEND_TIMEOUT = 10.0
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"keep-alive"),
]


class EventSource(Protocol):
    async def next(self) -> Event | None: ...

    def ready(self, limit: int) -> list[Event]: ...


def frame(event: Event) -> bytes:
    """One SSE frame for `event`."""
    head = f"id: {event.seq}\n" if event.seq else ""
    return f"{head}event: {event.kind}\ndata: {event.json()}\n\n".encode()


class EventStreamResponse:
    """Streams events from `open_source()` until it ends, the client leaves or a send stalls.

    Events already waiting when one is sent go out in the same chunk (`BATCH` at most), so a
    burst costs one send, not one per event.
    """

    def __init__(self, open_source: Callable[[], AbstractAsyncContextManager[EventSource]]) -> None:
        self.open_source = open_source

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
    while True:
        try:
            async with asyncio.timeout(HEARTBEAT):
                event = await source.next()
        except TimeoutError:
            chunk = b": heartbeat\n\n"
        else:
            if event is None:
                break
            chunk = b"".join(frame(e) for e in [event, *source.ready(BATCH)])
        async with asyncio.timeout(SEND_TIMEOUT):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    async with asyncio.timeout(SEND_TIMEOUT):
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
