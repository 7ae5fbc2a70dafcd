"""Compaction checkpoints: validation and repair of the `compaction_checkpoints` projection.

A checkpoint (the payload of `compaction_completed`) is accepted only in the current format
(`version` == `CHECKPOINT_VERSION`) with an id, a `through_seq` that is an active message, and a
`source_digest` equal to the digest of the active message seqs it covers — so a rewind or any
change below the boundary invalidates it. A missing, corrupt or invalid row is rebuilt from the
newest valid `compaction_completed` after the last `history_rewound`, or dropped so the model
history falls back to raw messages.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any, cast

from app import events as k
from app.events import Checkpoint

CHECKPOINT_VERSION = 1


def source_digest(conn: sqlite3.Connection, session: str, through_seq: int) -> str:
    """SHA-256 over the seqs of the active messages at or below `through_seq`."""
    seqs = conn.execute(
        "SELECT event_seq FROM message_projection"
        " WHERE session_id = ? AND active = 1 AND event_seq <= ? ORDER BY event_seq",
        (session, through_seq),
    )
    h = hashlib.sha256()
    for (seq,) in seqs:
        h.update(b"%d," % seq)
    return h.hexdigest()


def is_valid(conn: sqlite3.Connection, session: str, checkpoint: Any) -> bool:
    """Whether `checkpoint` is in the current format and still matches the active history."""
    if not isinstance(checkpoint, dict) or checkpoint.get("version") != CHECKPOINT_VERSION:
        return False
    through, cid = checkpoint.get("through_seq"), checkpoint.get("id")
    if not isinstance(cid, str) or not cid or not isinstance(through, int) or through <= 0:
        return False
    active = conn.execute(
        "SELECT 1 FROM message_projection WHERE event_seq = ? AND session_id = ? AND active = 1",
        (through, session),
    ).fetchone()
    return active is not None and checkpoint.get("source_digest") == source_digest(
        conn, session, through
    )


class Repair:
    """`current` cannot answer without repairing the projection (a write: `load`)."""


REPAIR = Repair()


def _holding(conn: sqlite3.Connection, session: str, stored: Any) -> Checkpoint | None:
    """`stored` (decoded JSON) as a Checkpoint if it is one that still holds (`is_valid`)."""
    return cast(Checkpoint, dict(stored)) if is_valid(conn, session, stored) else None


def current(conn: sqlite3.Connection, session: str) -> Checkpoint | Repair | None:
    """The valid checkpoint, None if there is none and none to rebuild, or `REPAIR`."""
    row = conn.execute(
        "SELECT checkpoint_json FROM compaction_checkpoints WHERE session_id = ?", (session,)
    ).fetchone()
    if row is None:
        candidate = conn.execute(
            "SELECT 1 FROM events WHERE session_id = ? AND kind = ? LIMIT 1",
            (session, k.COMPACTION_COMPLETED),
        ).fetchone()
        return REPAIR if candidate else None
    try:
        stored = json.loads(row[0])
    except (ValueError, TypeError):
        return REPAIR
    return _holding(conn, session, stored) or REPAIR


def load(conn: sqlite3.Connection, session: str) -> Checkpoint | None:
    """The session's valid checkpoint, repairing or dropping the projection row as needed."""
    row = conn.execute(
        "SELECT checkpoint_json FROM compaction_checkpoints WHERE session_id = ?", (session,)
    ).fetchone()
    if row is not None:
        try:
            stored = json.loads(row[0])
        except (ValueError, TypeError):
            stored = None
        found = _holding(conn, session, stored)
        if found is not None:
            return found
    last_rewind = conn.execute(
        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ? AND kind = ?",
        (session, k.HISTORY_REWOUND),
    ).fetchone()[0]
    candidates = conn.execute(
        "SELECT seq, payload_json FROM events WHERE session_id = ? AND kind = ? AND seq > ?"
        " ORDER BY seq DESC",
        (session, k.COMPACTION_COMPLETED, last_rewind),
    ).fetchall()
    for seq, payload in candidates:
        try:
            checkpoint = json.loads(payload)
        except (ValueError, TypeError):
            continue
        found = _holding(conn, session, checkpoint)
        if found is not None:
            conn.execute(
                "INSERT OR REPLACE INTO compaction_checkpoints(session_id, event_seq,"
                " checkpoint_json) VALUES (?, ?, ?)",
                (session, seq, payload),
            )
            return found
    conn.execute("DELETE FROM compaction_checkpoints WHERE session_id = ?", (session,))
    return None
