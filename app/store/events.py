"""Appending facts and reading them back. Functions here run on the store thread."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from typing import Any, cast

from app import events as k
from app.errors import NotFound
from app.events import Event, EventDraft, Message
from app.store import blobs
from app.store.projections import dumps, project


class SessionNotFound(NotFound):
    """No such session."""


class SessionDeleted(NotFound):
    """The session was deleted; late appends are refused."""


def require_live_session(conn: sqlite3.Connection, session: str) -> None:
    """Raise unless `session` exists; a deleted one raises `SessionDeleted`."""
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session,)).fetchone() is not None:
        return
    if conn.execute("SELECT 1 FROM deleted_sessions WHERE session_id = ?", (session,)).fetchone():
        raise SessionDeleted(f"session {session} was deleted")
    raise SessionNotFound(f"session {session} not found")


_INSERT_IF_LIVE = (
    "INSERT INTO events(session_id, run_id, kind, occurred_at_ns, payload_json)"
    " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)"
)


def append(conn: sqlite3.Connection, draft: EventDraft, now_ns: int | None = None) -> Event:
    """Store `draft` and update its projections; the caller owns the transaction."""
    if draft.blobs:
        require_live_session(conn, draft.session)  # before storing blobs it would refuse
        for data in draft.blobs.values():
            blobs.put(conn, data)
    when = now_ns if now_ns is not None else time.time_ns()
    payload = None if draft.payload is None else dumps(draft.payload)
    # The live-session check rides on the insert: one statement per append instead of two.
    cur = conn.execute(_INSERT_IF_LIVE, (draft.session, draft.run_id, draft.kind, when, payload))
    if cur.rowcount != 1:
        require_live_session(conn, draft.session)  # raises: the session is gone or unknown
        raise AssertionError(f"event of session {draft.session} not inserted")
    seq = cur.lastrowid
    assert seq is not None
    event = Event(seq, draft.kind, draft.session, draft.run_id, when, draft.payload)
    project(conn, event)
    if draft.kind == k.TURN_COMPLETE:
        # The partial reply kept for crash recovery (app.store.snapshots) is settled with its
        # turn: dropped in the same transaction, which saves the turn a commit of its own.
        conn.execute(
            "DELETE FROM stream_snapshots WHERE session_id = ? AND run_id = ?",
            (draft.session, draft.run_id),
        )
    return event


def append_all(conn: sqlite3.Connection, drafts: Iterable[EventDraft]) -> list[Event]:
    """Append several drafts in the caller's transaction, in order."""
    return [append(conn, d) for d in drafts]


def row_event(row: tuple[Any, ...]) -> Event:
    """An `events` row (seq, session_id, run_id, kind, occurred_at_ns, payload_json) → Event."""
    seq, session, run_id, kind, when, payload = row
    return Event(seq, kind, session, run_id, when, None if payload is None else json.loads(payload))


_EVENT_COLUMNS = "seq, session_id, run_id, kind, occurred_at_ns, payload_json"


def events_after(
    conn: sqlite3.Connection, after_seq: int, limit: int, session: str | None = None
) -> list[Event]:
    """Stored events with seq > `after_seq`, oldest first, at most `limit` (keyset paging)."""
    if session is None:
        rows = conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
            (after_seq, limit),
        )
    else:
        rows = conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events"
            " WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session, after_seq, limit),
        )
    return [row_event(r) for r in rows]


def fact_lines(
    conn: sqlite3.Connection, session: str, after_seq: int, limit: int
) -> tuple[int, list[str]]:
    """A session's stored events with seq > `after_seq` as JSON lines ({seq, kind, run_id,
    occurred_at_ns, payload}), the payload as stored: an export copies it, never decodes it.
    Also the last seq read (`after_seq` when there was none)."""
    rows = conn.execute(
        "SELECT seq, kind, run_id, occurred_at_ns, payload_json FROM events"
        " WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session, after_seq, limit),
    ).fetchall()
    lines = [
        f'{{"seq":{seq},"kind":{json.dumps(kind)},"run_id":{json.dumps(run_id)},'
        f'"occurred_at_ns":{when},"payload":{payload or "null"}}}'
        for seq, kind, run_id, when, payload in rows
    ]
    return (rows[-1][0] if rows else after_seq), lines


def head_seq(conn: sqlite3.Connection) -> int:
    """The highest seq ever assigned (0 for an empty log)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    return int(row[0]) if row else 0


def message_of(event_seq: int, payload: Any) -> Message:
    """A stored Message payload with its `event_seq`."""
    # Decoded from the log, where only `message_end`/`message_imported` payloads are projected.
    message = cast(Message, dict(payload) if isinstance(payload, dict) else {})
    message["event_seq"] = event_seq
    return message


def history(
    conn: sqlite3.Connection, session: str, after_seq: int = 0, limit: int = -1
) -> list[Message]:
    """Active messages of `session` with seq > `after_seq`, in seq order (limit -1: all)."""
    rows = conn.execute(
        "SELECT e.seq, e.payload_json FROM message_projection m"
        " JOIN events e ON e.seq = m.event_seq"
        " WHERE m.session_id = ? AND m.active = 1 AND m.event_seq > ?"
        " ORDER BY m.event_seq LIMIT ?",
        (session, after_seq, limit),
    )
    return [message_of(seq, json.loads(payload)) for seq, payload in rows]


def history_page(
    conn: sqlite3.Connection, session: str, before_seq: int, limit: int
) -> list[Message]:
    """The last `limit` active messages of `session` with seq < `before_seq`, in seq order."""
    rows = conn.execute(
        "SELECT e.seq, e.payload_json FROM message_projection m"
        " JOIN events e ON e.seq = m.event_seq"
        " WHERE m.session_id = ? AND m.active = 1 AND m.event_seq < ?"
        " ORDER BY m.event_seq DESC LIMIT ?",
        (session, before_seq, limit),
    ).fetchall()
    return [message_of(seq, json.loads(payload)) for seq, payload in reversed(rows)]


def history_head(conn: sqlite3.Connection, session: str) -> int:
    """Seq of the last active message of `session` (0 if none)."""
    row = conn.execute(
        "SELECT MAX(event_seq) FROM message_projection WHERE session_id = ? AND active = 1",
        (session,),
    ).fetchone()
    return int(row[0] or 0)
