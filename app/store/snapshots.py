"""Stream snapshots: the partial assistant message of a running turn, replaced in place.

A running turn always has a row (empty between steps). After a crash, `settle_all` turns each
leftover row into what a cancelled turn would have left: the partial reply, if any, as an
assistant message (`turn_status` failed, reason `interrupted`) and a `turn_complete`, so text
generated before the crash is not lost, the turn is closed once, and nothing is re-run.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from app import events as k
from app.events import EventDraft, iso_time
from app.store.events import append


def put(
    conn: sqlite3.Connection, session: str, run_id: str, message: dict[str, Any], now: int
) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO stream_snapshots(session_id, run_id, message_json, updated_at_ns)"
        " VALUES (?, ?, ?, ?)",
        (session, run_id, json.dumps(message, ensure_ascii=False), now),
    )


def clear(conn: sqlite3.Connection, session: str) -> None:
    conn.execute("DELETE FROM stream_snapshots WHERE session_id = ?", (session,))


def settle_all(conn: sqlite3.Connection) -> int:
    """Record every interrupted turn's partial reply; return how many there were."""
    rows = conn.execute(
        "SELECT s.session_id, s.run_id, s.message_json FROM stream_snapshots s"
        " JOIN sessions ON sessions.id = s.session_id"
    ).fetchall()
    now = iso_time(time.time_ns())
    for session, run_id, message_json in rows:
        # A crash can fall between the turn's last facts and clearing its row: recording what
        # the log already has would duplicate it.
        if _has(conn, session, run_id, "kind = 'turn_complete'"):
            continue
        message = json.loads(message_json)
        started = message.get("turn_started_at", now)
        final = "kind = 'message_end' AND json_extract(payload_json, '$.turn_status') IS NOT NULL"
        if (message.get("content") or message.get("reasoning")) and not _has(
            conn, session, run_id, final
        ):
            message.update(turn_completed_at=now, turn_status="failed", turn_reason="interrupted")
            append(conn, EventDraft(session, k.MESSAGE_END, message, run_id))
        append(
            conn,
            EventDraft(
                session,
                k.TURN_COMPLETE,
                {
                    "run_id": run_id,
                    "started_at": started,
                    "completed_at": now,
                    "status": "failed",
                    "reason": "interrupted",
                },
                run_id,
            ),
        )
    conn.execute("DELETE FROM stream_snapshots")
    return len(rows)


def _has(conn: sqlite3.Connection, session: str, run_id: str, condition: str) -> bool:
    row = conn.execute(
        f"SELECT 1 FROM events WHERE session_id = ? AND run_id = ? AND {condition} LIMIT 1",
        (session, run_id),
    ).fetchone()
    return row is not None
