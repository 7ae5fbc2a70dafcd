"""Approvals in the three modes.

- `manual`: reads inside the workspace run; writes, deletes, commands and reads outside wait for
  `POST /sessions/{id}/approvals/{request_id}`.
- `auto`: the guardian (a non-streaming completion from the session's own connection — here the
  fake provider answering ALLOW or DENY) decides; it denies whenever it cannot answer.
- `full_access`: nothing asks.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_provider import (
    Agent,
    Events,
    Session,
    agent_kernel,
    answer,
    call,
    http_error,
    kinds,
    only,
    payloads,
    reply,
    tools,
)
from support.helpers import wait_until
from support.streams_helpers import assert_error, metric

IGNORED = "foya_approval_decisions_ignored_total"
REQUEST_KEYS = {"id", "session", "tool_name", "action", "detail", "scope"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("approvals")) as agent:
        yield agent


@pytest.fixture(scope="module")
def outside(agent: Agent) -> Path:
    """A file outside every workspace (next to them, in `<data-dir>/workspaces`)."""
    path = agent.data_dir / "workspaces" / "outside.txt"
    path.write_text("secret outside\n")
    return path


def decide(s: Session, request_id: str, decision: str) -> None:
    response = s.client.post(
        f"/sessions/{s.id}/approvals/{request_id}", json={"decision": decision}
    )
    assert response.status_code == 204, response.text


def ask_and_decide(s: Session, events: Events, decision: str) -> dict[str, Any]:
    """Wait for the next approval request, answer it, return it."""
    request = events.until_kind("approval_request")[-1].data["payload"]
    decide(s, request["id"], decision)
    return dict(request)


# -------------------------------------------------------------------------------------- manual


def test_manual_write_waits_for_approval_then_runs(agent: Agent) -> None:
    s = agent.session("manual")
    s.push(tools(call("w", "write", {"path": "out.txt", "content": "ok\n"})), answer("Written."))
    with s.events() as events:
        s.submit()
        before = events.until_kind("approval_request")
        request = before[-1].data["payload"]
        assert not (s.workspace / "out.txt").exists(), "nothing runs before the decision"
        assert "tool_end" not in kinds(before)
        decide(s, request["id"], "approved")
        after = events.until_kind("turn_complete")
    assert set(request) >= REQUEST_KEYS
    assert request["session"] == s.id and request["tool_name"] == "write"
    assert request["action"] == "write" and request["scope"] == "workspace"
    assert request["resource"] == str((s.workspace / "out.txt").resolve())
    assert "out.txt" in request["detail"]
    assert kinds(before)[-2:] == ["tool_update", "approval_request"]
    assert kinds(after)[:3] == ["approval_resolved", "tool_end", "message_end"]
    assert only(after, "approval_resolved") == {"id": request["id"], "decision": "approved"}
    assert not only(after, "tool_end").get("is_error")
    assert (s.workspace / "out.txt").read_text() == "ok\n"
    assert only(after, "turn_complete")["status"] == "completed"


def test_manual_denied_is_a_tool_error_and_the_turn_goes_on(agent: Agent) -> None:
    s = agent.session("manual")
    s.push(tools(call("d", "bash", {"command": "touch ran"})), answer("Understood."))
    with s.events() as events:
        s.submit()
        request = ask_and_decide(s, events, "denied")
        frames = events.until_kind("turn_complete")
    assert request["action"] == "execute" and request["tool_name"] == "bash"
    assert only(frames, "approval_resolved")["decision"] == "denied"
    end = only(frames, "tool_end")
    assert end["is_error"] is True and "denied" in end["output"]
    assert not (s.workspace / "ran").exists()
    assert only(frames, "turn_complete")["status"] == "completed"
    result = [m for m in s.chats()[1].messages if m["role"] == "tool"]
    assert result == [{"role": "tool", "tool_call_id": "d", "content": end["output"]}]


def test_approved_for_session_is_not_asked_again(agent: Agent) -> None:
    s = agent.session("manual")
    write = call("w1", "write", {"path": "same.txt", "content": "x"})
    s.push(tools(write), answer("Once."))
    with s.events() as events:
        s.submit()
        ask_and_decide(s, events, "approved_for_session")
        first = events.until_kind("turn_complete")
    assert only(first, "approval_resolved")["decision"] == "approved_for_session"

    again = s.turn(tools(call("w2", "write", {"path": "same.txt", "content": "y"})), answer("Ok."))
    assert "approval_request" not in kinds(again)
    assert not only(again, "tool_end").get("is_error")
    assert (s.workspace / "same.txt").read_text() == "y"

    # The grant is this tool and action only: a command still asks.
    s.push(tools(call("b", "bash", {"command": "true"})), answer("Asked."))
    with s.events() as events:
        s.submit()
        assert ask_and_decide(s, events, "approved")["tool_name"] == "bash"
        events.until_kind("turn_complete")

    # And this session only.
    other = agent.session("manual")
    other.push(tools(call("w3", "write", {"path": "same.txt", "content": "z"})), answer("."))
    with other.events() as events:
        other.submit()
        ask_and_decide(other, events, "denied")
        events.until_kind("turn_complete")


def test_an_invalid_decision_is_400_and_the_request_stays_pending(agent: Agent) -> None:
    s = agent.session("manual")
    s.push(tools(call("w", "write", {"path": "f.txt", "content": "x"})), answer("Fine."))
    with s.events() as events:
        s.submit()
        request = events.until_kind("approval_request")[-1].data["payload"]
        path = f"/sessions/{s.id}/approvals/{request['id']}"
        for body in ({"decision": "allow"}, {"decision": "ask"}, {"decision": ""}):
            assert_error(s.client.post(path, json=body), 400, "invalid_approval_decision")
        assert_error(s.client.post(path, json={"decision": 1}), 400, "bad_request")
        decide(s, request["id"], "approved")
        frames = events.until_kind("turn_complete")
    assert only(frames, "approval_resolved")["decision"] == "approved"
    assert (s.workspace / "f.txt").read_text() == "x"


def test_a_decision_for_an_unknown_request_is_a_no_op(agent: Agent) -> None:
    """Foya's 204, but the kernel says so: a warning naming the session and the request id,
    and `foya_approval_decisions_ignored_total` goes up."""
    s = agent.session("manual")
    request_id = f"unknown-{uuid.uuid4().hex}"
    before = metric(s.client, IGNORED)
    decide(s, request_id, "approved")
    assert metric(s.client, IGNORED) == before + 1

    def ignored() -> list[dict[str, Any]]:
        return [
            line
            for line in agent.served.kernel.logs()
            if line.get("logger") == "foya.approvals" and line.get("approval_id") == request_id
        ]

    wait_until(lambda: bool(ignored()), "the log line of the ignored decision")
    (line,) = ignored()
    assert line["level"] == "warning"
    assert line["session"] == s.id and line["decision"] == "approved"


def test_a_decision_through_another_session_is_refused_not_counted(agent: Agent) -> None:
    owner, other = agent.session("manual"), agent.session("manual")
    owner.push(tools(call("w", "write", {"path": "f.txt", "content": "x"})), answer("Fine."))
    with owner.events() as events:
        owner.submit()
        request = events.until_kind("approval_request")[-1].data["payload"]
        before = metric(owner.client, IGNORED)
        wrong = other.client.post(
            f"/sessions/{other.id}/approvals/{request['id']}", json={"decision": "approved"}
        )
        assert_error(wrong, 404, "approval_not_found")
        assert metric(owner.client, IGNORED) == before
        decide(owner, request["id"], "denied")
        frames = events.until_kind("turn_complete")
    assert only(frames, "approval_resolved")["decision"] == "denied"


def test_manual_reads_inside_the_workspace_run_without_asking(agent: Agent) -> None:
    s = agent.session("manual")
    (s.workspace / "in.txt").write_text("inside\n")
    frames = s.tool_turn(call("r", "read", {"path": "in.txt"}))
    assert "approval_request" not in kinds(frames)
    assert only(frames, "tool_end")["output"] == "inside\n"


@pytest.mark.parametrize("how", ["dotdot", "symlink"])
def test_manual_reads_outside_the_workspace_ask(agent: Agent, outside: Path, how: str) -> None:
    s = agent.session("manual")
    if how == "dotdot":
        path = "../outside.txt"
    else:
        os.symlink(outside, s.workspace / "link.txt")
        path = "link.txt"
    s.push(tools(call("r", "read", {"path": path})), answer("Read it."))
    with s.events() as events:
        s.submit()
        request = ask_and_decide(s, events, "approved")
        frames = events.until_kind("turn_complete")
    assert request["action"] == "read" and request["scope"] == "outside"
    assert request["resource"] == str(outside.resolve())
    assert only(frames, "tool_end")["output"] == "secret outside\n"


def test_manual_outside_read_denied_reveals_nothing(agent: Agent, outside: Path) -> None:
    s = agent.session("manual")
    s.push(tools(call("r", "read", {"path": str(outside)})), answer("No."))
    with s.events() as events:
        s.submit()
        ask_and_decide(s, events, "denied")
        frames = events.until_kind("turn_complete")
    end = only(frames, "tool_end")
    assert end["is_error"] is True and "secret" not in end["output"]


# ---------------------------------------------------------------------------------------- auto


def test_auto_guardian_allow_runs_the_call(agent: Agent) -> None:
    s = agent.session("auto")
    s.push_completion(reply("ALLOW"))
    frames = s.turn(tools(call("w", "write", {"path": "g.txt", "content": "guarded"})), answer("."))
    assert only(frames, "approval_resolved")["decision"] == "approved"
    assert not only(frames, "tool_end").get("is_error")
    assert (s.workspace / "g.txt").read_text() == "guarded"
    step, guardian, final = s.chats()
    assert step.streaming and final.streaming
    assert not guardian.streaming, "the guardian is a non-streaming completion"
    assert "tools" not in guardian.body
    prompt = "\n".join(str(m["content"]) for m in guardian.messages)
    assert "write" in prompt and "g.txt" in prompt


def test_auto_guardian_deny_denies_the_call(agent: Agent) -> None:
    s = agent.session("auto")
    s.push_completion(reply("DENY"))
    frames = s.turn(tools(call("x", "bash", {"command": "touch nope"})), answer("Ok."))
    assert only(frames, "approval_resolved")["decision"] == "denied"
    end = only(frames, "tool_end")
    assert end["is_error"] is True and "denied" in end["output"]
    assert not (s.workspace / "nope").exists()
    assert only(frames, "turn_complete")["status"] == "completed"


def test_auto_guardian_failure_denies(agent: Agent) -> None:
    s = agent.session("auto")
    s.push_completion(http_error(500, "guardian exploded"))
    (s.workspace / "keep.txt").write_text("keep")
    frames = s.turn(tools(call("x", "delete", {"path": "keep.txt"})), answer("Ok."))
    assert only(frames, "approval_resolved")["decision"] == "denied"
    assert only(frames, "tool_end")["is_error"] is True
    assert (s.workspace / "keep.txt").read_text() == "keep"
    assert len(s.chats(streaming=False)) == 1 and len(s.chats(streaming=True)) == 2


def test_auto_reads_inside_the_workspace_do_not_ask_the_guardian(agent: Agent) -> None:
    s = agent.session("auto")
    (s.workspace / "r.txt").write_text("r")
    s.push_completion(reply("DENY"))  # would deny, were it asked
    frames = s.tool_turn(call("r", "read", {"path": "r.txt"}))
    assert "approval_request" not in kinds(frames)
    assert only(frames, "tool_end")["output"] == "r"
    assert len(s.chats()) == 2 and all(c.streaming for c in s.chats())


# --------------------------------------------------------------------------------- full_access


def test_full_access_never_asks(agent: Agent, outside: Path) -> None:
    s = agent.session("full_access")
    (s.workspace / "old.txt").write_text("old")
    frames = s.tool_turn(
        call("a", "write", {"path": "new.txt", "content": "new"}),
        call("b", "edit", {"path": "new.txt", "old_string": "new", "new_string": "newer"}),
        call("c", "delete", {"path": "old.txt"}),
        call("d", "bash", {"command": "echo ran"}),
        call("e", "read", {"path": "../outside.txt"}),
    )
    assert "approval_request" not in kinds(frames)
    ends = payloads(frames, "tool_end")
    assert [e.get("is_error", False) for e in ends] == [False] * 5, ends
    assert ends[4]["output"] == outside.read_text()
    assert (s.workspace / "new.txt").read_text() == "newer"
    assert not (s.workspace / "old.txt").exists()


def test_switching_modes_applies_to_the_next_call(agent: Agent) -> None:
    s = agent.session("full_access")
    response = s.client.patch(f"/sessions/{s.id}", json={"approval_mode": "manual"})
    assert response.status_code == 200, response.text
    s.push(tools(call("w", "write", {"path": "m.txt", "content": "m"})), answer("."))
    with s.events() as events:
        s.submit()
        ask_and_decide(s, events, "approved")
        events.until_kind("turn_complete")
    assert (s.workspace / "m.txt").read_text() == "m"


def test_cancel_while_waiting_for_approval_cancels_the_turn(agent: Agent) -> None:
    s = agent.session("manual")
    s.push(tools(call("w", "write", {"path": "late.txt", "content": "x"})))
    with s.events() as events:
        s.submit()
        request = events.until_kind("approval_request")[-1].data["payload"]
        assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204
        frames = events.until_kind("turn_complete")
    complete = only(frames, "turn_complete")
    assert complete["status"] == "cancelled" and complete["reason"] == "user_stop"
    assert "tool_end" not in kinds(frames)
    # The pending request is closed for every client that shows it.
    assert only(frames, "approval_resolved") == {"id": request["id"], "decision": "denied"}
    order = kinds(frames)
    assert order.index("approval_resolved") < order.index("turn_complete")
    decide(s, request["id"], "approved")  # too late: a no-op
    s.wait_idle()
    assert not (s.workspace / "late.txt").exists()
    assert len(s.chats()) == 1
