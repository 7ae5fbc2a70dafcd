"""The SSE response's pump (app.http.sse), driven directly as an ASGI callable with asyncio.

One timer per stream keeps the comment heartbeat (after `HEARTBEAT` of silence) and the bound
on a send (`SEND_TIMEOUT`, then the stream ends); both are shortened here. Frames are built
once per event, whichever stream sends them. A cancellation from outside is never mistaken for
the heartbeat's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import pytest

from app.events import Event
from app.http import sse

T = TypeVar("T")
BOUND = 5.0  # seconds: an upper bound on waits that must end, to never hang
HEARTBEAT = b": heartbeat\n\n"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


def event(seq: int) -> Event:
    return Event(seq, "session_updated", "s1", None, time.time_ns(), {"n": seq})


class Source:
    """An `EventSource` fed by the test through `put`; `None` ends it."""

    def __init__(self) -> None:
        self.items: deque[Event | None] = deque()
        self.wake = asyncio.Event()
        self.cursor = 0

    def put(self, item: Event | None) -> None:
        self.items.append(item)
        self.wake.set()

    async def next(self) -> Event | None:
        while not self.items:
            self.wake.clear()
            await self.wake.wait()
        return self.items.popleft()

    def ready(self, limit: int) -> list[Event]:
        out: list[Event] = []
        while len(out) < limit and self.items and self.items[0] is not None:
            item = self.items.popleft()
            assert item is not None
            out.append(item)
        return out


class Client:
    """The ASGI side: records body chunks; `stall_after` body chunks, a send never completes."""

    def __init__(self, stall_after: int | None = None) -> None:
        self.bodies: list[bytes] = []
        self.ended = False
        self.stall_after = stall_after
        self.gone = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] != "http.response.body":
            return
        if self.stall_after is not None and len(self.bodies) >= self.stall_after:
            await asyncio.Event().wait()  # a client that stopped reading
        self.bodies.append(message["body"])
        self.ended = not message["more_body"]

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}


@contextlib.asynccontextmanager
async def opened(source: Source) -> AsyncIterator[Source]:
    yield source


def response(source: Source) -> sse.EventStreamResponse:
    return sse.EventStreamResponse(lambda: opened(source))


async def serve(source: Source, client: Client) -> None:
    scope = {"type": "http", "client": ("127.0.0.1", 1)}
    await response(source)(scope, client.receive, client.send)  # type: ignore[arg-type]


def test_heartbeats_go_out_while_silent_and_events_after_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "HEARTBEAT", 0.05)

    seven = event(7)

    async def main() -> Client:
        source, client = Source(), Client()
        task = asyncio.create_task(serve(source, client))
        await asyncio.sleep(0.3)
        source.put(seven)
        source.put(None)
        await asyncio.wait_for(task, BOUND)
        return client

    client = run(main())
    assert client.bodies[0] == b": ok\n\n"
    beats = client.bodies[1:-2]
    assert len(beats) >= 2 and set(beats) == {HEARTBEAT}
    assert client.bodies[-2] == sse.frame(seven)
    assert client.bodies[-1] == b"" and client.ended


def test_no_heartbeat_while_events_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "HEARTBEAT", 0.1)

    async def main() -> Client:
        source, client = Source(), Client()
        task = asyncio.create_task(serve(source, client))
        for seq in range(1, 31):  # 0.3 s of events, one every 10 ms
            source.put(event(seq))
            await asyncio.sleep(0.01)
        source.put(None)
        await asyncio.wait_for(task, BOUND)
        return client

    client = run(main())
    body = b"".join(client.bodies)
    assert HEARTBEAT not in body
    assert body.count(b"\ndata: ") == 30
    assert [int(line[4:]) for line in body.split(b"\n") if line.startswith(b"id: ")] == list(
        range(1, 31)
    )


def test_a_stalled_send_ends_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "SEND_TIMEOUT", 0.05)

    one = event(1)

    async def main() -> tuple[Client, float]:
        source, client = Source(), Client(stall_after=2)
        task = asyncio.create_task(serve(source, client))
        source.put(one)
        await asyncio.sleep(0.05)
        started = time.monotonic()
        source.put(event(2))  # its send never completes
        await asyncio.wait_for(task, BOUND)  # ends without an error
        return client, time.monotonic() - started

    client, took = run(main())
    assert client.bodies == [b": ok\n\n", sse.frame(one)]
    assert not client.ended
    assert took < 1.0  # bounded by SEND_TIMEOUT, not by the client


def test_an_outside_cancellation_is_not_taken_for_a_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "HEARTBEAT", 0.05)

    async def main() -> None:
        source, client = Source(), Client()
        task = asyncio.create_task(serve(source, client))
        await asyncio.sleep(0.12)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, BOUND)

    run(main())


def test_a_client_that_leaves_ends_the_stream_quietly() -> None:
    async def main() -> None:
        source, client = Source(), Client()
        task = asyncio.create_task(serve(source, client))
        await asyncio.sleep(0.02)
        client.gone.set()
        await asyncio.wait_for(task, BOUND)
        assert not client.ended

    run(main())


def test_each_frame_is_built_once_and_shared() -> None:
    first = event(5)
    same = Event(first.seq, first.kind, first.session, None, first.time_ns, first.payload)
    assert sse.frame(first) is sse.frame(first)
    assert sse.frame(same) == sse.frame(first) and sse.frame(same) is not sse.frame(first)
    assert sse.frame(first) == f"id: 5\nevent: session_updated\ndata: {first.json()}\n\n".encode()


def test_the_frame_cache_is_bounded() -> None:
    frames = sse._Frames(4, 4096)
    events = [event(i) for i in range(10)]
    for e in events:
        frames.get(e)
    assert len(frames._kept) == 4
    big = Event(1, "session_updated", "s1", None, 0, {"pad": "x" * 1000})
    assert frames.get(big) == frames.get(big)
    assert id(big) not in frames._kept  # above an eighth of the bytes: built, not kept
