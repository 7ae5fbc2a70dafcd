"""Usage reads: the last request of a session, and the daily ledgers by day and model."""

from __future__ import annotations

import sqlite3
from typing import Any

_TOKENS = ("input_tokens", "output_tokens", "total_tokens", "cached_tokens")


def last_request(conn: sqlite3.Connection, session: str) -> dict[str, Any] | None:
    """The newest usage record of `session`."""
    row = conn.execute(
        "SELECT model, input_tokens, output_tokens, total_tokens, cached_tokens"
        " FROM usage_records WHERE session_id = ? ORDER BY event_seq DESC LIMIT 1",
        (session,),
    ).fetchone()
    return None if row is None else dict(zip(("model", *_TOKENS), row, strict=True))


def daily_tokens(conn: sqlite3.Connection, since_day: str) -> list[dict[str, Any]]:
    """Per (day, model) token sums and request counts from `since_day` on."""
    rows = conn.execute(
        "SELECT day, model, input_tokens, output_tokens, total_tokens, cached_tokens,"
        " request_count FROM usage_daily_ledger WHERE day >= ? ORDER BY day, model",
        (since_day,),
    )
    keys = ("day", "model", *_TOKENS, "request_count")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def daily_messages(conn: sqlite3.Connection, since_day: str) -> dict[str, int]:
    """User messages per day from `since_day` on."""
    rows = conn.execute(
        "SELECT day, message_count FROM usage_message_daily_ledger WHERE day >= ?", (since_day,)
    )
    return {day: int(count) for day, count in rows}


def session_days(conn: sqlite3.Connection, since_day: str) -> dict[str, set[str]]:
    """The sessions active on each day from `since_day` on."""
    out: dict[str, set[str]] = {}
    for day, session in conn.execute(
        "SELECT day, session_id FROM usage_session_days WHERE day >= ?", (since_day,)
    ):
        out.setdefault(day, set()).add(session)
    return out


def ledgers(conn: sqlite3.Connection, since_day: str) -> tuple[Any, Any, Any]:
    """Token rows, message counts and session days from `since_day` on, read together."""
    return (
        daily_tokens(conn, since_day),
        daily_messages(conn, since_day),
        session_days(conn, since_day),
    )


def boundary(conn: sqlite3.Connection, session: str, route: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT b.through_seq, b.input_tokens, b.output_tokens, b.total_tokens,"
        " b.cached_tokens, b.payload_bytes, json_extract(e.payload_json, '$.checkpoint_id'),"
        " json_extract(e.payload_json, '$.context_tokens')"
        " FROM context_accepted_boundaries b JOIN events e ON e.seq = b.event_seq"
        " WHERE b.session_id = ? AND b.route = ?",
        (session, route),
    ).fetchone()
    keys = ("through_seq", *_TOKENS, "payload_bytes", "checkpoint_id", "context_tokens")
    return None if row is None else dict(zip(keys, row, strict=True))
