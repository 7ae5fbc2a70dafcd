"""The session's task list (Foya's `update_tasks` and `read_tasks`) against a real `foya serve`
and the fake provider: the model replaces the list, the session carries it (`session_updated`,
`GET /sessions`), a list that breaks a rule is refused and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import Agent, Session, agent_kernel, call, payloads
from support.streams_helpers import Frame


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("tasks")) as running:
        yield running


def result(frames: list[Frame], call_id: str) -> dict[str, Any]:
    return dict(next(p for p in payloads(frames, "tool_end") if p["id"] == call_id))


def output(frames: list[Frame], call_id: str) -> Any:
    end = result(frames, call_id)
    assert not end.get("is_error"), end
    return json.loads(end["output"])


def update(s: Session, call_id: str, tasks: Any) -> list[Frame]:
    return s.tool_turn(call(call_id, "update_tasks", {"tasks": tasks}))


def test_update_tasks_replaces_the_session_tasks(agent: Agent) -> None:
    s = agent.session(approval_mode="manual")  # the task tools never ask
    frames = update(
        s,
        "t1",
        [
            {"content": "  Read   code ", "status": "completed"},
            {"content": "Write tests", "status": "in_progress"},
        ],
    )
    first = [
        {"content": "Read code", "status": "completed"},
        {"content": "Write tests", "status": "in_progress"},
    ]
    assert output(frames, "t1") == {"total": 2, "completed": 1, "in_progress": "Write tests"}
    assert not payloads(frames, "approval_request")
    # The tool's own session_updated carries the list, before the tool's result.
    order = [
        f.event
        for f in frames
        if f.event == "tool_end"
        or (f.event == "session_updated" and f.data["payload"].get("tasks") == first)
    ]
    assert order.index("session_updated") < order.index("tool_end")
    assert s.get()["tasks"] == first

    second = [
        {"content": "Read code", "status": "completed"},
        {"content": "Write tests", "status": "completed"},
        {"content": "Ship", "status": "pending"},
    ]
    frames = s.tool_turn(
        call("t2", "update_tasks", {"tasks": second}), call("t3", "read_tasks", {})
    )
    assert output(frames, "t2") == {"total": 3, "completed": 2, "just_completed": ["Write tests"]}
    assert output(frames, "t3") == {"tasks": second, "total": 3, "completed": 2}
    assert s.get()["tasks"] == second

    frames = update(s, "t4", [])
    assert output(frames, "t4") == {"total": 0, "completed": 0}
    assert "tasks" not in s.get()


def test_read_tasks_of_a_new_session(agent: Agent) -> None:
    s = agent.session()
    frames = s.tool_turn(call("r1", "read_tasks", {}))
    assert output(frames, "r1") == {"tasks": [], "total": 0, "completed": 0}


BAD = {
    "b1": (
        [{"content": "One", "status": "in_progress"}, {"content": "Two", "status": "in_progress"}],
        "at most one task may be in_progress",
    ),
    "b2": ([{"content": "One", "status": "blocked"}], 'task 1 has invalid status "blocked"'),
    "b3": ([{"content": "   ", "status": "pending"}], "task 1 content is required"),
    "b4": ([{"content": "x" * 201, "status": "pending"}], "200 characters or fewer"),
    "b5": ([{"content": f"t{i}", "status": "pending"} for i in range(101)], "at most 100"),
    "b6": ("not a list", "tasks must be an array"),
    "b7": (["nope"], "task 1 content is required"),
    "b8": ([{"content": "One"}], "task 1 has invalid status null"),
}


def test_a_list_that_breaks_a_rule_is_refused_and_changes_nothing(agent: Agent) -> None:
    s = agent.session()
    kept = [{"content": "Keep me", "status": "in_progress"}]
    update(s, "k1", kept)
    calls = [call(i, "update_tasks", {"tasks": tasks}) for i, (tasks, _) in BAD.items()]
    frames = s.tool_turn(*calls, call("b9", "update_tasks", {}))
    for call_id, (_, says) in BAD.items():
        end = result(frames, call_id)
        assert end.get("is_error") and says in end["output"], (call_id, end)
    assert "tasks must be an array" in result(frames, "b9")["output"]
    assert all(p.get("tasks") == kept for p in payloads(frames, "session_updated"))
    assert s.get()["tasks"] == kept
