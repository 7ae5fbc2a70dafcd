"""Usage: the last request of a session, the 7/30-day report, the token metric
(ledgers outlive deleted sessions).

A kernel of this module's own serves it, so the global report holds exactly what these tests
did: the first test sees it empty, the next ones add known usage through the fake provider.
The report's arithmetic over several days is checked on `app.kernel.usage.report` directly.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.fake_provider import Agent, agent_kernel, answer, call, finish, text, tools, usage
from support.streams_helpers import assert_error

from app.kernel.usage import InvalidRange, range_days, report

FIELDS = {
    "range_days",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "session_count",
    "message_count",
    "active_days",
    "current_streak",
    "most_used_model_share",
    "activity",
    "model_usage",
}
TOKEN_KEYS = ("input_tokens", "output_tokens", "total_tokens", "cached_tokens")


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("usage")) as agent:
        yield agent


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def get_report(client: httpx.Client, days: int | None) -> dict[str, Any]:
    response = client.get("/usage", params={} if days is None else {"days": days})
    assert response.status_code == 200, response.text
    return dict(response.json())


def check_activity(body: dict[str, Any]) -> None:
    """365 entries of consecutive dates, today (UTC) last."""
    activity = body["activity"]
    assert len(activity) == 365
    dates = [dt.date.fromisoformat(a["date"]) for a in activity]
    assert dates[-1] == today()
    assert all(b - a == dt.timedelta(days=1) for a, b in itertools.pairwise(dates))
    assert all(set(a) == {"date", "message_count", "token_count"} for a in activity)


def token_metrics(client: httpx.Client) -> dict[tuple[str, str], float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "foya_model_tokens_total":
                out[sample.labels["model"], sample.labels["kind"]] = float(sample.value)
    return out


# ------------------------------------------------------------------------------ the kernel


def test_a_fresh_kernel_reports_no_usage(agent: Agent) -> None:
    for days in (7, 30):
        body = get_report(agent.client, days)
        assert set(body) == FIELDS, set(body) ^ FIELDS
        assert body["range_days"] == days
        assert all(body[key] == 0 for key in TOKEN_KEYS)
        assert body["session_count"] == body["message_count"] == 0
        assert body["active_days"] == body["current_streak"] == 0
        assert body["most_used_model_share"] == 0.0
        assert body["model_usage"] == []
        check_activity(body)
        assert all(a["message_count"] == a["token_count"] == 0 for a in body["activity"])
    assert get_report(agent.client, None)["range_days"] == 30, "30 days by default"
    # A session without any request: zeros, under its model.
    s = agent.session()
    response = agent.client.get(f"/sessions/{s.id}/usage")
    assert response.status_code == 200, response.text
    assert response.json() == {"model": s.model, **dict.fromkeys(TOKEN_KEYS, 0)}


@pytest.mark.parametrize("days", ["14", "0", "1", "31", "365", "-7", "7.0", "seven", ""])
def test_other_ranges_are_invalid(agent: Agent, days: str) -> None:
    assert_error(agent.client.get("/usage", params={"days": days}), 400, "invalid_range")


def test_usage_after_turns_in_two_sessions_and_after_deleting_one(agent: Agent) -> None:
    a = agent.session()
    # Two requests in one turn: 100+20, then 150+10.
    a.turn(
        tools(call("c1", "bash", {"command": "true"}), prompt=100, completion=20),
        answer("done", prompt=150, completion=10),
    )
    b = agent.session()
    for _ in range(2):
        b.turn([text("hi"), finish("stop"), usage(400, 40, cached=100)], message="again")
    a_last = {"model": a.model, "input_tokens": 150, "output_tokens": 10, "total_tokens": 160}
    assert agent.client.get(f"/sessions/{a.id}/usage").json() == {**a_last, "cached_tokens": 0}
    assert agent.client.get(f"/sessions/{b.id}/usage").json() == {
        "model": b.model,
        "input_tokens": 400,
        "output_tokens": 40,
        "total_tokens": 440,
        "cached_tokens": 100,
    }

    expected_models = [
        {"model": b.model, "token_count": 880, "request_count": 2, "share": 0.7586},
        {"model": a.model, "token_count": 280, "request_count": 2, "share": 0.2414},
    ]
    for days in (7, 30):
        body = get_report(agent.client, days)
        assert set(body) == FIELDS | {"most_used_model"}
        assert body["range_days"] == days
        assert {key: body[key] for key in TOKEN_KEYS} == {
            "input_tokens": 1050,
            "output_tokens": 110,
            "total_tokens": 1160,
            "cached_tokens": 200,
        }
        assert body["session_count"] == 2
        assert body["message_count"] == 3, "user messages"
        assert body["active_days"] == 1 and body["current_streak"] == 1
        assert body["most_used_model"] == b.model
        assert body["most_used_model_share"] == 0.7586
        assert body["model_usage"] == expected_models
        assert sum(m["share"] for m in body["model_usage"]) == pytest.approx(1, abs=1e-3)
        check_activity(body)
        assert body["activity"][-1] == {
            "date": today().isoformat(),
            "message_count": 3,
            "token_count": 1160,
        }
        assert all(x["message_count"] == x["token_count"] == 0 for x in body["activity"][:-1])

    metrics = token_metrics(agent.client)
    expected_metrics = {
        (a.model, "input"): 250.0,
        (a.model, "output"): 30.0,
        (a.model, "cached"): 0.0,
        (b.model, "input"): 800.0,
        (b.model, "output"): 80.0,
        (b.model, "cached"): 200.0,
    }
    assert metrics == expected_metrics

    # Deleting a session keeps its tokens, messages and days in the report.
    before = get_report(agent.client, 30)
    assert agent.client.delete(f"/sessions/{a.id}").status_code == 204
    assert agent.client.get(f"/sessions/{a.id}/usage").status_code == 404
    after = get_report(agent.client, 30)
    assert after == before
    assert token_metrics(agent.client) == expected_metrics


# ------------------------------------------------------------------------ the report itself


def _day(offset: int, base: dt.date = dt.date(2025, 3, 31)) -> str:
    return (base - dt.timedelta(days=offset)).isoformat()


def _tokens(offset: int, model: str, total: int, requests: int = 1) -> dict[str, Any]:
    return {
        "day": _day(offset),
        "model": model,
        "input_tokens": total - 10,
        "output_tokens": 10,
        "total_tokens": total,
        "cached_tokens": 1,
        "request_count": requests,
    }


def test_report_over_several_days() -> None:
    base = dt.date(2025, 3, 31)
    tokens = [
        _tokens(0, "m1", 100),
        _tokens(1, "m2", 300, 3),
        _tokens(2, "m1", 50),
        _tokens(10, "m2", 1000),  # inside 30 days, outside 7
        _tokens(40, "m3", 5000),  # outside both ranges, still in the activity
    ]
    messages = {_day(0): 2, _day(1): 1, _day(2): 4, _day(10): 1, _day(40): 3}
    sessions = {_day(0): {"s1"}, _day(1): {"s1", "s2"}, _day(10): {"s3"}, _day(40): {"s4"}}

    week = report(7, base, tokens, messages, sessions)
    assert week["range_days"] == 7
    assert week["total_tokens"] == 450
    assert week["input_tokens"] == 420 and week["output_tokens"] == 30
    assert week["cached_tokens"] == 3
    assert week["session_count"] == 2  # s1, s2
    assert week["message_count"] == 7
    assert week["active_days"] == 3
    assert week["current_streak"] == 3
    assert week["most_used_model"] == "m2" and week["most_used_model_share"] == 0.6667
    assert week["model_usage"] == [
        {"model": "m2", "token_count": 300, "request_count": 3, "share": 0.6667},
        {"model": "m1", "token_count": 150, "request_count": 2, "share": 0.3333},
    ]

    month = report(30, base, tokens, messages, sessions)
    assert month["total_tokens"] == 1450
    assert month["session_count"] == 3
    assert month["message_count"] == 8
    assert month["active_days"] == 4
    assert month["current_streak"] == 3
    assert [m["model"] for m in month["model_usage"]] == ["m2", "m1"]
    assert sum(m["share"] for m in month["model_usage"]) == pytest.approx(1, abs=1e-3)

    activity = month["activity"]
    assert len(activity) == 365 and activity[-1]["date"] == base.isoformat()
    by_date = {a["date"]: a for a in activity}
    assert by_date[_day(40)] == {"date": _day(40), "message_count": 3, "token_count": 5000}
    assert by_date[_day(3)] == {"date": _day(3), "message_count": 0, "token_count": 0}


def test_the_streak_counts_from_yesterday_until_today_is_active() -> None:
    base = dt.date(2025, 3, 31)
    messages = {_day(1): 1, _day(2): 1, _day(4): 1}
    assert report(7, base, [], messages, {})["current_streak"] == 2
    assert report(7, base, [], {_day(0): 1, **messages}, {})["current_streak"] == 3
    assert report(7, base, [], {_day(2): 1}, {})["current_streak"] == 0
    # Tokens alone make a day active too.
    assert report(7, base, [_tokens(0, "m", 5)], {}, {})["current_streak"] == 1


def test_a_report_without_usage_has_no_most_used_model() -> None:
    body = report(30, dt.date(2025, 1, 1), [], {}, {})
    assert "most_used_model" not in body
    assert body["most_used_model_share"] == 0.0 and body["model_usage"] == []


@pytest.mark.parametrize("days", ["0", "1", "14", "31", "365", "-7", "7.0", " 7", "", "\u0667"])
def test_only_7_or_30_days_are_a_range(days: str) -> None:
    """The one check of `days` (the route and the report rely on it)."""
    with pytest.raises(InvalidRange) as raised:
        range_days(days)
    assert raised.value.code == "invalid_range"
    assert range_days("7") == 7 and range_days("30") == 30
