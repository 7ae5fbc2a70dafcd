"""The usage report behind `GET /usage?days=7|30`, computed from the daily ledgers.

Ledgers outlive deleted sessions, so the report still counts them. Days are UTC calendar days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired

from typing_extensions import TypedDict

from app.errors import BadRequest
from app.events import Usage
from app.providers.base import Usage as Spent

RANGES = (7, 30)
ACTIVITY_DAYS = 365


class InvalidRange(BadRequest):
    """`days` of `GET /usage` other than 7 or 30."""

    code = "invalid_range"


def range_days(raw: str | int) -> int:
    """`days` of `GET /usage`, as given in the query: 7 or 30, anything else `invalid_range`."""
    text = str(raw)
    if not (text.isascii() and text.isdigit() and int(text) in RANGES):
        raise InvalidRange("days: must be 7 or 30")
    return int(text)


def payload(model: str, used: Spent | None) -> Usage:
    """The `usage_updated` payload of one model request (zeros when none was reported)."""
    return {
        "model": model,
        "input_tokens": used.input_tokens if used else 0,
        "output_tokens": used.output_tokens if used else 0,
        "total_tokens": used.total_tokens if used else 0,
        "cached_tokens": used.cached_tokens if used else 0,
    }


class DailyActivity(TypedDict):
    date: str
    message_count: int
    token_count: int


class ModelUsage(TypedDict):
    model: str
    token_count: int
    request_count: int
    share: float


class UsageReport(TypedDict):
    """`GET /usage`."""

    range_days: int
    total_tokens: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    session_count: int
    message_count: int
    active_days: int
    current_streak: int
    most_used_model: NotRequired[str]
    most_used_model_share: float
    activity: list[DailyActivity]
    model_usage: list[ModelUsage]


def report(
    days: int,
    today: dt.date,
    tokens: Sequence[Mapping[str, Any]],
    messages: dict[str, int],
    session_days: dict[str, set[str]],
) -> UsageReport:
    """Build the report for `days` (see `range_days`). `tokens` holds per (day, model) rows
    covering the activity window."""
    start = (today - dt.timedelta(days=days - 1)).isoformat()
    in_range = [r for r in tokens if r["day"] >= start]
    totals = {
        key: sum(int(r[key]) for r in in_range)
        for key in ("total_tokens", "input_tokens", "output_tokens", "cached_tokens")
    }
    model_usage = _model_usage(in_range, totals["total_tokens"])
    activity = _activity(today, tokens, messages)
    active: set[str] = {a["date"] for a in activity if a["message_count"] or a["token_count"]}
    sessions_in_range = set().union(*(ids for d, ids in session_days.items() if d >= start))
    out: UsageReport = {
        "range_days": days,
        "total_tokens": totals["total_tokens"],
        "input_tokens": totals["input_tokens"],
        "output_tokens": totals["output_tokens"],
        "cached_tokens": totals["cached_tokens"],
        "session_count": len(sessions_in_range),
        "message_count": sum(n for d, n in messages.items() if d >= start),
        "active_days": sum(1 for d in active if d >= start),
        "current_streak": _streak(active, today),
        "most_used_model_share": model_usage[0]["share"] if model_usage else 0.0,
        "activity": activity,
        "model_usage": model_usage,
    }
    if model_usage:
        out["most_used_model"] = model_usage[0]["model"]
    return out


def _model_usage(rows: Sequence[Mapping[str, Any]], grand: int) -> list[ModelUsage]:
    """Tokens and requests per model over `rows`, the most used first, each with its share of
    `grand` (all tokens in the range)."""
    by_model: dict[str, dict[str, int]] = {}
    for r in rows:
        entry = by_model.setdefault(r["model"], {"token_count": 0, "request_count": 0})
        entry["token_count"] += int(r["total_tokens"])
        entry["request_count"] += int(r["request_count"])
    return sorted(
        (
            {
                "model": model,
                "token_count": counts["token_count"],
                "request_count": counts["request_count"],
                "share": round(counts["token_count"] / grand, 4) if grand else 0.0,
            }
            for model, counts in by_model.items()
        ),
        key=lambda m: (-m["token_count"], m["model"]),
    )


def _activity(
    today: dt.date, tokens: Sequence[Mapping[str, Any]], messages: dict[str, int]
) -> list[DailyActivity]:
    """Messages and tokens of each of the last `ACTIVITY_DAYS` days, oldest first."""
    tokens_by_day: dict[str, int] = {}
    for r in tokens:
        tokens_by_day[r["day"]] = tokens_by_day.get(r["day"], 0) + int(r["total_tokens"])
    activity: list[DailyActivity] = []
    for offset in range(ACTIVITY_DAYS - 1, -1, -1):
        day = (today - dt.timedelta(days=offset)).isoformat()
        activity.append(
            {
                "date": day,
                "message_count": messages.get(day, 0),
                "token_count": tokens_by_day.get(day, 0),
            }
        )
    return activity


def _streak(active: set[str], today: dt.date) -> int:
    """Consecutive active days ending today (or yesterday, if today has no activity yet)."""
    day = today if today.isoformat() in active else today - dt.timedelta(days=1)
    count = 0
    while day.isoformat() in active:
        count += 1
        day -= dt.timedelta(days=1)
    return count
