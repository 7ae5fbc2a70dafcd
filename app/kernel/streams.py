"""Session event streams: replay stored events after a seq, then live, with no gap and no
duplicate.

Order of operations is what makes it exact: subscribe first (so nothing published from now on is
missed), replay from the store page by page, then read the live buffer and skip every seq already
sent. The kernel publishes a session's events in seq order, so `seq <= last_sent` identifies
exactly the duplicates. `next()` is safe to cancel (e.g. by a heartbeat timeout): state only
advances after a page or an event is in hand.
"""

from __future__ import annotations

from collections import deque

from app.broker import Subscription
from app.events import Event
from app.store import Store

PAGE = 500


class ReplayStream:
    """One client's view of a topic: stored events after `after` (page by page from `_page`),
    then live ones. `after=None` means live only."""

    def __init__(self, sub: Subscription, after: int | None) -> None:
        self.sub = sub
        self._replaying = after is not None
        self._cursor = after or 0
        self._last_sent = after or 0
        self._pending: deque[Event] = deque()
        self._ended = False

    def prepend(self, events: list[Event]) -> None:
        """Send these (unstored) events first, e.g. a snapshot of a message being generated."""
        self._pending.extendleft(reversed(events))

    async def next(self) -> Event | None:
        """The next event for the client; None when the stream is over."""
        while True:
            if self._ended:
                return None
            if self._pending:
                return self._sent(self._pending.popleft())
            if self._replaying:
                page = await self._page(self._cursor)
                if not page:
                    self._replaying = False
                    continue
                self._cursor = page[-1].seq
                self._pending.extend(page)
                continue
            event = await self.sub.get()
            if event is None:
                self._ended = True
                return None
            if event.seq == 0 or event.seq > self._last_sent:
                return self._sent(event)

    def ready(self, limit: int) -> list[Event]:
        """Up to `limit` events available right now, without waiting (same rules as `next`)."""
        out: list[Event] = []
        while len(out) < limit and not self._ended:
            if self._pending:
                out.append(self._sent(self._pending.popleft()))
                continue
            if self._replaying or self.sub.queue.empty():
                break
            event = self.sub.queue.get_nowait()
            if event is None:
                self._ended = True
            elif event.seq == 0 or event.seq > self._last_sent:
                out.append(self._sent(event))
        return out

    @property
    def cursor(self) -> int:
        """The last stored seq this client has: sent, or given as `after`; 0 for none."""
        return self._last_sent

    def _sent(self, event: Event) -> Event:
        if event.seq > self._last_sent:
            self._last_sent = event.seq
        return event

    async def _page(self, after: int) -> list[Event]:
        """Up to `PAGE` stored events with a seq above `after`, oldest first."""
        raise NotImplementedError


class SessionStream(ReplayStream):
    """One client's view of a session topic."""

    def __init__(self, store: Store, session: str, sub: Subscription, after: int | None) -> None:
        super().__init__(sub, after)
        self.store = store
        self.session = session

    async def _page(self, after: int) -> list[Event]:
        return await self.store.events_after(after, PAGE, self.session)
