"""The in-memory broker (app.broker), driven directly with asyncio.

Lossy publish drops on a full 256-slot buffer and counts it; must-deliver waits a bounded time
(MUST_WAIT, 50 ms) for a full subscriber, then cuts it off without holding up the others; the
subscriber gauge follows `subscribe` blocks; `close()` ends everything, now and later.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from app.broker import BUFFER, MUST_WAIT, Broker, Subscription
from app.events import Event
from app.metrics import Metrics

T = TypeVar("T")
TOPIC = "session:s1"
BOUND = 5.0  # seconds: a generous upper bound on waits that must end, to never hang


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 60))


def event(seq: int, kind: str = "session_updated", session: str = "s1") -> Event:
    return Event(seq, kind, session, None, time.time_ns(), {"n": seq})


def new_broker() -> tuple[Broker, Metrics]:
    metrics = Metrics()
    return Broker(metrics), metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if value is None else value


def buffered(sub: Subscription) -> list[Event]:
    """Take everything currently in the buffer without waiting."""
    out = []
    while not sub.queue.empty():
        item = sub.queue.get_nowait()
        assert item is not None, "unexpected end marker"
        out.append(item)
    return out


async def drain(sub: Subscription) -> list[Event]:
    """Read until the subscription reports its end (None); bounded so a bug cannot hang."""
    out = []
    while (item := await asyncio.wait_for(sub.get(), BOUND)) is not None:
        out.append(item)
    return out


# ------------------------------------------------------------------------------- lossy publish


def test_publish_drops_on_full_buffer_and_counts_the_drops() -> None:
    broker, metrics = new_broker()
    assert BUFFER == 256

    async def scenario() -> list[Event]:
        with broker.subscribe(TOPIC) as sub, broker.subscribe(TOPIC) as reader:
            for seq in range(1, BUFFER + 11):
                broker.publish(TOPIC, event(0, "message_delta"))
                broker.publish(TOPIC, event(seq))
                # `reader` keeps up, so it never drops anything
                got = buffered(reader)
                assert [e.kind for e in got] == ["message_delta", "session_updated"]
            assert sub.queue.qsize() == BUFFER
            return buffered(sub)

    kept = run(scenario())
    # the first 256 events fit; every later one (10 deltas and 10 others) was dropped for `sub`
    assert len(kept) == BUFFER
    assert [e.seq for e in kept if e.seq] == list(range(1, BUFFER // 2 + 1))
    assert sample(metrics, "foya_broker_dropped_deltas_total") == 2 * (BUFFER + 10) - BUFFER
    assert sample(metrics, "foya_broker_cut_off_subscribers_total") == 0
    published = sample(metrics, "foya_broker_events_published_total", kind="message_delta")
    assert published == BUFFER + 10


def test_publish_without_subscribers_is_a_no_op() -> None:
    broker, metrics = new_broker()
    broker.publish(TOPIC, event(1))
    run(broker.deliver(TOPIC, event(2)))
    assert sample(metrics, "foya_broker_dropped_deltas_total") == 0
    assert sample(metrics, "foya_broker_subscribers") == 0


def test_publish_reaches_only_its_topic() -> None:
    broker, _ = new_broker()

    async def scenario() -> tuple[list[Event], list[Event]]:
        with broker.subscribe("session:a") as a, broker.subscribe("session:b") as b:
            broker.publish("session:a", event(1, session="a"))
            await broker.deliver("session:b", event(2, session="b"))
            return buffered(a), buffered(b)

    a, b = run(scenario())
    assert [e.seq for e in a] == [1]
    assert [e.seq for e in b] == [2]


# ----------------------------------------------------------------------------- must-deliver


def test_must_deliver_cuts_off_a_stuck_subscriber_and_serves_a_reading_one() -> None:
    broker, metrics = new_broker()
    total = BUFFER + 50

    async def scenario() -> dict[str, Any]:
        with broker.subscribe(TOPIC) as stuck, broker.subscribe(TOPIC) as reading:
            received: list[Event] = []

            async def read() -> None:
                while len(received) < total:
                    item = await reading.get()
                    assert item is not None, "the reading subscriber was ended"
                    received.append(item)

            reader = asyncio.create_task(read())
            waits = []
            for seq in range(1, total + 1):
                start = time.monotonic()
                await broker.deliver(TOPIC, event(seq))
                waits.append(time.monotonic() - start)
                if seq == BUFFER:
                    assert not stuck.cut_off, "cut off while its buffer still had room"
            await asyncio.wait_for(reader, BOUND)
            return {"stuck": stuck, "received": received, "waits": waits}

    out = run(scenario())
    stuck, waits = out["stuck"], out["waits"]
    # the reading subscriber got every event, in order
    assert [e.seq for e in out["received"]] == list(range(1, total + 1))
    # the first event that found the stuck buffer full waited (about MUST_WAIT), then cut it off
    assert stuck.cut_off
    assert stuck.closed
    assert waits[BUFFER] >= MUST_WAIT * 0.9, waits[BUFFER]
    assert waits[BUFFER] < BOUND, waits[BUFFER]  # bounded: never blocked on the stuck reader
    # once cut off, the stuck subscriber is skipped: exactly one cut-off was counted
    assert sample(metrics, "foya_broker_cut_off_subscribers_total") == 1
    assert sample(metrics, "foya_broker_dropped_deltas_total") == 0
    published = sample(metrics, "foya_broker_events_published_total", kind="session_updated")
    assert published == total


def test_cut_off_subscriber_drains_then_ends_without_a_gap() -> None:
    """After a cut-off the client resumes from the last seq it received. So whatever the
    subscriber still gets from its buffer must be a gap-free prefix of what was delivered to it;
    a hole there would be lost for good on reconnect."""
    broker, _ = new_broker()

    async def scenario() -> tuple[Subscription, list[Event]]:
        with broker.subscribe(TOPIC) as stuck:
            for seq in range(1, BUFFER + 2):
                await broker.deliver(TOPIC, event(seq))
            assert stuck.cut_off
            drained = await drain(stuck)
            # ended for good: get() keeps answering None without blocking
            for _ in range(3):
                assert await asyncio.wait_for(stuck.get(), BOUND) is None
            return stuck, drained

    _, drained = run(scenario())
    seqs = [e.seq for e in drained]
    delivered = list(range(1, BUFFER + 2))
    skipped = sorted(set(delivered[: len(seqs) + 1]) - set(seqs))
    assert seqs == delivered[: len(seqs)], (
        f"a cut-off subscriber drained {len(seqs)} events {seqs[:3]}…{seqs[-3:]}, not a prefix "
        f"of the delivered {delivered[:3]}…: events {skipped} were silently skipped and cannot "
        "be recovered by replaying after the last one received"
    )


def test_must_deliver_waits_for_all_full_subscribers_in_parallel() -> None:
    broker, metrics = new_broker()
    stuck_count = 40

    async def scenario() -> tuple[float, list[Subscription]]:
        subs = []
        with contextlib.ExitStack() as stack:
            for _ in range(stuck_count):
                subs.append(stack.enter_context(broker.subscribe(TOPIC)))
            for seq in range(1, BUFFER + 1):
                await broker.deliver(TOPIC, event(seq))
            start = time.monotonic()
            await broker.deliver(TOPIC, event(BUFFER + 1))
            return time.monotonic() - start, subs

    elapsed, subs = run(scenario())
    assert all(s.cut_off for s in subs)
    assert sample(metrics, "foya_broker_cut_off_subscribers_total") == stuck_count
    # about one MUST_WAIT for all of them, not one each (40 * 50 ms = 2 s): a 20-fold margin
    assert elapsed < MUST_WAIT * stuck_count / 2, elapsed


# ------------------------------------------------------------------------ gauge and lifecycle


def test_subscribers_gauge_follows_subscriptions() -> None:
    broker, metrics = new_broker()

    def gauge() -> float:
        return sample(metrics, "foya_broker_subscribers")

    async def scenario() -> None:
        assert gauge() == 0
        with broker.subscribe("session:a"):
            assert gauge() == 1
            with broker.subscribe("session:a"), broker.subscribe("session:b") as b:
                assert gauge() == 3
                b.close()  # ended, but still inside its block: still counted
                assert gauge() == 3
            assert gauge() == 1
        assert gauge() == 0
        try:
            with broker.subscribe("session:c"):
                assert gauge() == 1
                raise RuntimeError("client went away")
        except RuntimeError:
            pass
        assert gauge() == 0

    run(scenario())


def test_end_topic_ends_only_that_topic() -> None:
    broker, _ = new_broker()

    async def scenario() -> None:
        with broker.subscribe("session:a") as a, broker.subscribe("session:b") as b:
            await broker.deliver("session:a", event(1, "session_deleted", "a"))
            broker.end_topic("session:a")
            assert [e.kind for e in await drain(a)] == ["session_deleted"]
            assert not a.cut_off
            assert not b.closed
            await broker.deliver("session:b", event(2, session="b"))
            assert (await asyncio.wait_for(b.get(), BOUND)).seq == 2  # type: ignore[union-attr]

    run(scenario())


def test_close_ends_every_subscription_and_later_ones() -> None:
    broker, metrics = new_broker()

    async def scenario() -> None:
        with broker.subscribe("session:a") as a, broker.subscribe("session:b") as b:
            waiting = [asyncio.create_task(s.get()) for s in (a, b)]
            await asyncio.sleep(0)  # both are blocked in get()
            broker.publish("session:a", event(1, session="a"))
            broker.close()
            first = await asyncio.wait_for(asyncio.gather(*waiting), BOUND)
            assert [e.seq if e else None for e in first] == [1, None]
            assert await asyncio.wait_for(a.get(), BOUND) is None
            assert a.closed and b.closed
            assert not a.cut_off and not b.cut_off
        # a subscription made after close() is born ended
        with broker.subscribe("session:a") as late:
            assert late.closed
            broker.publish("session:a", event(2, session="a"))
            await broker.deliver("session:a", event(3, session="a"))
            assert await asyncio.wait_for(late.get(), BOUND) is None
            assert await asyncio.wait_for(late.get(), BOUND) is None
        assert sample(metrics, "foya_broker_subscribers") == 0

    run(scenario())
