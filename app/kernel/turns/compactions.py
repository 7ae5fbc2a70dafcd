"""Standalone compactions (`POST /sessions/{id}/compact`): one holds an idle session the way a
turn does, in a task of its own so that a cancel or a queue dispatch can stop it; input arriving
meanwhile is queued and starts once the compaction ends."""

from __future__ import annotations

import asyncio

from app.events import Checkpoint
from app.kernel.sessions import Sessions
from app.kernel.turns.activity import Activity
from app.kernel.turns.compaction import Compactor
from app.kernel.turns.runners import Runners


class Compactions:
    """The running standalone compaction of each session, by session."""

    def __init__(self, sessions: Sessions, compactor: Compactor, runners: Runners) -> None:
        self.sessions = sessions
        self.compactor = compactor
        self.runners = runners
        self.tasks: dict[str, asyncio.Task[Checkpoint]] = {}

    def begin(self, session: str) -> asyncio.Task[Checkpoint]:
        """Hold the (idle) session and compact it in a task of its own."""
        self.runners.activities.begin(session, Activity.COMPACTION)
        task = asyncio.create_task(self._compact(session))
        self.tasks[session] = task
        return task

    async def _compact(self, session: str) -> Checkpoint:
        try:
            await self.sessions.save(session, {"phase": "compaction"})
            try:
                return await self.compactor.compact(session, "standalone")
            finally:
                await self.sessions.save(session, {"phase": "idle"})
        finally:
            self.tasks.pop(session, None)
            self.runners.activities.end(session, Activity.COMPACTION)
            self.runners.resume(session)  # input that arrived meanwhile
