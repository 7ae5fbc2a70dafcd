"""Recent conversation across sessions, read in seq order: what memory maintenance condenses.

Functions here run on the store thread.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from app import events as k
from app.events import Message
from app.store.events import message_of


@dataclass(frozen=True)
class RecentMessage:
    """A user or assistant message of a top-level session, with what places it."""

    session: str
    project_id: str | None
    title: str | None
    message: Message  # carries its `event_seq`


def messages_after(conn: sqlite3.Connection, after_seq: int, limit: int) -> list[RecentMessage]:
    """Active user and assistant messages with seq > `after_seq`, oldest first, at most `limit`.

    Only messages the session itself produced (`message_end`: a fork's imported copies were
    already read in their source) of top-level sessions (a sub-agent's conversation is the
    agent's, not the user's). Tool results are left out by their role."""
    rows = conn.execute(
        "SELECT e.seq, e.session_id, s.project_id, s.title, e.payload_json"
        " FROM message_projection m"
        " JOIN events e ON e.seq = m.event_seq"
        " JOIN sessions s ON s.id = m.session_id"
        " WHERE m.event_seq > ? AND m.active = 1 AND m.role IN ('user', 'assistant')"
        " AND e.kind = ? AND s.parent_id IS NULL"
        " ORDER BY m.event_seq LIMIT ?",
        (after_seq, k.MESSAGE_END, limit),
    )
    return [
        RecentMessage(session, project_id, title, message_of(seq, json.loads(payload)))
        for seq, session, project_id, title, payload in rows
    ]
