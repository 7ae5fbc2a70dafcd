"""Browser actions: a browser
tool records `browser_action_requested` and waits for `POST /sessions/{id}/browser-actions/
{request_id}`; the result goes to the model, `browser_action_resolved` says how it ended. A body
`request_id` other than the URL's is a 400, an unknown request a 404 `browser_action_failed`;
neither changes anything. A turn cancel or the kernel's timeout ends the wait. A screenshot is
checked (PNG, base64, a real image) and kept with the session.

Kernel rules run in process against the fake provider, scripted to call the browser tools; the
last test drives the wire through a real `foya serve`.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image
from support.fake_provider import Agent, agent_kernel, answer, call, kinds, only, payloads, tools
from support.inprocess import InProcess, inprocess_kernel
from support.interactions_helpers import new_session, watch
from support.streams_helpers import assert_error

from app import events as k
from app.errors import FoyaError
from app.kernel.interactions.browser import ActionResult
from app.kernel.interactions.browser_tool import NOTICE
from app.kernel.turns.inputs import TurnInput

SNAPSHOT = (
    '{"url":"`https://example.com/`","elements":[{"attrs":{"href":"`https://example.com/docs`"}}]}'
)
RESULT = ActionResult(
    url=" `https://example.com/` ", title="Example", revision=2, snapshot=SNAPSHOT
)


def png() -> str:
    """A small PNG, base64-encoded."""
    out = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_kernel(tmp_path_factory.mktemp("browser") / "d") as rig:
        yield rig


def browse(rig: InProcess, session: dict[str, Any], *calls: Any) -> None:
    """Script one step of browser calls (default: a snapshot, id `b1`), a final answer, and
    start the turn."""
    step = tools(*(calls or (call("b1", "browser_snapshot", {}),)))
    rig.fake.push(session["model"], step, answer("Seen."))
    rig.run(rig.kernel.turns.submit(session["id"], TurnInput(message="look")))


def resolve(
    rig: InProcess,
    session: str,
    request_id: str,
    result: ActionResult = RESULT,
    body_id: str | None = None,
    screenshot: tuple[str, str] | None = None,
) -> None:
    rig.run(rig.kernel.browser_actions.resolve(session, request_id, body_id, result, screenshot))


def refused(rig: InProcess, *args: Any, **kwargs: Any) -> FoyaError:
    with pytest.raises(FoyaError) as caught:
        resolve(rig, *args, **kwargs)
    return caught.value


def test_the_clients_result_reaches_the_model(rig: InProcess) -> None:
    session = new_session(rig)  # manual: looking at the page asks nothing
    with watch(rig, session["id"]) as w:
        browse(rig, session)
        requested = w.until(k.BROWSER_ACTION_REQUESTED).payload
        assert set(requested) == {
            *("id", "session_id", "tool_call_id", "browser_id", "action", "created_at"),
        }
        assert requested["session_id"] == session["id"] and requested["tool_call_id"] == "b1"
        assert requested["browser_id"] == f"agent-{session['id']}"
        assert requested["action"] == "snapshot"
        resolve(rig, session["id"], requested["id"], {**RESULT, "verified": False})
        w.until(k.TURN_COMPLETE)
    assert k.APPROVAL_REQUEST not in w.kinds()
    assert w.only(k.BROWSER_ACTION_RESOLVED) == {"id": requested["id"], "status": "done"}
    assert w.kinds().index(k.BROWSER_ACTION_RESOLVED) < w.kinds().index(k.TOOL_END)
    message = w.tool_message()
    assert not message.get("is_error")
    assert json.loads(message["content"]) == {
        "notice": NOTICE,
        "url": "https://example.com/",
        "title": "Example",
        "revision": 2,
        "snapshot": '{"elements":[{"attrs":{"href":"https://example.com/docs"}}],'
        '"url":"https://example.com/"}',
        "verified": False,
    }
    seen = rig.fake.chats(session["model"])[1].messages[-1]
    assert seen == {"role": "tool", "tool_call_id": "b1", "content": message["content"]}


def test_mismatched_or_unknown_requests_are_refused_and_change_nothing(rig: InProcess) -> None:
    session, other = new_session(rig), new_session(rig)
    with watch(rig, session["id"]) as w:
        browse(rig, session)
        request = w.until(k.BROWSER_ACTION_REQUESTED).payload["id"]
        error = refused(rig, session["id"], request, body_id="another-request")
        assert (error.status, error.code) == (400, "bad_request")
        assert error.message == "browser action request ID mismatch"
        for where, which in ((session["id"], "nope"), (other["id"], request), ("nope", request)):
            error = refused(rig, where, which)
            assert (error.status, error.code) == (404, "browser_action_failed")
        resolve(rig, session["id"], request, body_id=request)  # still pending
        w.until(k.TURN_COMPLETE)
    assert w.only(k.BROWSER_ACTION_RESOLVED)["status"] == "done"


def test_an_error_result_is_an_error_for_the_model(rig: InProcess) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        browse(rig, session)
        request = w.until(k.BROWSER_ACTION_REQUESTED).payload["id"]
        resolve(rig, session["id"], request, ActionResult(error="page crashed"))
        w.until(k.TURN_COMPLETE)
    assert w.only(k.BROWSER_ACTION_RESOLVED) == {"id": request, "status": "error"}
    message = w.tool_message()
    assert message["is_error"] and message["content"] == "browser action failed: page crashed"


def test_cancelling_the_turn_ends_the_wait(rig: InProcess) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        browse(rig, session)
        request = w.until(k.BROWSER_ACTION_REQUESTED).payload["id"]
        rig.run(rig.kernel.turns.cancel(session["id"]))
        complete = w.until(k.TURN_COMPLETE)
    assert complete.payload["status"] == "cancelled"
    assert w.only(k.BROWSER_ACTION_RESOLVED) == {"id": request, "status": "cancelled"}
    assert refused(rig, session["id"], request).code == "browser_action_failed"


def test_an_action_no_client_answers_ends_at_the_timeout(rig: InProcess) -> None:
    session = new_session(rig)
    actions = rig.kernel.browser_actions
    kept, actions.timeout = actions.timeout, 0.05  # nobody answers: the wait ends there
    try:
        with watch(rig, session["id"]) as w:
            browse(rig, session)
            request = w.until(k.BROWSER_ACTION_REQUESTED).payload["id"]
            w.until(k.TURN_COMPLETE)
    finally:
        actions.timeout = kept
    assert w.only(k.BROWSER_ACTION_RESOLVED) == {"id": request, "status": "cancelled"}
    message = w.tool_message()
    assert message["content"] == "browser action failed: no answer within 0.05 s"


def test_a_screenshot_is_checked_and_kept_with_the_session(rig: InProcess) -> None:
    session = new_session(rig)
    kept = rig.kernel.settings.data_dir / "artifacts" / session["id"]
    with watch(rig, session["id"]) as w:
        browse(rig, session, call("s1", "browser_screenshot", {"full_page": True}))
        requested = w.until(k.BROWSER_ACTION_REQUESTED).payload
        assert requested["action"] == "screenshot" and requested["full_page"] is True
        sid, rid = session["id"], requested["id"]
        for shot, status, code, words in (
            ((png(), "image/jpeg"), 400, "bad_request", "unsupported browser screenshot type"),
            (("not base64!", "image/png"), 400, "bad_request", "invalid browser screenshot"),
            ((base64.b64encode(b"hello").decode(), "image/png"), 415, "unsupported_image", ""),
        ):
            error = refused(rig, sid, rid, screenshot=shot)
            assert (error.status, error.code) == (status, code)
            assert words in error.message
            assert not list(kept.glob("*")), "a refused screenshot leaves nothing behind"
        resolve(rig, sid, rid, ActionResult(title="Shot"), screenshot=(png(), "image/png"))
        w.until(k.TURN_COMPLETE)
    message = w.tool_message()
    text, image = message["content"].split("\n")
    assert json.loads(text) == {"notice": NOTICE, "title": "Shot"}
    assert image == "[Image: browser_screenshot-image]"
    (meta,) = [json.loads(p.read_text()) for p in kept.glob("*.json")]
    assert meta["committed"] and meta["media_type"] == "image/png"
    assert (meta["width"], meta["height"]) == (4, 3)


def test_navigating_and_interacting_ask_for_approval(rig: InProcess) -> None:
    session = new_session(rig)
    navigate = call("n1", "browser_navigate", {"url": "https://example.com/a"})
    click = call("c1", "browser_click", {"ref": "e3"})
    with watch(rig, session["id"]) as w:
        browse(rig, session, navigate, click)
        asked = w.until(k.APPROVAL_REQUEST).payload
        assert (asked["tool_name"], asked["action"]) == ("browser_navigate", "network")
        assert asked["scope"] == "browser"
        assert asked["detail"] == "Browser access: https://example.com/a"
        assert asked["resource"] == "https://example.com/a"
        rig.kernel.approvals.decide(session["id"], asked["id"], "denied")
        asked = w.until(k.APPROVAL_REQUEST).payload
        assert (asked["tool_name"], asked["action"]) == ("browser_click", "browser_interact")
        assert asked["detail"] == "Control built-in browser: click"
        assert asked["resource"] == session["id"]
        rig.kernel.approvals.decide(session["id"], asked["id"], "approved")
        requested = w.until(k.BROWSER_ACTION_REQUESTED).payload
        assert (requested["action"], requested["ref"]) == ("click", "e3")
        resolve(rig, session["id"], requested["id"])
        w.until(k.TURN_COMPLETE)
    denied, clicked = w.tool_messages()
    assert denied["is_error"] and denied["content"] == "user denied browser action"
    assert not clicked.get("is_error")
    assert w.kinds().count(k.BROWSER_ACTION_REQUESTED) == 1


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("browser_navigate", {"url": "javascript:alert(1)"}, "url must be an http or https URL"),
        ("browser_navigate", {"url": " `` "}, "url is required"),
        ("browser_click", {"ref": " "}, "ref is required"),
        ("browser_type", {"ref": "e1", "text": 5}, "invalid arguments: text must be a string"),
        ("browser_press_key", {"key": ""}, "key is required"),
        ("browser_wait", {}, "ref or text is required"),
        ("browser_wait", {"text": "x", "timeout_ms": 99}, "timeout_ms must be between 100"),
        ("browser_scroll", {"direction": "sideways"}, "direction must be one of up, down"),
        ("browser_scroll", {"amount": -1}, "amount must be positive"),
    ],
)
def test_bad_arguments_ask_the_browser_nothing(
    rig: InProcess, name: str, arguments: dict[str, Any], error: str
) -> None:
    session = new_session(rig, "full_access")
    with watch(rig, session["id"]) as w:
        browse(rig, session, call("x1", name, arguments))
        w.until(k.TURN_COMPLETE)
    assert k.BROWSER_ACTION_REQUESTED not in w.kinds()
    message = w.tool_message()
    assert message["is_error"] and message["content"].startswith(error), message["content"]


def test_scroll_fields_are_sent_as_foya_sends_them(rig: InProcess) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        browse(rig, session, call("x1", "browser_scroll", {"amount": 9000}))
        requested = w.until(k.BROWSER_ACTION_REQUESTED).payload
        resolve(rig, session["id"], requested["id"])
        w.until(k.TURN_COMPLETE)
    assert (requested["direction"], requested["amount"]) == ("down", 5000)


# ---------------------------------------------------------------------------------------- wire


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("browser-wire")) as agent:
        yield agent


def test_browser_actions_over_the_wire(agent: Agent) -> None:
    s = agent.session("full_access")
    s.push(tools(call("n1", "browser_navigate", {"url": "https://example.com"})), answer("Ok."))
    with s.events() as events:
        s.submit()
        requested = events.until_kind("browser_action_requested")[-1].data["payload"]
        assert (requested["action"], requested["url"]) == ("navigate", "https://example.com")
        route = f"/sessions/{s.id}/browser-actions"
        body: dict[str, Any] = {
            # A browser client sends the fields it has no value for as null.
            **dict.fromkeys(("observation_id", "code", "message", "verified", "trace", "error")),
            "url": "https://example.com/",
            "title": "Example",
            "revision": 1,
            "snapshot": '{"elements":[]}',
            "screenshot_base64": png(),
            "media_type": "image/png",
        }
        mismatched = {**body, "request_id": "another"}
        assert_error(
            s.client.post(f"{route}/{requested['id']}", json=mismatched), 400, "bad_request"
        )
        assert_error(s.client.post(f"{route}/nope", json=body), 404, "browser_action_failed")
        unknown = {**body, "colour": "red"}
        assert_error(s.client.post(f"{route}/{requested['id']}", json=unknown), 400, "bad_request")
        matching = {**body, "request_id": requested["id"]}
        response = s.client.post(f"{route}/{requested['id']}", json=matching)
        assert response.status_code == 204, response.text
        frames = events.until_kind("turn_complete")
    assert payloads(frames, "browser_action_resolved") == [
        {"id": requested["id"], "status": "done"}
    ]
    assert kinds(frames, ("browser_action_resolved", "tool_end")) == [
        "browser_action_resolved",
        "tool_end",
    ]
    text, image = only(frames, "tool_end")["output"].split("\n")
    assert json.loads(text)["title"] == "Example" and image.startswith("[Image: browser_navigate")
    stored = s.replay(lambda f: f.seq == frames[-1].seq)
    assert [f.event for f in stored if (f.event or "").startswith("browser_action")] == [
        "browser_action_requested",
        "browser_action_resolved",
    ]
