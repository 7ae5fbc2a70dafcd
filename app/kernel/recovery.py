"""Startup recovery (seed 000 "重启恢复"): make state consistent after any crash.

The store resets phases, drops partial stream snapshots and prunes expired file changes; here we
also roll back rewinds that never committed, putting each journaled file back to its original
image. Nothing is re-run: provider streams, queued input, approvals and tool calls that were in
flight are gone, because replaying them could repeat side effects.
"""

from __future__ import annotations

from pathlib import Path

from app.files import restore_file
from app.logs import get_logger
from app.store import Store


async def recover(store: Store) -> None:
    """Run every recovery step; log what changed."""
    log = get_logger("foya.recovery")
    report = await store.recover()
    for journal in report.pending_journals:
        for f in journal.files:
            if f.original is None:
                log.error("cannot restore a file: its journaled image is damaged", path=f.path)
                continue
            restore_file(
                Path(f.path),
                exists=f.original.exists,
                mode=f.original.mode,
                content=f.original.content,
            )
        await store.finish_journal(journal.id)
        log.warning(
            "rolled back an interrupted rewind",
            session=journal.session,
            files=len(journal.files),
        )
    log.info(
        "recovery done",
        sessions_reset=report.sessions_reset,
        turns_interrupted=report.turns_interrupted,
        file_changes_pruned=report.file_changes_pruned,
        journals_rolled_back=len(report.pending_journals),
    )
