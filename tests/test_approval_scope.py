"""An approval is decided only through its own session's URL.

`POST /sessions/{A}/approvals/{id}` for a request pending in session B answers 404
`approval_not_found` and changes nothing: B's request stays pending and B's own URL still decides
it. A decision for a request pending nowhere (already decided) stays Foya's no-op 204 (why:
app.kernel.approvals). Through a real kernel and the fake provider, in manual mode.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.fake_provider import Agent, agent_kernel, answer, call, kinds, only, tools
from support.streams_helpers import assert_error, metric

IGNORED = "foya_approval_decisions_ignored_total"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("approval-scope")) as agent:
        yield agent


def test_another_sessions_url_is_404_and_changes_nothing(agent: Agent) -> None:
    a, b = agent.session("manual"), agent.session("manual")
    b.push(tools(call("w", "write", {"path": "f.txt", "content": "b\n"})), answer("Written."))
    with b.events() as events:
        b.submit("write it")
        request = events.until_kind("approval_request")[-1].data["payload"]
        assert request["session"] == b.id
        ignored = metric(a.client, IGNORED)
        for decision in ("denied", "approved", "approved_for_session"):
            refused = a.client.post(
                f"/sessions/{a.id}/approvals/{request['id']}", json={"decision": decision}
            )
            body = assert_error(refused, 404, "approval_not_found")
            assert request["id"] not in body["message"]  # the id is not echoed back
        assert metric(a.client, IGNORED) == ignored  # refused, not silently ignored
        assert not (b.workspace / "f.txt").exists(), "B's write still waits for B's decision"
        assert b.get()["phase"] == "turn"
        # B's own URL decides it: approved, although A's URL had said "denied" first.
        right = b.client.post(
            f"/sessions/{b.id}/approvals/{request['id']}", json={"decision": "approved"}
        )
        assert right.status_code == 204, right.text
        frames = events.until_kind("turn_complete")
    assert only(frames, "approval_resolved") == {"id": request["id"], "decision": "approved"}
    assert kinds(frames).count("approval_resolved") == 1
    assert (b.workspace / "f.txt").read_text() == "b\n"
    assert not (a.workspace / "f.txt").exists()
    assert a.history() == []  # A saw no turn, no event of B's


def test_a_decided_request_is_a_no_op_through_any_session(agent: Agent) -> None:
    """Once decided, the request is pending nowhere: Foya's 204 from either URL, counted."""
    a, b = agent.session("manual"), agent.session("manual")
    b.push(tools(call("w", "write", {"path": "g.txt", "content": "g\n"})), answer("Written."))
    with b.events() as events:
        b.submit("write it")
        request = events.until_kind("approval_request")[-1].data["payload"]
        path = f"/approvals/{request['id']}"
        assert (
            b.client.post(f"/sessions/{b.id}{path}", json={"decision": "denied"}).status_code == 204
        )
        frames = events.until_kind("turn_complete")
    assert only(frames, "approval_resolved")["decision"] == "denied"
    ignored = metric(a.client, IGNORED)
    for session in (a, b):
        late = session.client.post(f"/sessions/{session.id}{path}", json={"decision": "approved"})
        assert late.status_code == 204, late.text
    assert metric(a.client, IGNORED) == ignored + 2
    assert not (b.workspace / "g.txt").exists()  # the first decision stands
