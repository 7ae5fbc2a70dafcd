"""The input queue and cancel.

One real kernel and one fake provider for the module; every test has its own session. Turns
that must stay busy stream from the fake behind a gate the test opens (or never opens: a cancel
closes the provider stream).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import (
    BOUND,
    Agent,
    Script,
    Session,
    agent_kernel,
    answer,
    finish,
    kinds,
    only,
    payloads,
    text,
    usage,
    wait,
)
from support.helpers import wait_until
from support.streams_helpers import assert_error

ITEM_KEYS = {"id", "session_id", "text", "position", "created_at", "updated_at"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("queue")) as agent:
        yield agent


def held(agent: Agent, before: str = "working ", after: str = "and done.") -> tuple[Any, Script]:
    """A script that streams `before`, then waits for its gate, then finishes with `after`."""
    gate = agent.fake.gate()
    return gate, [text(before), wait(gate), text(after), usage(), finish()]


def enqueue(s: Session, message: str, **extra: Any) -> dict[str, Any]:
    response = s.client.post(f"/sessions/{s.id}/queue", json={"message": message, **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())


def queue_texts(s: Session) -> list[str]:
    return [i["text"] for i in s.queue()]


def user_messages(s: Session) -> list[str]:
    return [m["content"] for m in s.history() if m["role"] == "user"]


# ------------------------------------------------------------------------------------- submit


def test_submit_while_busy_is_queued_and_runs_after_the_turn(
    agent: Agent, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A project with a skill of its own: the queued input names it.
    project = tmp_path_factory.mktemp("project")
    (project / ".foya" / "skills" / "review").mkdir(parents=True)
    (project / ".foya" / "skills" / "review" / "SKILL.md").write_text(
        "---\nname: review\ndescription: Review a change.\n---\nRead the diff.\n"
    )
    made = agent.client.post("/projects", json={"path": str(project)})
    assert made.status_code == 201, made.text
    ref = f"project:{made.json()['id']}:review"
    s = agent.session(project_id=made.json()["id"])
    gate, script = held(agent)
    s.push(script, answer("Second answer."))
    with s.events() as events:
        assert s.submit("first") == {"run_id": s.id, "status": "started"}
        events.until_kind("message_delta")
        queued = s.submit("second", skill_ref=ref)
        assert queued["status"] == "queued" and queued["run_id"] == s.id
        item = queued["queued"]
        assert set(item) >= ITEM_KEYS
        assert item["text"] == "second" and item["session_id"] == s.id
        assert item["position"] == 0 and item["skill_ref"] == ref
        update = events.until_kind("queue_updated")[-1].data["payload"]
        assert update == {"items": [item]}
        assert s.queue() == [item]
        gate.set()
        first_done = events.until_kind("turn_complete")[-1].data["payload"]
        assert first_done["status"] == "completed"
        second = events.until_kind("turn_complete")
    assert payloads(second, "queue_updated") == [{"items": []}]
    user = payloads(second, "message_end")[0]
    assert user["role"] == "user" and user["content"] == "second"
    assert user["skill_ref"] == ref
    assert only(second, "turn_complete")["status"] == "completed"
    assert only(second, "turn_started")["run_id"] != first_done["run_id"]
    assert s.queue() == []
    assert user_messages(s) == ["first", "second"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"message": ""}, id="empty"),
        pytest.param({"message": " \n\t "}, id="blank"),
        pytest.param(
            {"message": "x", "browser_elements": [{"tag": "a", "selector": "#a"}] * 9},
            id="nine-elements",
        ),
        pytest.param(
            {"message": "x", "browser_elements": [{"tag": "a", "selector": "a" * 41 * 1024}]},
            id="element-over-40KiB",
        ),
        pytest.param(
            {"message": "x", "browser_elements": [{"tag": "a", "html": "h" * 30 * 1024}] * 4},
            id="elements-over-96KiB",
        ),
        pytest.param({"message": "x", "attachments": [{"id": "a"}] * 17}, id="17-files"),
    ],
)
def test_invalid_turn_bodies_are_rejected(agent: Agent, body: dict[str, Any]) -> None:
    s = agent.session()
    for path in (f"/sessions/{s.id}/turns", f"/sessions/{s.id}/queue"):
        assert_error(agent.client.post(path, json=body), 400, "invalid_queue_message")
    assert s.queue() == [] and s.history() == [] and s.chats() == []


def test_eight_browser_elements_are_accepted(agent: Agent) -> None:
    s = agent.session()
    elements = [{"page_url": "https://x.test/", "tag": "a", "selector": f"#a{i}"} for i in range(8)]
    item = enqueue(s, "look at these", browser_elements=elements)
    assert item["browser_elements"] == elements


def test_unknown_session_is_404(agent: Agent) -> None:
    body = {"message": "hi"}
    client = agent.client
    assert_error(client.post("/sessions/nope/turns", json=body), 404, "not_found")
    assert_error(client.post("/sessions/nope/queue", json=body), 404, "not_found")
    assert_error(client.get("/sessions/nope/queue"), 404, "not_found")
    assert_error(client.patch("/sessions/nope/queue/x", json={"position": 0}), 404, "not_found")
    assert_error(client.delete("/sessions/nope/queue/x"), 404, "not_found")
    assert_error(client.post("/sessions/nope/queue/x/dispatch"), 404, "not_found")


# -------------------------------------------------------------------------------- queue CRUD


def test_queue_post_never_starts_patch_reorders_and_edits_delete_removes(agent: Agent) -> None:
    s = agent.session()
    with s.events() as events:
        a = enqueue(s, "A")
        b = enqueue(s, "B")
        c = enqueue(s, "C")
        assert [a["position"], b["position"], c["position"]] == [0, 1, 2]
        assert queue_texts(s) == ["A", "B", "C"]

        moved = s.client.patch(f"/sessions/{s.id}/queue/{c['id']}", json={"position": 0})
        assert moved.status_code == 200, moved.text
        assert moved.json()["position"] == 0
        assert queue_texts(s) == ["C", "A", "B"]
        assert [i["position"] for i in s.queue()] == [0, 1, 2]

        edited = s.client.patch(f"/sessions/{s.id}/queue/{a['id']}", json={"message": "A2"})
        assert edited.status_code == 200, edited.text
        assert edited.json()["text"] == "A2" and edited.json()["position"] == 1
        assert queue_texts(s) == ["C", "A2", "B"]

        gone = s.client.delete(f"/sessions/{s.id}/queue/{b['id']}")
        assert gone.status_code == 204 and gone.content == b""
        assert queue_texts(s) == ["C", "A2"]

        updates = events.until_count("queue_updated", 6)
    texts = [[i["text"] for i in p["items"]] for p in payloads(updates, "queue_updated")]
    assert texts == [
        ["A"],
        ["A", "B"],
        ["A", "B", "C"],
        ["C", "A", "B"],
        ["C", "A2", "B"],
        ["C", "A2"],
    ]
    assert s.get()["phase"] == "idle"
    assert s.chats() == [] and s.history() == [], "the queue POST never starts a turn"


def test_queue_item_errors(agent: Agent) -> None:
    s = agent.session()
    item = enqueue(s, "A")
    path = f"/sessions/{s.id}/queue"
    assert_error(s.client.patch(f"{path}/nope", json={"position": 0}), 404, "not_found")
    assert_error(s.client.delete(f"{path}/nope"), 404, "not_found")
    assert_error(s.client.post(f"{path}/nope/dispatch"), 404, "not_found")
    assert_error(
        s.client.patch(f"{path}/{item['id']}", json={"message": "  "}), 400, "invalid_queue_message"
    )
    assert_error(s.client.patch(f"{path}/{item['id']}", json={"position": "x"}), 400, "bad_request")
    assert queue_texts(s) == ["A"]


# -------------------------------------------------------------------------------- dispatch


def test_dispatch_while_idle_starts_it_first_then_drains_the_rest(agent: Agent) -> None:
    s = agent.session()
    a = enqueue(s, "A")
    b = enqueue(s, "B")
    s.push(answer("Answer to B."), answer("Answer to A."))
    with s.events() as events:
        response = s.client.post(f"/sessions/{s.id}/queue/{b['id']}/dispatch")
        assert response.status_code == 200, response.text
        # Foya answers the dispatched queue item itself.
        dispatched = response.json()
        assert set(dispatched) >= ITEM_KEYS
        assert dispatched["id"] == b["id"] and dispatched["text"] == "B"
        assert dispatched["position"] == 0
        first = events.until_kind("turn_complete")
        second = events.until_kind("turn_complete")
    assert payloads(first, "message_end")[0]["content"] == "B"
    assert payloads(second, "message_end")[0]["content"] == "A"
    assert only(second, "turn_complete")["status"] == "completed"
    assert user_messages(s) == ["B", "A"]
    assert s.queue() == []
    assert a["id"] != b["id"]


def test_dispatch_while_running_cancels_the_turn_and_runs_the_item(agent: Agent) -> None:
    s = agent.session()
    _, script = held(agent, before="long answer ")
    s.push(script, answer("Dispatched answer."))
    with s.events() as events:
        s.submit("first")
        events.until_kind("message_delta")
        item = enqueue(s, "urgent")
        response = s.client.post(f"/sessions/{s.id}/queue/{item['id']}/dispatch")
        assert response.status_code == 200, response.text
        assert response.json()["id"] == item["id"] and response.json()["position"] == 0
        cancelled = events.until_kind("turn_complete")
        dispatched = events.until_kind("turn_complete")
    # Foya ends a dispatched-over turn without a turn_cancel_requested fact.
    assert "turn_cancel_requested" not in [f.event for f in cancelled]
    done = only(cancelled, "turn_complete")
    assert done["status"] == "cancelled" and done["reason"] == "queue_dispatch"
    partial = payloads(cancelled, "message_end")[-1]
    assert partial["content"] == "long answer " and partial["turn_status"] == "cancelled"
    assert payloads(dispatched, "message_end")[0]["content"] == "urgent"
    assert only(dispatched, "turn_complete")["status"] == "completed"
    assert user_messages(s) == ["first", "urgent"]


def test_dispatch_moves_the_item_to_the_head_while_running(agent: Agent) -> None:
    s = agent.session()
    _, script = held(agent)
    s.push(script, answer("Z first."), answer("Y next."))
    with s.events() as events:
        s.submit("first")
        events.until_kind("message_delta")
        enqueue(s, "Y")
        z = enqueue(s, "Z")
        assert s.client.post(f"/sessions/{s.id}/queue/{z['id']}/dispatch").status_code == 200
        events.until(
            lambda f: (
                f.event == "queue_updated"
                and [i["text"] for i in f.data["payload"]["items"]] == ["Z", "Y"]
            )
        )
        for _ in range(3):
            events.until_kind("turn_complete")
    assert user_messages(s) == ["first", "Z", "Y"]


# ----------------------------------------------------------------------------------- cancel


def test_cancel_mid_stream_saves_the_partial_reply_and_pauses_the_queue(agent: Agent) -> None:
    s = agent.session()
    _, script = held(agent, before="half an ")
    s.push(script)
    with s.events() as events:
        s.submit("tell me")
        events.until_kind("message_delta")
        kept = s.submit("later")["queued"]
        events.until_kind("queue_updated")
        response = s.client.post(f"/sessions/{s.id}/cancel")
        assert response.status_code == 204 and response.content == b""
        frames = events.until_kind("turn_complete")
    s.wait_idle()
    assert kinds(frames) == ["turn_cancel_requested", "message_end", "turn_complete"]
    cancel = only(frames, "turn_cancel_requested")
    assert set(cancel) == {"run_id", "reason", "requested_at"}
    assert cancel["reason"] == "user_stop"
    done = only(frames, "turn_complete")
    assert done["status"] == "cancelled" and done["reason"] == "user_stop"
    partial = only(frames, "message_end")
    assert partial["role"] == "assistant" and partial["content"] == "half an "
    assert partial["turn_status"] == "cancelled" and partial["turn_reason"] == "user_stop"
    assert partial["turn_completed_at"] >= partial["turn_started_at"]

    assert s.queue() == [kept], "the queue is kept"
    assert s.get()["phase"] == "idle", "and paused: nothing starts"
    assert len(s.chats()) == 1
    history = s.history()
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == "half an "
    wait_until(lambda: s.chats()[0].disconnected, "the provider stream to be closed", BOUND)

    # Dispatch resumes the paused queue.
    s.push(answer("Later then."))
    with s.events() as events:
        assert s.client.post(f"/sessions/{s.id}/queue/{kept['id']}/dispatch").status_code == 200
        frames = events.until_kind("turn_complete")
    assert only(frames, "turn_complete")["status"] == "completed"
    assert user_messages(s) == ["tell me", "later"]


def test_a_submit_to_a_paused_queue_appends_and_starts_the_oldest(agent: Agent) -> None:
    s = agent.session()
    _, script = held(agent)
    s.push(script, answer("Old first."), answer("New second."))
    with s.events() as events:
        s.submit("running")
        events.until_kind("message_delta")
        s.submit("old")
        assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204
        events.until_kind("turn_complete")
        s.wait_idle()
        response = s.submit("new")
        assert response["status"] == "queued"
        events.until_kind("turn_complete")
        events.until_kind("turn_complete")
    assert user_messages(s) == ["running", "old", "new"]


def test_cancel_when_idle_is_204(agent: Agent) -> None:
    s = agent.session()
    response = s.client.post(f"/sessions/{s.id}/cancel")
    assert response.status_code == 204 and response.content == b""
    assert s.get()["phase"] == "idle" and s.history() == []


def test_after_a_stop_new_input_drains_the_queue_again(agent: Agent) -> None:
    """A stop pauses the queue; a new turn must resume draining (the runner
    drains the queue unless stopped), so input queued during that turn runs after it."""
    s = agent.session()
    assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204  # a stop while idle
    gate, script = held(agent)
    s.push(script, answer("Queued one ran."))
    with s.events() as events:
        assert s.submit("first")["status"] == "started"
        events.until_kind("message_delta")
        assert s.submit("second")["status"] == "queued"
        gate.set()
        events.until_kind("turn_complete")
        wait_until(lambda: s.queue() == [], "the queued input to start", 3)
        second = events.until_kind("turn_complete")
    assert payloads(second, "message_end")[0]["content"] == "second"
    assert only(second, "turn_complete")["status"] == "completed"
    assert user_messages(s) == ["first", "second"]


def test_dispatch_while_running_after_an_earlier_stop_still_runs_the_item(agent: Agent) -> None:
    s = agent.session()
    assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204  # a stop while idle
    _, script = held(agent)
    s.push(script, answer("Dispatched."))
    with s.events() as events:
        assert s.submit("first")["status"] == "started"
        events.until_kind("message_delta")
        item = enqueue(s, "now")
        assert s.client.post(f"/sessions/{s.id}/queue/{item['id']}/dispatch").status_code == 200
        assert only(events.until_kind("turn_complete"), "turn_complete")["status"] == "cancelled"
        wait_until(lambda: s.queue() == [], "the dispatched input to start", 3)
        second = events.until_kind("turn_complete")
    assert payloads(second, "message_end")[0]["content"] == "now"
    assert user_messages(s) == ["first", "now"]


def test_turn_and_queue_bodies_accept_unknown_fields(agent: Agent) -> None:
    s = agent.session()
    item = enqueue(s, "queued", client_hint={"x": 1})
    assert item["text"] == "queued"
    s.push(answer("Sure."), answer("Also."))
    with s.events() as events:
        assert s.submit("now", client_hint=2)["status"] == "started"
        events.until_count("turn_complete", 2)
    assert sorted(user_messages(s)) == ["now", "queued"]


def test_fork_is_refused_while_busy(agent: Agent) -> None:
    s = agent.session()
    gate, script = held(agent)
    s.push(script)
    with s.events() as events:
        s.submit()
        events.until_kind("message_delta")
        assert_error(agent.client.post(f"/sessions/{s.id}/fork", json={}), 409, "session_busy")
        gate.set()
        events.until_kind("turn_complete")
    s.wait_idle()
    enqueue(s, "pending")
    assert_error(agent.client.post(f"/sessions/{s.id}/fork", json={}), 409, "session_busy")
