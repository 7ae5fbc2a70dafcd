"""Usage reads: the last request of a session, and the daily ledgers by day and model."""

from __future__ import annotations

import sqlite3
from typing import Any, TypedDict

from app.events import Usage


class DailyTokens(TypedDict):
    """One (day, model) row of the daily ledger: token sums and how many requests."""

    day: str
    model: str
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    request_count: int


class Boundary(TypedDict):
    """The last accepted request of a (session, route): the history it covered, its real token
    counts and size, and the checkpoint and user context it was built on."""

    through_seq: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int
    payload_bytes: int
    checkpoint_id: str | None
    context_tokens: int | None


def last_request(conn: sqlite3.Connection, session: str) -> Usage | None:
    """The newest usage record of `session`."""
    row = conn.execute(
        "SELECT model, input_tokens, output_tokens, total_tokens, cached_tokens"
        " FROM usage_records WHERE session_id = ? ORDER BY event_seq DESC LIMIT 1",
        (session,),
    ).fetchone()
    if row is None:
        return None
    model, tokens_in, tokens_out, total, cached = row
    return {
        "model": model,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": total,
        "cached_tokens": cached,
    }


def daily_tokens(conn: sqlite3.Connection, since_day: str) -> list[DailyTokens]:
    """Per (day, model) token sums and request counts from `since_day` on."""
    rows = conn.execute(
        "SELECT day, model, input_tokens, output_tokens, total_tokens, cached_tokens,"
        " request_count FROM usage_daily_ledger WHERE day >= ? ORDER BY day, model",
        (since_day,),
    )
    return [
        {
            "day": day,
            "model": model,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": total,
            "cached_tokens": cached,
            "request_count": count,
        }
        for day, model, tokens_in, tokens_out, total, cached, count in rows
    ]


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


def boundary(conn: sqlite3.Connection, session: str, route: str) -> Boundary | None:
    """The last accepted request of (`session`, `route`), if any."""
    row = conn.execute(
        "SELECT b.through_seq, b.input_tokens, b.output_tokens, b.total_tokens,"
        " b.cached_tokens, b.payload_bytes, json_extract(e.payload_json, '$.checkpoint_id'),"
        " json_extract(e.payload_json, '$.context_tokens')"
        " FROM context_accepted_boundaries b JOIN events e ON e.seq = b.event_seq"
        " WHERE b.session_id = ? AND b.route = ?",
        (session, route),
    ).fetchone()
    if row is None:
        return None
    through, tokens_in, tokens_out, total, cached, size, checkpoint, context = row
    return {
        "through_seq": through,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": total,
        "cached_tokens": cached,
        "payload_bytes": size,
        "checkpoint_id": checkpoint,
        "context_tokens": context,
    }
