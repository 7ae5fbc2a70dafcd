"""In-memory pub/sub of events by topic (`session:<id>`, `context`, `canvas:<id>`, ...).

Every subscriber has one bounded buffer (`BUFFER` events). Two ways to publish:

- `publish` (lossy, for deltas): an event that does not fit a subscriber's buffer is dropped for
  that subscriber; the final `message_end` carries the whole text anyway.
- `deliver` (must-deliver): waits at most `MUST_WAIT` for room in each full buffer (all full
  subscribers in parallel), then cuts that subscriber off: its stream ends, the client reconnects
  with its last seq and replays from the store. Nothing durable is lost and a stuck client never
  delays the producer by more than `MUST_WAIT`.

The broker never touches the store: the kernel appends first, then publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Iterator

from prometheus_client import Counter, Gauge

from app.events import Event
from app.metrics import Metrics

BUFFER = 256
MUST_WAIT = 0.05


class Subscription:
    """One subscriber's buffer. `get()` returns None once the subscription has ended."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(BUFFER)
        self.closed = False
        self.cut_off = False

    def close(self) -> None:
        """End the subscription; a blocked `get()` wakes up with None."""
        if self.closed:
            return
        self.closed = True
        if self.queue.full():
            # Make room for the end marker by dropping the *newest* buffered event: the client
            # then resumes from an older seq and replays the dropped one from the store.
            kept = [self.queue.get_nowait() for _ in range(self.queue.qsize())][:-1]
            for event in kept:
                self.queue.put_nowait(event)
        self.queue.put_nowait(None)

    async def get(self) -> Event | None:
        """The next event; None once the subscription has ended."""
        if self.closed and self.queue.empty():
            return None
        return await self.queue.get()


class Broker:
    """Topics and their subscribers."""

    def __init__(self, metrics: Metrics) -> None:
        self._topics: dict[str, set[Subscription]] = {}
        self._closed = False
        registry = metrics.registry
        self.subscribers = Gauge(
            "foya_broker_subscribers", "Live event-stream subscribers.", registry=registry
        )
        self.dropped = Counter(
            "foya_broker_dropped_deltas", "Lossy events dropped on full buffers.", registry=registry
        )
        self.cut = Counter(
            "foya_broker_cut_off_subscribers",
            "Subscribers cut off after a must-deliver event waited too long.",
            registry=registry,
        )
        published = Counter(
            "foya_broker_events_published", "Events published by kind.", ["kind"], registry=registry
        )
        self._published = functools.cache(published.labels)

    @contextlib.contextmanager
    def subscribe(self, topic: str) -> Iterator[Subscription]:
        """Subscribe for the duration of the `with` block."""
        sub = Subscription(topic)
        if self._closed:
            sub.close()
        self._topics.setdefault(topic, set()).add(sub)
        self.subscribers.inc()
        try:
            yield sub
        finally:
            subs = self._topics.get(topic)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._topics[topic]
            self.subscribers.dec()
            sub.close()

    def publish(self, topic: str, event: Event) -> bool:
        """Lossy: drop the event for any subscriber whose buffer is full.

        Returns True when some subscriber's buffer is at least half full: a producer that can
        afford it should yield to the event loop so the writers drain before anything drops."""
        self._published(event.kind).inc()
        pressure = False
        for sub in self._topics.get(topic, ()):
            if sub.closed:
                continue
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                self.dropped.inc()
            pressure = pressure or sub.queue.qsize() >= BUFFER // 2
        return pressure

    async def deliver(self, topic: str, event: Event) -> None:
        """Must-deliver: bounded wait per full subscriber, then cut it off."""
        self._published(event.kind).inc()
        waiting = []
        for sub in list(self._topics.get(topic, ())):
            if sub.closed:
                continue
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:
                waiting.append(self._wait_or_cut(sub, event))
        if waiting:
            await asyncio.gather(*waiting)

    async def _wait_or_cut(self, sub: Subscription, event: Event) -> None:
        try:
            await asyncio.wait_for(sub.queue.put(event), MUST_WAIT)
        except TimeoutError:
            sub.cut_off = True
            sub.close()
            self.cut.inc()

    def end_topic(self, topic: str) -> None:
        """End every subscription of `topic` (e.g. after its session was deleted)."""
        for sub in list(self._topics.get(topic, ())):
            sub.close()

    def close(self) -> None:
        """End every subscription now and refuse new ones (graceful shutdown)."""
        self._closed = True
        for subs in self._topics.values():
            for sub in subs:
                sub.close()
