"""History operations as facts (a change is a new event; nothing stored is rewritten): rewind,
fork, and the one exception, delete."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from app import events as k
from app.errors import BadRequest, Conflict, NotFound
from app.events import Event, EventDraft, FileOutcome, HistoryRewound, SessionForked
from app.store import blobs, jobs, journals, sessions
from app.store.events import append, history, history_head, require_live_session


class MessageNotFound(NotFound):
    """The message seq is not an active message of the session."""

    code = "message_not_found"


class HistoryChanged(Conflict):
    """The session's history moved since the caller looked."""

    code = "history_changed"


class NotAUserMessage(BadRequest):
    """A rewind to something other than a user message (or to a seq that cannot be one)."""

    code = "invalid_message_seq"


def active_message(conn: sqlite3.Connection, session: str, seq: int) -> str:
    """The role of active message `seq` of `session`; `MessageNotFound` otherwise."""
    row = conn.execute(
        "SELECT role FROM message_projection WHERE event_seq = ? AND session_id = ? AND active = 1",
        (seq, session),
    ).fetchone()
    if row is None:
        raise MessageNotFound(f"message {seq} is not in the active history of session {session}")
    return str(row[0])


def check_rewind(
    conn: sqlite3.Connection, session: str, target_user_seq: int, expected_head_seq: int
) -> None:
    """Raise unless `target_user_seq` is an active user message and the head is as expected."""
    require_live_session(conn, session)
    if active_message(conn, session, target_user_seq) != "user":
        raise NotAUserMessage(f"message {target_user_seq} is not a user message")
    head = history_head(conn, session)
    if head != expected_head_seq:
        raise HistoryChanged(f"history head is {head}, expected {expected_head_seq}")


def rewind(
    conn: sqlite3.Connection,
    session: str,
    target_user_seq: int,
    expected_head_seq: int,
    files: list[FileOutcome] | None = None,
    journal: int | None = None,
) -> Event:
    """Deactivate `target_user_seq` and everything after it by appending `history_rewound`;
    forget the rewind's file journal in the same transaction (its files are now final)."""
    check_rewind(conn, session, target_user_seq, expected_head_seq)
    payload: HistoryRewound = {"target_user_seq": target_user_seq}
    if files:
        payload["files"] = files
    event = append(conn, EventDraft(session, k.HISTORY_REWOUND, payload))
    if journal is not None:
        journals.finish(conn, journal)
    return event


def fork(
    conn: sqlite3.Connection,
    source: str,
    new_row: dict[str, Any],
    through_seq: int | None,
    forked_at: str,
    rename_attachment: Callable[[str], str] = str,
) -> list[Event]:
    """Create session `new_row` holding copies of `source`'s active messages up to `through_seq`.

    Copies are `message_imported` events with new seqs, so later changes to the source never
    reach the fork; their attachments are renamed by `rename_attachment` (the fork's own ids).
    """
    require_live_session(conn, source)
    if through_seq is not None:
        active_message(conn, source, through_seq)
    messages = [
        m
        for m in history(conn, source)
        if through_seq is None or int(m["event_seq"]) <= through_seq
    ]
    sessions.insert(conn, new_row)
    new = str(new_row["id"])
    last = through_seq if through_seq is not None else history_head(conn, source)
    forked = append(
        conn,
        EventDraft(
            new,
            k.SESSION_FORKED,
            SessionForked(
                source_session_id=source,
                through_seq=last,
                forked_at=forked_at,
                message_count=len(messages),
            ),
        ),
    )
    out = [forked]
    for message in messages:
        copy = message.copy()
        del copy["event_seq"]
        copy.pop("source_id", None)  # a fork is not the import: its copies are not re-keyed
        if "attachments" in copy:
            copy["attachments"] = [
                {**a, "id": rename_attachment(str(a.get("id")))} for a in copy["attachments"]
            ]
        out.append(append(conn, EventDraft(new, k.MESSAGE_IMPORTED, copy)))
    return out


REMOVE_SESSION_FILES = "remove_session_files"


def delete_session(conn: sqlite3.Connection, session: str, now_ns: int) -> int:
    """Mark `session` deleted and remove its facts and projections; keep the daily ledgers.

    Returns the cleanup job that removes the session's directories (done after the commit)."""
    conn.execute(
        "INSERT OR IGNORE INTO deleted_sessions(session_id, deleted_at_ns) VALUES (?, ?)",
        (session, now_ns),
    )
    for table, column in (
        ("file_changes", "session_id"),
        ("usage_records", "session_id"),
        ("compaction_checkpoints", "session_id"),
        ("context_accepted_boundaries", "session_id"),
        ("stream_snapshots", "session_id"),
        ("file_rewind_journals", "session_id"),
        ("message_projection", "session_id"),
        ("events", "session_id"),
        ("sessions", "id"),
    ):
        conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (session,))
    blobs.collect_garbage(conn)
    job = jobs.schedule(conn, REMOVE_SESSION_FILES, now_ns, {"session": session})
    assert job is not None
    return job
