"""Projections: what each stored event changes in the read tables, in the event's transaction.

`project()` is the single definition, used by `append` and by `foya check`, which replays the
event log through it into an empty in-memory database and compares the result.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import sqlite3
from collections.abc import Callable

from app import events as k
from app.events import Event, compact_json
from app.jsontypes import JSONObject
from app.store import blobs

#: The one encoding of stored payloads and projection rows.
dumps = compact_json


DAY_NS = 86_400 * 1_000_000_000


def day_of(ns: int) -> str:
    """Ledger day (UTC) of a timestamp."""
    return _day(ns // DAY_NS)


@functools.lru_cache(maxsize=64)
def _day(day_number: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day_number)).isoformat()


def _message(conn: sqlite3.Connection, event: Event, verify_blobs: bool) -> None:
    message = event.payload if isinstance(event.payload, dict) else {}
    role = str(message.get("role", ""))
    conn.execute(
        "INSERT INTO message_projection(event_seq, session_id, role, active) VALUES (?, ?, ?, 1)",
        (event.seq, event.session, role),
    )
    # A fork's copies count neither as new activity nor as new file changes. A message
    # imported from another tool (it has a `source_id`) brings its file change to review, but
    # not activity: it did not happen today.
    imported = event.kind == k.MESSAGE_IMPORTED and "source_id" in message
    if event.kind != k.MESSAGE_END and not imported:
        return
    change = message.get("file_change")
    if isinstance(change, dict):
        before, after = change.get("before_blob"), change.get("after_blob")
        if verify_blobs:
            blobs.require(conn, (before, after))
        conn.execute(
            "INSERT INTO file_changes(event_seq, session_id, path, before_exists, before_mode,"
            " after_mode, before_blob_hash, after_blob_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.seq,
                event.session,
                change["path"],
                1 if change.get("before_exists") else 0,
                change.get("before_mode"),
                change.get("after_mode"),
                before,
                after,
            ),
        )
    if role == "user" and not imported:
        day = day_of(event.time_ns)
        conn.execute(
            "INSERT INTO usage_message_daily_ledger(day, message_count) VALUES (?, 1)"
            " ON CONFLICT(day) DO UPDATE SET message_count = message_count + 1",
            (day,),
        )
        conn.execute(
            "INSERT OR IGNORE INTO usage_session_days(day, session_id) VALUES (?, ?)",
            (day, event.session),
        )


def _tokens(usage: JSONObject) -> tuple[int, int, int, int]:
    # Decoded from the log, maybe stored by another version: each count is checked.
    def n(key: str) -> int:
        value = usage.get(key) or 0
        return int(value) if isinstance(value, int | float) else 0

    inp, out, cached = n("input_tokens"), n("output_tokens"), n("cached_tokens")
    return inp, out, n("total_tokens") or inp + out, cached


def _usage(conn: sqlite3.Connection, event: Event, _: bool) -> None:
    usage = event.payload if isinstance(event.payload, dict) else {}
    model = str(usage.get("model") or "")
    inp, out, total, cached = _tokens(usage)
    conn.execute(
        "INSERT INTO usage_records(event_seq, session_id, model, input_tokens, output_tokens,"
        " total_tokens, cached_tokens, occurred_at_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (event.seq, event.session, model, inp, out, total, cached, event.time_ns),
    )
    day = day_of(event.time_ns)
    conn.execute(
        "INSERT INTO usage_daily_ledger(day, model, input_tokens, output_tokens, total_tokens,"
        " cached_tokens, request_count) VALUES (?, ?, ?, ?, ?, ?, 1)"
        " ON CONFLICT(day, model) DO UPDATE SET"
        " input_tokens = input_tokens + excluded.input_tokens,"
        " output_tokens = output_tokens + excluded.output_tokens,"
        " total_tokens = total_tokens + excluded.total_tokens,"
        " cached_tokens = cached_tokens + excluded.cached_tokens,"
        " request_count = request_count + 1",
        (day, model, inp, out, total, cached),
    )
    conn.execute(
        "INSERT OR IGNORE INTO usage_session_days(day, session_id) VALUES (?, ?)",
        (day, event.session),
    )


def _checkpoint(conn: sqlite3.Connection, event: Event, _: bool) -> None:
    conn.execute(
        "INSERT INTO compaction_checkpoints(session_id, event_seq, checkpoint_json)"
        " VALUES (?, ?, ?)"
        " ON CONFLICT(session_id) DO UPDATE SET event_seq = excluded.event_seq,"
        " checkpoint_json = excluded.checkpoint_json",
        (event.session, event.seq, dumps(event.payload)),
    )


def _boundary(conn: sqlite3.Connection, event: Event, _: bool) -> None:
    accepted = event.payload if isinstance(event.payload, dict) else {}
    usage = accepted.get("usage") if isinstance(accepted.get("usage"), dict) else {}
    inp, out, total, cached = _tokens(usage or {})
    conn.execute(
        "INSERT INTO context_accepted_boundaries(session_id, route, event_seq, through_seq,"
        " input_tokens, output_tokens, total_tokens, cached_tokens, payload_bytes)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id, route) DO UPDATE SET"
        " event_seq = excluded.event_seq, through_seq = excluded.through_seq,"
        " input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,"
        " total_tokens = excluded.total_tokens, cached_tokens = excluded.cached_tokens,"
        " payload_bytes = excluded.payload_bytes",
        (
            event.session,
            str(accepted.get("route", "")),
            event.seq,
            int(accepted.get("through_seq", 0)),
            inp,
            out,
            total,
            cached,
            int(accepted.get("payload_bytes", 0)),
        ),
    )


def _rewound(conn: sqlite3.Connection, event: Event, _: bool) -> None:
    target = int(event.payload["target_user_seq"])
    conn.execute(
        "UPDATE message_projection SET active = 0"
        " WHERE session_id = ? AND event_seq >= ? AND active = 1",
        (event.session, target),
    )
    invalidate_past(conn, event.session, target)
    # The rewind settled these files (restored or knowingly kept): nothing left to review.
    conn.execute(
        "UPDATE file_changes SET review_state = 'rewound'"
        " WHERE session_id = ? AND event_seq >= ? AND review_state = 'pending'",
        (event.session, target),
    )


def invalidate_past(conn: sqlite3.Connection, session: str, target: int) -> None:
    """Drop the checkpoint and accepted boundaries that reach `target` or beyond."""
    row = conn.execute(
        "SELECT checkpoint_json FROM compaction_checkpoints WHERE session_id = ?", (session,)
    ).fetchone()
    if row is not None:
        try:
            through = int(json.loads(row[0]).get("through_seq", target))
        except (ValueError, TypeError, AttributeError):
            through = target  # undecodable: drop it, `load_checkpoint` repairs from events
        if through >= target:
            conn.execute("DELETE FROM compaction_checkpoints WHERE session_id = ?", (session,))
    conn.execute(
        "DELETE FROM context_accepted_boundaries WHERE session_id = ? AND through_seq >= ?",
        (session, target),
    )


def _review(conn: sqlite3.Connection, event: Event, _: bool) -> None:
    resolved = event.payload if isinstance(event.payload, dict) else {}
    state = str(resolved.get("action", "kept"))
    conn.execute(
        "UPDATE file_changes SET review_state = ?"
        " WHERE session_id = ? AND event_seq <= ? AND review_state = 'pending'",
        (state, event.session, int(resolved.get("through_seq", 0))),
    )


_PROJECTORS: dict[str, Callable[[sqlite3.Connection, Event, bool], None]] = {
    k.MESSAGE_END: _message,
    k.MESSAGE_IMPORTED: _message,
    k.USAGE_UPDATED: _usage,
    k.COMPACTION_COMPLETED: _checkpoint,
    k.CONTEXT_REQUEST_ACCEPTED: _boundary,
    k.HISTORY_REWOUND: _rewound,
    k.FILE_REVIEW_RESOLVED: _review,
}


def project(conn: sqlite3.Connection, event: Event, *, verify_blobs: bool = True) -> None:
    """Apply `event` to every projection it touches.

    `verify_blobs=False` is for `foya check`'s replay, whose scratch database holds no blobs
    (it verifies them separately).
    """
    projector = _PROJECTORS.get(event.kind)
    if projector is not None:
        projector(conn, event, verify_blobs)
