"""Startup recovery (seed 000 "重启恢复"): make state consistent after any crash.

The store resets phases, drops partial stream snapshots and prunes expired file changes; here we
also roll back file restores (rewind, review undo) that never committed, putting each file the
restore had written back to its original image. Nothing is re-run: provider streams, queued
input, approvals and tool calls that were in flight are gone, because replaying them could
repeat side effects.
"""

from __future__ import annotations

import asyncio

from app.kernel.filestate import roll_back
from app.logs import get_logger
from app.store import Store


async def recover(store: Store) -> None:
    """Run every recovery step; log what changed."""
    log = get_logger("foya.recovery")
    report = await store.recover()
    for journal in report.pending_journals:
        skipped = await asyncio.to_thread(roll_back, journal.files)
        await store.finish_journal(journal.id)
        log.warning(
            "rolled back an interrupted file restore",
            session=journal.session,
            files=len(journal.files),
        )
        for path in skipped:
            log.error(
                "left a file alone: it is neither as before nor as after the restore", path=path
            )
    log.info(
        "recovery done",
        sessions_reset=report.sessions_reset,
        turns_interrupted=report.turns_interrupted,
        file_changes_pruned=report.file_changes_pruned,
        journals_rolled_back=len(report.pending_journals),
    )
