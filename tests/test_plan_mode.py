"""Plan mode (Foya's plan workflow) against a real `foya serve` and the fake provider: the
builtin `plan` command puts a session in plan mode (read-only tools, the plan-mode instructions
in its system prompt), the model's final answer becomes the workflow's plan (`ready`,
`plan_ready`), approving it executes it with every tool again; closing it stops the turn; the
workflow survives a restart; bad requests are refused and change nothing.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    TERMINAL,
    Agent,
    Events,
    FakeProvider,
    Session,
    agent_kernel,
    answer,
    call,
    connect,
    http_error,
    payloads,
    tools,
    wait,
)
from support.helpers import Launcher, short_tmpdir
from support.streams_helpers import Frame, assert_error, unix_kernel

from app.kernel.workflows import records

PLAN_TEXT = "## Plan\n1. Create notes.txt\n2. Say done"
READ_ONLY = {"read", "rule_load", "skill_load", "skill_search", "skill_read_resource"}
CHANGERS = {"write", "edit", "delete", "bash", "update_tasks", "memory_remember"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("plan")) as running:
        yield running


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def plan(s: Session, goal: str) -> dict[str, Any]:
    return dict(ok(s.client.post(f"/sessions/{s.id}/commands/plan", json={"args": goal})))


def workflow_url(s: Session, workflow_id: str = "") -> str:
    return f"/sessions/{s.id}/workflow" + (f"/{workflow_id}" if workflow_id else "")


def current(s: Session) -> Any:
    return ok(s.client.get(workflow_url(s)))


def until_all(events: Events, *wanted: Callable[[Frame], bool]) -> list[Frame]:
    """Frames until each of `wanted` has matched one (in any order)."""
    pending = list(wanted)

    def stop(frame: Frame) -> bool:
        pending[:] = [w for w in pending if not w(frame)]
        return not pending

    return events.until(stop)


def kind(name: str, **payload: Any) -> Callable[[Frame], bool]:
    def match(frame: Frame) -> bool:
        body = frame.data.get("payload")
        return frame.event == name and all(
            isinstance(body, dict) and body.get(k) == v for k, v in payload.items()
        )

    return match


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools") or []}


def system_prompt(request: Any) -> str:
    return str(request.messages[0]["content"])


def start_ready_plan(s: Session, goal: str = "add a notes file") -> dict[str, Any]:
    """A plan workflow that reached `ready` (the model answered PLAN_TEXT at once)."""
    s.push(answer(PLAN_TEXT))
    with s.events() as events:
        plan(s, goal)
        frames = events.until_kind("workflow_updated", status="ready")
        events.until_kind(TERMINAL)
    return dict(payloads(frames, "workflow_updated")[-1])


def test_plan_then_approve_then_execute(agent: Agent) -> None:
    s = agent.session()
    s.push(tools(call("c1", "write", {"path": "notes.txt", "content": "early"})), answer(PLAN_TEXT))
    with s.events() as events:
        started = plan(s, "  add a notes file ")
        planned = events.until_kind("workflow_updated", status="ready")
        closing = events.until_kind(TERMINAL)
    workflow = started["workflow"]
    assert started["command"] == {
        "ref": "builtin:plan",
        "name": "plan",
        "description": "Start a Plan workflow",
        "scope": "builtin",
        "kind": "workflow",
        "builtin": True,
    }
    assert started["status"] == "submitted" and started["submission"]["status"] == "started"
    assert workflow["kind"] == "plan" and workflow["status"] == "active"
    assert workflow["goal"] == "add a notes file" and workflow["session_id"] == s.id
    assert workflow["revision"] == 1 and "content" not in workflow
    assert workflow["path"] == str(s.workspace / ".foya" / "plans" / f"{workflow['id']}.md")

    # Plan mode, then the goal as the turn's message (command `plan`).
    modes = [p.get("agent_mode") for p in payloads(planned, "session_updated")]
    assert "plan" in modes and modes[-1] == "plan_ready"
    first = payloads(planned, "workflow_updated")[0]
    assert first == workflow
    user = next(p for p in payloads(planned, "message_end") if p["role"] == "user")
    assert user["content"] == "add a notes file" and user["command"] == "plan"
    # The write was refused without asking anyone, and nothing was written.
    refused = next(p for p in payloads(planned, "tool_end") if p["id"] == "c1")
    assert refused["is_error"] and "not allowed" in refused["output"]
    assert not payloads(planned, "approval_request")
    assert not (s.workspace / "notes.txt").exists()
    # The model saw only read-only tools and the plan-mode instructions, with the goal.
    for request in s.chats():
        assert offered(request) >= READ_ONLY and not offered(request) & CHANGERS
        assert "plan mode" in system_prompt(request)
        assert "Goal: add a notes file" in system_prompt(request)

    # The final answer is the plan: ready (before turn_complete), the session plan_ready.
    ready = payloads(planned, "workflow_updated")[-1]
    assert ready == {
        **workflow,
        "status": "ready",
        "content": PLAN_TEXT,
        "revision": 2,
        "updated_at": ready["updated_at"],
    }
    assert payloads(closing, TERMINAL)[0]["status"] == "completed"
    assert current(s) == ready
    row = s.get()
    assert row["agent_mode"] == "plan_ready" and row["pre_plan_mode"] == "execute"
    assert "status: ready" in Path(ready["path"]).read_text()

    s.push(tools(call("c2", "write", {"path": "notes.txt", "content": "done"})), answer("Done."))
    asked = len(s.chats())
    with s.events() as events:
        approval = ok(s.client.post(workflow_url(s, ready["id"]) + "/approve"))
        executed = events.until_kind(TERMINAL)
    approved = approval["workflow"]
    assert approved["status"] == "approved" and approved["revision"] == 3
    assert approval["submission"]["status"] == "started"
    changed = payloads(executed, "session_updated")[0]
    assert changed["agent_mode"] == "execute" and "pre_plan_mode" not in changed
    assert payloads(executed, "workflow_updated") == [approved]
    user = next(p for p in payloads(executed, "message_end") if p["role"] == "user")
    assert user["command"] == "plan" and ready["path"] in user["content"]
    done = next(p for p in payloads(executed, "tool_end") if p["id"] == "c2")
    assert not done.get("is_error")
    assert (s.workspace / "notes.txt").read_text() == "done"
    assert payloads(executed, TERMINAL)[-1]["status"] == "completed"
    # Executing, the model has every tool again and no plan-mode note.
    for request in s.chats()[asked:]:
        assert {"write", "bash", "update_tasks"} <= offered(request)
        assert "plan mode" not in system_prompt(request)
    assert current(s) is None
    assert s.get()["agent_mode"] == "execute"
    assert "status: approved" in Path(ready["path"]).read_text()


def test_closing_a_workflow_stops_its_turn_and_leaves_plan_mode(agent: Agent) -> None:
    s = agent.session()
    gate = agent.fake.gate()
    s.push([wait(gate), *answer("never seen")])
    with s.events() as events:
        workflow = plan(s, "tidy up")["workflow"]
        events.until_kind("turn_started")
        closed = ok(s.client.delete(workflow_url(s, workflow["id"])))
        frames = until_all(events, kind(TERMINAL), kind("workflow_updated", status="closed"))
    gate.set()
    assert closed["status"] == "closed" and closed["revision"] == 2
    assert payloads(frames, "workflow_updated")[-1] == closed
    assert payloads(frames, TERMINAL)[0]["status"] == "cancelled"
    assert payloads(frames, "session_updated")[-1]["agent_mode"] == "execute"
    row = s.get()
    assert row["agent_mode"] == "execute" and "pre_plan_mode" not in row
    assert current(s) is None
    assert "status: closed" in Path(closed["path"]).read_text()
    # A closed workflow can be neither closed nor approved again.
    assert_error(s.client.delete(workflow_url(s, workflow["id"])), 400, "bad_request")
    assert_error(s.client.post(workflow_url(s, workflow["id"]) + "/approve"), 400, "bad_request")


def test_a_new_plan_closes_the_previous_one(agent: Agent) -> None:
    s = agent.session()
    first = start_ready_plan(s, "first goal")
    second = start_ready_plan(s, "second goal")
    assert current(s) == second
    assert_error(s.client.post(workflow_url(s, first["id"]) + "/approve"), 400, "bad_request")


def test_bad_requests_are_refused_and_change_nothing(agent: Agent) -> None:
    s = agent.session()
    for body in ({"args": "   "}, {}):
        response = s.client.post(f"/sessions/{s.id}/commands/plan", json=body)
        assert_error(response, 400, "bad_request")
    # As in Foya, a client cannot set the mode: plan mode starts with the `plan` command.
    patched = s.client.patch(f"/sessions/{s.id}", json={"agent_mode": "plan"})
    assert_error(patched, 400, "bad_request")
    assert current(s) is None
    assert "agent_mode" not in s.get() and s.history() == []

    # A plan turn that failed leaves the workflow active: it cannot be approved yet.
    s.push(http_error(400, "the model refused"))
    with s.events() as events:
        workflow = plan(s, "something")["workflow"]
        events.until_kind(TERMINAL)
    before = s.get()
    assert_error(s.client.post(workflow_url(s, workflow["id"]) + "/approve"), 400, "bad_request")
    assert current(s) == workflow and s.get() == before

    other = agent.session()
    for url in (workflow_url(other, workflow["id"]), workflow_url(s, "wf-nope")):
        assert_error(other.client.post(url + "/approve"), 404, "not_found")
        assert_error(other.client.delete(url), 404, "not_found")
    assert_error(s.client.get("/sessions/nope/workflow"), 404, "not_found")
    assert current(s) == workflow and s.get() == before


def test_a_plan_file_is_never_written_through_a_link(agent: Agent, tmp_path: Path) -> None:
    s = agent.session()
    (s.workspace / ".foya").symlink_to(tmp_path)
    response = s.client.post(f"/sessions/{s.id}/commands/plan", json={"args": "a goal"})
    assert "is a link" in assert_error(response, 500, "internal_error")["message"]
    assert list(tmp_path.iterdir()) == []
    assert current(s) is None
    assert "agent_mode" not in s.get() and s.history() == []


def test_a_restart_keeps_the_workflow(
    tmp_path_factory: pytest.TempPathFactory, agent: Agent
) -> None:
    fake: FakeProvider = agent.fake
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    try:
        with short_tmpdir() as root:
            served = unix_kernel(launcher, root, "r")
            with served.client() as client:
                s = Agent(served, fake, client, connect(client, fake)["id"]).session()
                ready = start_ready_plan(s)
            served.kernel.stop()
            stored = served.data_dir / "workflows.json"
            assert stat.S_IMODE(stored.stat().st_mode) == 0o600
            assert [r["id"] for r in json.loads(stored.read_text())] == [ready["id"]]

            again = unix_kernel(launcher, root, "r")
            with again.client() as client:
                s = Session(Agent(again, fake, client, ""), s.row)
                assert current(s) == ready
                assert s.get()["agent_mode"] == "plan_ready"
                # Still read-only after the restart; then approved, it executes.
                asked = len(s.chats())
                s.turn(answer("Anything else?"), message="one more thing")
                assert not offered(s.chats()[asked]) & CHANGERS
                s.push(answer("Done."))
                with s.events() as events:
                    approval = ok(client.post(workflow_url(s, ready["id"]) + "/approve"))
                    events.until_kind(TERMINAL)
                assert approval["workflow"]["status"] == "approved"
                assert "write" in offered(s.chats()[-1])
                assert current(s) is None
    finally:
        launcher.close()


def test_an_unreadable_workflows_file_is_kept_aside(tmp_path: Path) -> None:
    path = tmp_path / records.FILE
    path.write_text("[not json")
    assert records.load(path) == {}
    assert not path.exists()
    (aside,) = tmp_path.glob(f"{records.FILE}.unreadable-*")
    assert aside.read_text() == "[not json"

    good = {
        "id": "wf-1",
        "session_id": "s1",
        "kind": "plan",
        "status": "ready",
        "goal": "g",
        "content": "c",
        "path": str(tmp_path / "p.md"),
        "revision": 2,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:01Z",
    }
    path.write_text(json.dumps([good, {**good, "id": "wf-2", "kind": "spec"}, "junk"]))
    loaded = records.load(path)
    assert list(loaded) == ["wf-1"] and loaded["wf-1"].payload() == good
