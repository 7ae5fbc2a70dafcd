"""Session titles: generated once from the first exchange, in the background.

A title the user set (`title_is_manual`) is never replaced, including one set while the title
was being generated: the row is read again just before writing.
"""

from __future__ import annotations

import asyncio

from app.errors import FoyaError
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
from app.logs import get_logger
from app.providers.base import ChatRequest, ProviderError
from app.store import Store

PROMPT = (
    "Write a short title (at most 6 words) for a conversation that starts like this. "
    "Answer with the title only, no quotes."
)
MAX_TITLE = 80


class Titles:
    """Background title generation."""

    def __init__(self, sessions: Sessions, store: Store, providers: Providers) -> None:
        self.sessions = sessions
        self.store = store
        self.providers = providers
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.log = get_logger("foya.titles")

    def schedule(self, session: str) -> None:
        """Generate a title for `session` if it has none (at most one attempt at a time)."""
        if session not in self._tasks:
            task = asyncio.create_task(self._generate(session))
            self._tasks[session] = task
            task.add_done_callback(lambda _: self._tasks.pop(session, None))

    def cancel_all(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()

    async def _generate(self, session: str) -> None:
        try:
            row = await self.sessions.row(session)
            if row.get("title"):
                return
            history = await self.store.history(session, limit=2)
            opening = "\n".join(
                f"[{m.get('role')}] {str(m.get('content') or '')[:2000]}" for m in history
            )
            completion = await self.providers.for_session(row).complete(
                ChatRequest(
                    model=row["model"],
                    messages=[
                        {"role": "system", "content": PROMPT},
                        {"role": "user", "content": opening},
                    ],
                    max_tokens=30,
                )
            )
            title = completion.text.strip().splitlines()[0].strip().strip("\"'")[:MAX_TITLE].strip()
            if not title:
                return
            current = await self.sessions.row(session)
            if current.get("title") or current.get("title_is_manual"):
                return
            columns = {"title": title, "title_is_manual": 0}
            await self.sessions.save(session, columns)
        except (ProviderError, FoyaError, IndexError) as exc:
            self.log.info("no title generated", session=session, error=type(exc).__name__)
