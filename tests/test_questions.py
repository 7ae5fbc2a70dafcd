"""Questions: the `ask_user`
tool records `question_requested` and waits; `POST …/questions/{batch_id}/answer` gives the
answers to the model, `…/cancel`, a turn cancel or deleting the session end it cancelled
(`question_resolved`). Answers that do not fit are a 400 `invalid_question_answers` and change
nothing; an unknown batch (or another session's) is a 404 `question_not_found`.

Kernel rules run in process against the fake provider, scripted to call `ask_user`; the last
test drives the wire through a real `foya serve` (SSE events and the routes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import Agent, agent_kernel, answer, call, kinds, only, payloads, tools
from support.inprocess import InProcess, inprocess_kernel
from support.interactions_helpers import new_session, watch
from support.streams_helpers import assert_error

from app import events as k
from app.errors import FoyaError
from app.kernel.interactions import Answer
from app.kernel.turns.inputs import TurnInput

SCOPE = {
    "id": "scope",
    "question": "Which scope?",
    "options": [{"label": "small"}, {"label": "large"}],
}
NOTES = {"question": "Any notes?", "allow_custom": True}  # no id: it becomes q2
GOOD = [Answer(question_id="scope", value="small"), Answer(question_id="q2", value="be brief")]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_kernel(tmp_path_factory.mktemp("questions") / "d") as rig:
        yield rig


def ask(rig: InProcess, session: dict[str, Any], *questions: dict[str, Any]) -> None:
    """Script one `ask_user` call (id `ask1`), then a final answer, and start the turn."""
    arguments = {"questions": list(questions or (SCOPE, NOTES))}
    rig.fake.push(session["model"], tools(call("ask1", "ask_user", arguments)), answer("Thanks."))
    rig.run(rig.kernel.turns.submit(session["id"], TurnInput(message="plan it")))


def refused(rig: InProcess, call_: Any) -> FoyaError:
    with pytest.raises(FoyaError) as caught:
        rig.run(call_)
    return caught.value


def test_answers_reach_the_model_even_in_full_access(rig: InProcess) -> None:
    session = new_session(rig, "full_access")  # questions are not approvals: still asked
    with watch(rig, session["id"]) as w:
        ask(rig, session)
        requested = w.until(k.QUESTION_REQUESTED)
        batch = requested.payload
        assert batch["session_id"] == session["id"]
        assert batch["run_id"] == requested.run_id and batch["tool_call_id"] == "ask1"
        assert [q["id"] for q in batch["questions"]] == ["scope", "q2"]
        assert batch["questions"][0]["options"] == [{"label": "small"}, {"label": "large"}]
        assert batch["questions"][1] == {"id": "q2", "question": "Any notes?", "allow_custom": True}
        assert batch["created_at"]
        rig.run(rig.kernel.questions.answer(session["id"], batch["id"], GOOD))
        w.until(k.TURN_COMPLETE)
    resolved = [e for e in w.events if e.kind == k.QUESTION_RESOLVED]
    assert [e.payload for e in resolved] == [{"id": batch["id"], "status": "answered"}]
    assert w.kinds().index(k.QUESTION_RESOLVED) < w.kinds().index(k.TOOL_END)
    output = (
        '{"answers":[{"question_id":"scope","value":"small"},'
        '{"question_id":"q2","value":"be brief"}]}'
    )
    assert w.tool_message()["content"] == output
    second = rig.fake.chats(session["model"])[1]
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "ask1", "content": output}


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        ([GOOD[0]], "expected 2 answers"),
        ([*GOOD, Answer(question_id="scope", value="large")], "expected 2 answers"),
        ([GOOD[0], Answer(question_id="q9", value="x")], "unknown question"),
        ([GOOD[0], GOOD[0]], "duplicate answer"),
        ([GOOD[0], Answer(question_id="q2", value="  ")], "is empty"),
        ([Answer(question_id="scope", value="medium"), GOOD[1]], "not one of its options"),
        ([Answer(question_id="scope", value="Small"), GOOD[1]], "not one of its options"),
    ],
)
def test_answers_that_do_not_fit_are_refused_and_change_nothing(
    rig: InProcess, answers: list[Answer], why: str
) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        ask(rig, session)
        batch = w.until(k.QUESTION_REQUESTED).payload
        error = refused(rig, rig.kernel.questions.answer(session["id"], batch["id"], answers))
        assert (error.status, error.code) == (400, "invalid_question_answers")
        assert why in error.message
        # Still pending, nothing recorded: the right answers go through afterwards.
        rig.run(rig.kernel.questions.answer(session["id"], batch["id"], GOOD))
        w.until(k.TURN_COMPLETE)
    assert w.kinds().count(k.QUESTION_RESOLVED) == 1
    assert not w.tool_message().get("is_error")


def test_a_cancelled_batch_tells_the_model_and_is_over(rig: InProcess) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        ask(rig, session)
        batch = w.until(k.QUESTION_REQUESTED).payload
        rig.run(rig.kernel.questions.cancel(session["id"], batch["id"]))
        w.until(k.TURN_COMPLETE)
    assert w.only(k.QUESTION_RESOLVED) == {"id": batch["id"], "status": "cancelled"}
    message = w.tool_message()
    assert message["is_error"] and message["content"] == "user question batch was cancelled"
    assert rig.fake.chats(session["model"])[1].messages[-1]["content"] == message["content"]
    for late in (
        rig.kernel.questions.answer(session["id"], batch["id"], GOOD),
        rig.kernel.questions.cancel(session["id"], batch["id"]),
    ):
        assert refused(rig, late).code == "question_not_found"


def test_cancelling_the_turn_resolves_the_pending_batch(rig: InProcess) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        ask(rig, session)
        batch = w.until(k.QUESTION_REQUESTED).payload
        rig.run(rig.kernel.turns.cancel(session["id"]))
        complete = w.until(k.TURN_COMPLETE)
    assert complete.payload["status"] == "cancelled"
    assert w.only(k.QUESTION_RESOLVED) == {"id": batch["id"], "status": "cancelled"}
    assert w.kinds().index(k.QUESTION_RESOLVED) < w.kinds().index(k.TURN_COMPLETE)
    stored = rig.run(rig.kernel.store.events_after(0, session=session["id"]))
    assert [e.payload for e in stored if e.kind == k.QUESTION_RESOLVED] == [
        {"id": batch["id"], "status": "cancelled"}
    ]
    error = refused(rig, rig.kernel.questions.answer(session["id"], batch["id"], GOOD))
    assert error.code == "question_not_found"


def test_deleting_the_session_resolves_the_pending_batch(rig: InProcess) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        ask(rig, session)
        batch = w.until(k.QUESTION_REQUESTED).payload
        rig.run(rig.kernel.delete_session(session["id"]))
        w.until(k.QUESTION_RESOLVED)
    assert w.only(k.QUESTION_RESOLVED) == {"id": batch["id"], "status": "cancelled"}
    error = refused(rig, rig.kernel.questions.answer(session["id"], batch["id"], GOOD))
    assert (error.status, error.code) == (404, "session_not_found")


def test_unknown_and_other_sessions_batches_are_not_found(rig: InProcess) -> None:
    session, other = new_session(rig), new_session(rig)
    with watch(rig, session["id"]) as w:
        ask(rig, session)
        batch = w.until(k.QUESTION_REQUESTED).payload
        for attempt in (
            rig.kernel.questions.answer(session["id"], "no-such-batch", GOOD),
            rig.kernel.questions.cancel(session["id"], "no-such-batch"),
            rig.kernel.questions.answer(other["id"], batch["id"], GOOD),
            rig.kernel.questions.cancel(other["id"], batch["id"]),
        ):
            error = refused(rig, attempt)
            assert (error.status, error.code) == (404, "question_not_found")
        rig.run(rig.kernel.questions.answer(session["id"], batch["id"], GOOD))
        w.until(k.TURN_COMPLETE)
    assert w.only(k.QUESTION_RESOLVED)["status"] == "answered"


@pytest.mark.parametrize(
    ("questions", "error"),
    [
        ([NOTES] * 9, "ask_user failed: invalid question batch: questions must contain 1 to 8"),
        ([{"question": " "}], "ask_user failed: invalid question batch: question 'q1' is empty"),
        ([SCOPE, SCOPE], "ask_user failed: invalid question batch: duplicate question id"),
        ([{"question": 7}], "invalid arguments: questions[0].question must be a string"),
    ],
)
def test_a_malformed_batch_is_an_error_for_the_model_and_asks_nothing(
    rig: InProcess, questions: list[dict[str, Any]], error: str
) -> None:
    session = new_session(rig)
    with watch(rig, session["id"]) as w:
        ask(rig, session, *questions)
        w.until(k.TURN_COMPLETE)
    assert k.QUESTION_REQUESTED not in w.kinds()
    message = w.tool_message()
    assert message["is_error"] and message["content"].startswith(error), message["content"]


# ---------------------------------------------------------------------------------------- wire


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("questions-wire")) as agent:
        yield agent


def test_questions_over_the_wire(agent: Agent) -> None:
    s, other = agent.session("manual"), agent.session("manual")
    s.push(tools(call("ask1", "ask_user", {"questions": [SCOPE, NOTES]})), answer("Thanks."))
    s.push(tools(call("ask2", "ask_user", {"questions": [NOTES]})), answer("Fine."))
    answers = [dict(a) for a in GOOD]

    def post(path: str, body: dict[str, Any] | None = None) -> Any:
        return s.client.post(path, json=body) if body is not None else s.client.post(path)

    with s.events() as events:
        s.submit()
        batch = events.until_kind("question_requested")[-1].data["payload"]
        assert batch["tool_call_id"] == "ask1" and batch["session_id"] == s.id
        route = f"/sessions/{s.id}/questions/{batch['id']}"
        bad = {"answers": [answers[0], {"question_id": "q2", "value": ""}]}
        assert_error(post(f"{route}/answer", bad), 400, "invalid_question_answers")
        assert_error(post(f"{route}/answer", {"answers": "all"}), 400, "bad_request")
        assert_error(
            post(f"/sessions/{s.id}/questions/nope/answer", {"answers": answers}),
            404,
            "question_not_found",
        )
        assert_error(
            post(f"/sessions/{other.id}/questions/{batch['id']}/cancel"), 404, "question_not_found"
        )
        assert_error(
            post(f"/sessions/nope/questions/{batch['id']}/answer", {"answers": answers}),
            404,
            "session_not_found",
        )
        response = post(f"{route}/answer", {"answers": answers})
        assert response.status_code == 204, response.text
        first = events.until_kind("turn_complete")
        s.submit()
        second = events.until_kind("question_requested")[-1].data["payload"]
        response = post(f"/sessions/{s.id}/questions/{second['id']}/cancel")
        assert response.status_code == 204, response.text
        rest = events.until_kind("turn_complete")
    assert payloads(first, "question_resolved") == [{"id": batch["id"], "status": "answered"}]
    assert kinds(first, ("question_resolved", "tool_end")) == ["question_resolved", "tool_end"]
    assert json.loads(only(first, "tool_end")["output"]) == {"answers": answers}
    assert payloads(rest, "question_resolved") == [{"id": second["id"], "status": "cancelled"}]
    assert only(rest, "tool_end")["output"] == "user question batch was cancelled"
    stored = s.replay(lambda f: f.seq == rest[-1].seq)
    assert [f.event for f in stored if (f.event or "").startswith("question_")] == [
        "question_requested",
        "question_resolved",
        "question_requested",
        "question_resolved",
    ]
