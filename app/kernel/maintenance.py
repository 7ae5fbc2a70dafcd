"""Background upkeep driven by `cleanup_jobs`: file-change retention every hour and the removal
of deleted sessions' directories. Jobs live in the database, so work a crash interrupted is
picked up at the next start; a failing job is retried later, never dropped.

The jobs due at start run in the background task's first round, not before the server listens:
nothing in them is needed to serve (crash recovery, which is, runs before: app.kernel.recovery),
and a prune of a large history would otherwise delay the first answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from app.kernel.lifecycle import cancel_and_wait
from app.logs import get_logger
from app.store import Store
from app.store.history import REMOVE_SESSION_FILES
from app.store.jobs import Job

PRUNE_FILE_CHANGES = "prune_file_changes"
PRUNE_INTERVAL_NS = 3600 * 1_000_000_000
RETRY_NS = 300 * 1_000_000_000
MAX_SLEEP = 3600.0


class Maintenance:
    """Runs due cleanup jobs in the background: at start, then whenever the next one falls due."""

    def __init__(
        self, store: Store, remove_session_files: Callable[[str], Awaitable[None]]
    ) -> None:
        self.store = store
        self.remove_session_files = remove_session_files
        self.log = get_logger("foya.maintenance")
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the jobs due now, then each one as it falls due, in a background task."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="maintenance")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def run_due(self, now_ns: int | None = None) -> int:
        """Run every job due at `now_ns` (default: now); return how many succeeded."""
        now = now_ns if now_ns is not None else time.time_ns()
        ran = 0
        for job in await self.store.due_jobs(now):
            try:
                await self._run(job)
            except Exception:
                self.log.exception("cleanup job failed; will retry", kind=job.kind, job=job.id)
                await self.store.job_failed(job.id, now + RETRY_NS)
                continue
            await self.store.job_done(job.id)
            ran += 1
        # A no-op while a prune is waiting; after one ran, the next is due an interval later.
        await self.store.schedule_job(PRUNE_FILE_CHANGES, now + PRUNE_INTERVAL_NS)
        return ran

    async def _run(self, job: Job) -> None:
        if job.kind == PRUNE_FILE_CHANGES:
            pruned = await self.store.prune()
            self.log.info("file changes pruned", rows=pruned)
        elif job.kind == REMOVE_SESSION_FILES:
            await self.remove_session_files(str(job.payload["session"]))
        else:
            self.log.warning("unknown cleanup job dropped", kind=job.kind)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_due()
                due = await self.store.next_job_at()
            except Exception:
                self.log.exception("maintenance failed")
                due = None
            wait = MAX_SLEEP if due is None else max(0.0, (due - time.time_ns()) / 1e9)
            await asyncio.sleep(min(wait, MAX_SLEEP) + 1.0)
