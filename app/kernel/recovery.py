"""Startup recovery: make state consistent after any crash.

The store resets phases, drops partial stream snapshots and prunes expired file changes; here we
also roll back file journals that never committed, putting each file the journal had written
back to its original image: restores (rewind, review undo) and single tool changes (write, edit,
delete) alike. A tool change's journal is forgotten in the transaction that records the change,
so a journal left means no committed event records it: the file goes back if it is exactly the
after-image, and is left alone (logged) if it changed since. Beside every journaled file the
temp files of an interrupted atomic write (`app.files` naming only) are deleted. Nothing is
re-run: provider streams, queued input, approvals and tool calls that were in flight are gone,
because replaying them could repeat side effects.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.files import remove_stray_temps
from app.kernel.filestate import roll_back
from app.logs import get_logger
from app.store import Store
from app.store.journals import Journal


def _repair(journal: Journal) -> tuple[int, list[str]]:
    """(stray temp files removed, paths left alone) for one interrupted journal. Blocking."""
    strays = sum(len(remove_stray_temps(Path(f.path))) for f in journal.files)
    return strays, roll_back(journal.files)


async def recover(store: Store) -> None:
    """Run every recovery step; log what changed."""
    log = get_logger("foya.recovery")
    report = await store.recover()
    temps = 0
    for journal in report.pending_journals:
        strays, skipped = await asyncio.to_thread(_repair, journal)
        temps += strays
        await store.finish_journal(journal.id)
        if journal.tool_change:
            log.warning(
                "rolled back a tool file change that was never recorded",
                session=journal.session,
                path=journal.files[0].path,
            )
        else:
            log.warning(
                "rolled back an interrupted file restore",
                session=journal.session,
                files=len(journal.files),
            )
        for path in skipped:
            log.error(
                "left a file alone: it is neither as before nor as after the change", path=path
            )
    log.info(
        "recovery done",
        sessions_reset=report.sessions_reset,
        turns_interrupted=report.turns_interrupted,
        file_changes_pruned=report.file_changes_pruned,
        journals_rolled_back=len(report.pending_journals),
        temp_files_removed=temps,
    )
