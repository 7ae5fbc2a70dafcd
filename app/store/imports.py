"""Storing imported sessions: one transaction per import, keyed by where each came from.

A session's `import_source` ("chatbuddy:<id>", …) is unique; each of its imported messages
carries its `source_id`. A re-import looks both up and appends only what is new, so importing
the same archive twice stores nothing the second time. Functions here run on the store thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.events import Event, EventDraft
from app.store import sessions
from app.store.events import append


@dataclass
class ImportPlan:
    """One session's share of an import: `row` creates it (None: it exists), then `drafts`."""

    session: str
    row: dict[str, Any] | None
    drafts: list[EventDraft] = field(default_factory=list)


def known(conn: sqlite3.Connection, sources: Iterable[str]) -> dict[str, tuple[str, set[str]]]:
    """For each already imported source key: its session and the source ids it holds."""
    out: dict[str, tuple[str, set[str]]] = {}
    for source in sources:
        row = conn.execute("SELECT id FROM sessions WHERE import_source = ?", (source,)).fetchone()
        if row is None:
            continue
        ids = conn.execute(
            "SELECT json_extract(payload_json, '$.source_id') FROM events"
            " WHERE session_id = ? AND kind = 'message_imported'",
            (row[0],),
        )
        out[source] = (str(row[0]), {str(i) for (i,) in ids if i is not None})
    return out


def store(conn: sqlite3.Connection, plans: Iterable[ImportPlan]) -> list[Event]:
    """Create the new sessions and append every draft, in the caller's transaction."""
    out: list[Event] = []
    for plan in plans:
        if plan.row is not None:
            sessions.insert(conn, plan.row)
        out.extend(append(conn, draft) for draft in plan.drafts)
    return out
