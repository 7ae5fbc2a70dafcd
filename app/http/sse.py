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
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from starlette.types import Receive, Scope, Send

from app.events import Event

HEARTBEAT = 15.0
SEND_TIMEOUT = 10.0
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"keep-alive"),
]


class EventSource(Protocol):
    async def next(self) -> Event | None: ...


def frame(event: Event) -> bytes:
    """One SSE frame for `event`."""
    data = json.dumps(event.wire(), separators=(",", ":"), ensure_ascii=False)
    head = f"id: {event.seq}\n" if event.seq else ""
    return f"{head}event: {event.kind}\ndata: {data}\n\n".encode()


class EventStreamResponse:
    """Streams events from `open_source()` until it ends, the client leaves or a send stalls."""

    def __init__(self, open_source: Callable[[], AbstractAsyncContextManager[EventSource]]) -> None:
        self.open_source = open_source

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.open_source() as source:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            await send({"type": "http.response.body", "body": b": ok\n\n", "more_body": True})
            gone = asyncio.ensure_future(_disconnected(receive))
            try:
                async for chunk in _chunks(source, gone):
                    await asyncio.wait_for(
                        send({"type": "http.response.body", "body": chunk, "more_body": True}),
                        SEND_TIMEOUT,
                    )
            except (TimeoutError, OSError):
                return  # a stalled or vanished client: drop the connection
            finally:
                gone.cancel()
            with contextlib.suppress(TimeoutError, OSError):
                await asyncio.wait_for(
                    send({"type": "http.response.body", "body": b"", "more_body": False}),
                    SEND_TIMEOUT,
                )


async def _chunks(source: EventSource, gone: asyncio.Future[None]) -> AsyncIterator[bytes]:
    """Frames and heartbeats until the source ends or the client disconnects."""
    while True:
        nxt = asyncio.ensure_future(source.next())
        waiters: set[asyncio.Future[Any]] = {nxt, gone}
        done, _ = await asyncio.wait(waiters, timeout=HEARTBEAT, return_when="FIRST_COMPLETED")
        if gone in done:
            nxt.cancel()
            return
        if nxt not in done:
            nxt.cancel()
            yield b": heartbeat\n\n"
            continue
        event = nxt.result()
        if event is None:
            return
        yield frame(event)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
