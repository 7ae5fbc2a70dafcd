"""The emit path: the one way a session fact leaves the kernel.

A fact is appended to the store first and published to the session's subscribers after its
commit, under the session's lock, so subscribers see a session's events in seq order (SSE
replay relies on it). Several facts that belong together (the end of a step: usage, the accepted
boundary, the assistant message, the tool updates) are stored in one transaction and published
in order: one commit and one fsync instead of one per fact. Deltas are never stored: they are
published lossily with seq 0.

Observers (`observe`) are told every stored fact once it is published, whatever its session:
how push notifications (app.kernel.push) see approvals and finished turns without a
subscription per session. They are called on the loop and must not block.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from app.broker import Broker
from app.events import Event, EventDraft
from app.kernel.ids import now_ns
from app.store import Store


def topic(session: str) -> str:
    """The broker topic of a session's events."""
    return f"session:{session}"


class Facts:
    """Appends session facts, then publishes them."""

    def __init__(self, store: Store, broker: Broker) -> None:
        self.store = store
        self.broker = broker
        self._locks: dict[str, asyncio.Lock] = {}
        self._observers: list[Callable[[Event], None]] = []

    def observe(self, fn: Callable[[Event], None]) -> None:
        """Call `fn(event)` for every fact stored from now on, after its publication."""
        self._observers.append(fn)

    def _told(self, event: Event) -> None:
        for fn in self._observers:
            fn(event)

    def lock(self, session: str) -> asyncio.Lock:
        """The lock that orders `session`'s appends with their publication."""
        return self._locks.setdefault(session, asyncio.Lock())

    async def emit(
        self, draft: EventDraft, *, must: bool = True, journal: int | None = None
    ) -> Event:
        """Append `draft` (forgetting a finished file `journal` in the same transaction) and
        publish it."""

        async def write() -> Event:
            return await self.store.append(draft, journal=journal)

        return (await self.commit(draft.session, write, must=must))[0]

    async def emit_all(self, session: str, drafts: Sequence[EventDraft]) -> list[Event]:
        """Append `drafts` in one transaction, then publish them in order."""
        if not drafts:
            return []
        return await self.commit(session, lambda: self.store.append_all(drafts))

    async def commit(
        self,
        session: str,
        write: Callable[[], Awaitable[Event | list[Event]]],
        *,
        must: bool = True,
    ) -> list[Event]:
        """Run a store write that appends events of `session`, then publish them."""
        async with self.lock(session):
            written = await write()
            events = written if isinstance(written, list) else [written]
            for event in events:
                if must:
                    await self.broker.deliver(topic(session), event)
                else:
                    self.broker.publish(topic(session), event)
                self._told(event)
        return events

    async def commit_across(
        self,
        sessions: Collection[str],
        write: Callable[[], Awaitable[list[Event]]],
        *,
        must: bool = True,
    ) -> list[Event]:
        """Run a store write that appends events of several sessions in one transaction (an
        import), holding each of `sessions`' locks, then publish the events of `sessions` in
        order. Events of other sessions (new ones, which nobody can be watching) are stored
        only."""
        async with contextlib.AsyncExitStack() as held:
            for session in sorted(set(sessions)):  # one order: two such writes never deadlock
                await held.enter_async_context(self.lock(session))
            events = await write()
            for event in events:
                if event.session not in sessions:
                    continue
                if must:
                    await self.broker.deliver(topic(event.session), event)
                else:
                    self.broker.publish(topic(event.session), event)
                self._told(event)
        return events

    def publish_delta(self, session: str, kind: str, payload: Any, run_id: str | None) -> bool:
        """A lossy, unstored event (seq 0). True if a subscriber is falling behind."""
        return self.broker.publish(
            topic(session), Event(0, kind, session, run_id, now_ns(), payload)
        )

    async def announce(self, session: str, event: Event) -> None:
        """Deliver an event that is not stored (`session_deleted`), then end the topic."""
        await self.broker.deliver(topic(session), event)
        self.broker.end_topic(topic(session))
        self._locks.pop(session, None)
