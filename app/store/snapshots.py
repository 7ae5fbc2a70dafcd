"""Stream snapshots: the partial assistant message of a running turn, replaced in place.

After a crash, `settle_all` turns each leftover snapshot into what a cancelled turn would have
left: the partial reply as an assistant message (`turn_status` failed, reason `interrupted`) and
a `turn_complete`, so the text generated before the crash is not lost and nothing is re-run.
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
        message = json.loads(message_json)
        started = message.get("turn_started_at", now)
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
