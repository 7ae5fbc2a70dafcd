"""Foya wire behaviours a black-box port of Foya's own tests found different:
input that is only context, browser element URLs, rewinding context, approvals bound to their
session, and a provider stream that breaks off. One real kernel and the fake provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import (
    Agent,
    Session,
    agent_kernel,
    answer,
    call,
    drop,
    only,
    payloads,
    text,
    tools,
)
from support.helpers import wait_until
from support.streams_helpers import assert_error

ELEMENT = {"page_url": "https://example.test/page", "tag": "BUTTON", "selector": "#buy"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("wire")) as agent:
        yield agent


def post_turn(s: Session, body: dict[str, Any]) -> dict[str, Any]:
    response = s.client.post(f"/sessions/{s.id}/turns", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


# ------------------------------------------------------------------------ input that is context


def test_an_empty_message_with_browser_elements_is_a_turn(agent: Agent) -> None:
    s = agent.session()
    s.push(answer("That is the buy button."))
    with s.events() as events:
        assert post_turn(s, {"message": "", "browser_elements": [ELEMENT]})["status"] == "started"
        frames = events.until_kind("turn_complete")
    user = payloads(frames, "message_end")[0]
    assert user["role"] == "user" and user["content"] == ""
    # Stored as Foya stores it: trimmed, the tag lower-cased.
    assert user["browser_elements"] == [{**ELEMENT, "tag": "button"}]
    assert only(frames, "turn_complete")["status"] == "completed"


def test_a_queue_item_of_only_browser_elements_keeps_empty_text(agent: Agent) -> None:
    s = agent.session()
    response = s.client.post(
        f"/sessions/{s.id}/queue", json={"message": "  ", "browser_elements": [ELEMENT]}
    )
    assert response.status_code == 201, response.text
    item = response.json()
    assert item["text"] == "" and item["browser_elements"][0]["selector"] == "#buy"
    assert [i["text"] for i in s.queue()] == [""]


@pytest.mark.parametrize(
    "element",
    [
        pytest.param({**ELEMENT, "page_url": "file:///etc/passwd"}, id="file-url"),
        pytest.param({**ELEMENT, "page_url": "javascript:alert(1)"}, id="javascript-url"),
        pytest.param({**ELEMENT, "page_url": "https://"}, id="no-host"),
        pytest.param({k: v for k, v in ELEMENT.items() if k != "page_url"}, id="no-url"),
        pytest.param({**ELEMENT, "selector": "  "}, id="blank-selector"),
    ],
)
def test_browser_elements_need_an_http_page_a_tag_and_a_selector(
    agent: Agent, element: Any
) -> None:
    s = agent.session()
    body = {"message": "look", "browser_elements": [element]}
    for path in (f"/sessions/{s.id}/turns", f"/sessions/{s.id}/queue"):
        assert_error(s.client.post(path, json=body), 400, "invalid_queue_message")
    assert s.queue() == [] and s.history() == []


def test_a_message_that_is_only_whitespace_is_still_refused(agent: Agent) -> None:
    s = agent.session()
    response = s.client.post(f"/sessions/{s.id}/turns", json={"message": " \n", "attachments": []})
    assert_error(response, 400, "invalid_queue_message")


def test_rewinding_a_message_with_browser_context_is_unsupported(agent: Agent) -> None:
    s = agent.session()
    s.push(answer("Seen."))
    with s.events() as events:
        post_turn(s, {"message": "what is this?", "browser_elements": [ELEMENT]})
        events.until_kind("turn_complete")
    s.wait_idle()
    (user,) = [m for m in s.history() if m["role"] == "user"]
    before = s.history()
    path = f"/sessions/{s.id}/turns/{user['event_seq']}/rewind"
    assert_error(s.client.post(path, json={}), 409, "rewind_context_unsupported")
    assert s.history() == before


# -------------------------------------------------------------------------------- approvals


def test_an_approval_is_decided_only_through_its_own_session(agent: Agent) -> None:
    s, other = agent.session("manual"), agent.session("manual")
    s.push(tools(call("w", "write", {"path": "out.txt", "content": "ok\n"})), answer("Done."))
    with s.events() as events:
        s.submit("write it")
        request = events.until_kind("approval_request")[-1].data["payload"]
        # Through another session's URL: refused, and nothing changes (tests/test_approval_scope).
        wrong = other.client.post(
            f"/sessions/{other.id}/approvals/{request['id']}", json={"decision": "approved"}
        )
        assert_error(wrong, 404, "approval_not_found")
        # A body naming another request than the URL is refused.
        mismatched = s.client.post(
            f"/sessions/{s.id}/approvals/{request['id']}",
            json={"request_id": "f" * 24, "decision": "approved"},
        )
        assert_error(mismatched, 400, "bad_request")
        assert_error(
            s.client.post(f"/sessions/nope/approvals/{request['id']}", json={"decision": "denied"}),
            404,
            "not_found",
        )
        assert not (s.workspace / "out.txt").exists(), "still waiting for its own session"
        right = s.client.post(
            f"/sessions/{s.id}/approvals/{request['id']}",
            json={"request_id": request["id"], "decision": "approved"},
        )
        assert right.status_code == 204, right.text
        frames = events.until_kind("turn_complete")
    assert only(frames, "approval_resolved") == {"id": request["id"], "decision": "approved"}
    assert (s.workspace / "out.txt").read_text() == "ok\n"


# ------------------------------------------------------------------------- provider failures


def test_a_stream_that_breaks_off_is_a_network_error_not_an_internal_one(agent: Agent) -> None:
    s = agent.session()
    frames = s.turn([text("partial "), drop()])
    (error,) = payloads(frames, "error")
    assert "broke off" in error and "internal" not in error, error
    complete = only(frames, "turn_complete")
    assert complete["status"] == "failed" and complete["reason"] == "error"
    wait_until(lambda: s.get()["phase"] == "idle", "the session to be idle", 5)
