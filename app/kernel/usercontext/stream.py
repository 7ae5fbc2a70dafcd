"""The context event stream: journal events after a seq, then live ones, with no gap and no
duplicate — the session stream's method (`app.kernel.streams.ReplayStream`), paging from the
journal instead of the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from app.broker import Subscription
from app.events import Event
from app.kernel.streams import PAGE, ReplayStream
from app.kernel.usercontext.journal import TOPIC, ContextJournal


class ContextStream(ReplayStream):
    """One client's view of the `context` topic; it always replays (from seq `after`)."""

    def __init__(self, journal: ContextJournal, sub: Subscription, after: int) -> None:
        super().__init__(sub, after)
        self.journal = journal

    async def _page(self, after: int) -> list[Event]:
        return list(self.journal.events_after(after, PAGE))


@contextlib.asynccontextmanager
async def context_events(journal: ContextJournal, after: int) -> AsyncIterator[ContextStream]:
    """A stream of journal events with a seq above `after`: stored ones first, then live."""
    await journal.ensure_open()
    with journal.broker.subscribe(TOPIC) as sub:
        yield ContextStream(journal, sub, after)
