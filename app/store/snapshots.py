"""Stream snapshots: the partial assistant message of a running turn, replaced in place.

After a crash, `settle_all` closes each turn that was running the way a cancel would have: the
text streamed since the run's last recorded message (if a snapshot holds any) becomes an
assistant message (`turn_status` failed, reason `interrupted`), then `turn_complete`, so text
generated before the crash is not lost, the turn is closed once, and nothing is re-run. Open
turns are found from the log (phase `turn`, a `turn_started` without `turn_complete`), so a
running turn needs no extra write to be recoverable. A turn's snapshot is dropped by its
`turn_complete` in the same transaction (`app.store.events.append`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from app import events as k
from app.events import EventDraft, Message, TurnComplete, iso_time
from app.store.events import append


def put(conn: sqlite3.Connection, session: str, run_id: str, message: Message, now: int) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO stream_snapshots(session_id, run_id, message_json, updated_at_ns)"
        " VALUES (?, ?, ?, ?)",
        (session, run_id, json.dumps(message, ensure_ascii=False), now),
    )


def settle_all(conn: sqlite3.Connection) -> int:
    """Close every turn a crash left open (its session still in phase `turn`); return how many.

    Call before phases are reset."""
    now = iso_time(time.time_ns())
    closed = 0
    for (session,) in conn.execute("SELECT id FROM sessions WHERE phase = 'turn'").fetchall():
        started = _last(conn, session, "kind = 'turn_started'")
        if started is None:
            continue
        _, run_id, when, payload = started
        if run_id is None or _last(conn, session, "kind = 'turn_complete' AND run_id = ?", run_id):
            continue
        snapshot = conn.execute(
            "SELECT message_json, updated_at_ns FROM stream_snapshots"
            " WHERE session_id = ? AND run_id = ?",
            (session, run_id),
        ).fetchone()
        reply = _last(conn, session, "kind = 'message_end' AND run_id = ?", run_id)
        # Without a snapshot there is no text to keep: an empty message, never appended.
        message: Message = json.loads(snapshot[0]) if snapshot is not None else {"role": ""}
        fresh = snapshot is not None and (reply is None or reply[2] < snapshot[1])
        if fresh and (message.get("content") or message.get("reasoning")):
            # Text streamed after the run's last recorded message: keep it.
            message["turn_completed_at"] = now
            message["turn_status"], message["turn_reason"] = "failed", "interrupted"
            append(conn, EventDraft(session, k.MESSAGE_END, message, run_id))
        started_at = json.loads(payload or "{}").get("started_at", iso_time(when))
        done: TurnComplete = {
            "run_id": run_id,
            "started_at": started_at,
            "completed_at": now,
            "status": "failed",
            "reason": "interrupted",
        }
        append(conn, EventDraft(session, k.TURN_COMPLETE, done, run_id))
        closed += 1
    conn.execute("DELETE FROM stream_snapshots")
    return closed


def _last(
    conn: sqlite3.Connection, session: str, condition: str, *args: Any
) -> tuple[Any, ...] | None:
    """The session's newest event matching `condition`: (seq, run_id, occurred_at_ns, payload)."""
    row = conn.execute(
        "SELECT seq, run_id, occurred_at_ns, payload_json FROM events"
        f" WHERE session_id = ? AND {condition} ORDER BY seq DESC LIMIT 1",
        (session, *args),
    ).fetchone()
    return None if row is None else tuple(row)
