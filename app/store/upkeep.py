"""The store's upkeep: startup recovery, file-restore journals and deferred cleanup jobs.

What runs beside the facts rather than on a turn's path: at start, after a crash, and on the
cleanup sweep. `Store` inherits it; its methods run on the store thread like every other.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from app.jsontypes import JSONObject
from app.store import jobs, journals, retention, snapshots
from app.store.db import Database


@dataclass(frozen=True)
class RecoveryReport:
    """What startup recovery changed."""

    sessions_reset: int
    turns_interrupted: int
    file_changes_pruned: int
    pending_journals: list[journals.Journal]


class Upkeep:
    """Recovery, journals and cleanup jobs of the store's database."""

    db: Database

    # -- lifecycle -----------------------------------------------------------------------------

    async def recover(self) -> RecoveryReport:
        """Startup recovery: reset phases, close interrupted turns, prune old file changes."""

        def run(c: Any) -> RecoveryReport:
            interrupted = snapshots.settle_all(c)
            reset = c.execute("UPDATE sessions SET phase = 'idle' WHERE phase != 'idle'").rowcount
            pruned = retention.prune(c, time.time_ns())
            return RecoveryReport(reset, interrupted, pruned, journals.pending(c))

        return await self.db.write(run)

    async def waiting_queues(self) -> list[tuple[str, int, list[Any]]]:
        """Each live session's queue as its last `queue_updated` left it, when not empty:
        (session, that fact's seq, its items)."""
        return await self.db.read(_waiting_queues)

    async def finish_journal(self, journal: int) -> None:
        await self.db.write(lambda c: journals.finish(c, journal))

    # -- cleanup jobs ----------------------------------------------------------------------------

    async def schedule_job(
        self, kind: str, run_after_ns: int, payload: JSONObject | None = None
    ) -> int | None:
        """Add a job unless one of `kind` is already waiting (used for periodic work)."""
        return await self.db.write(
            lambda c: jobs.schedule(c, kind, run_after_ns, payload, unique=True)
        )

    async def due_jobs(self, now_ns: int) -> list[jobs.Job]:
        return await self.db.read(lambda c: jobs.due(c, now_ns))

    async def next_job_at(self) -> int | None:
        return await self.db.read(jobs.next_due)

    async def job_done(self, job: int) -> None:
        await self.db.write(lambda c: jobs.done(c, job))

    async def job_failed(self, job: int, retry_at_ns: int) -> None:
        await self.db.write(lambda c: jobs.retry(c, job, retry_at_ns))

    async def prune(self) -> int:
        """Apply file-change retention now; return rows pruned."""
        return await self.db.write(lambda c: retention.prune(c, time.time_ns()))


def _waiting_queues(c: Any) -> list[tuple[str, int, list[Any]]]:
    rows = c.execute(
        "SELECT e.session_id, e.seq, e.payload_json FROM events e"
        " JOIN (SELECT session_id, max(seq) AS seq FROM events"
        "       WHERE kind = 'queue_updated' GROUP BY session_id) last ON e.seq = last.seq"
        " JOIN sessions s ON s.id = e.session_id"
        " WHERE json_array_length(e.payload_json, '$.items') > 0 ORDER BY e.seq"
    ).fetchall()
    return [(session, seq, json.loads(payload)["items"]) for session, seq, payload in rows]
