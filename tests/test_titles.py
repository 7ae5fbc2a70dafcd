"""Session titles.

After a session's first completed turn the kernel asks the model, in the background and without
streaming, for a short title, and sets it as a generated title (`title_is_manual` false). A title
the user set is never replaced, not even one set while the title call is under way. A failed
title call leaves the session untitled; the kernel serves on, and tries again after the next
completed turn.

Sessions here are made with `title=None` (no manual title). The fake's non-streaming answers are
held back by a `wait` action where a test needs the title call to be in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    BOUND,
    Agent,
    FakeProvider,
    Session,
    answer,
    connect,
    http_error,
    only,
    reply,
    wait,
)
from support.helpers import short_tmpdir, wait_until
from support.streams_helpers import is_title, module_kernels

from app.kernel.turns.titles import PROMPT


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with (
        FakeProvider.running() as fake,
        short_tmpdir() as root,
        module_kernels(tmp_path_factory.mktemp("titles"), root, "k") as kernels,
        kernels["k"].client() as client,
    ):
        client.timeout = httpx.Timeout(BOUND)
        connection = connect(client, fake)
        yield Agent(kernels["k"], fake, client, connection["id"])


def title_calls(s: Session) -> list[Any]:
    return s.chats(streaming=False)


def wait_title_call_done(s: Session, count: int) -> None:
    wait_until(
        lambda: len(title_calls(s)) >= count and title_calls(s)[count - 1].done,
        "the title call to be answered",
        BOUND,
    )


def test_the_first_completed_turn_gets_a_generated_title(agent: Agent) -> None:
    s = agent.session(title=None)
    assert "title" not in s.get() and "title_is_manual" not in s.get()
    s.push_completion(reply('  "Fix the login bug"  '))
    with s.events() as events:
        s.turn(answer("The session cookie expired."), message="why can't I log in?")
        updated = events.until(is_title("Fix the login bug"))[-1].data["payload"]
    assert updated["title"] == "Fix the login bug"
    assert updated["title_is_manual"] is False
    session = s.get()
    assert session["title"] == "Fix the login bug" and session["title_is_manual"] is False

    (request,) = title_calls(s)
    assert not request.streaming
    assert request.body["model"] == s.model
    assert request.body["max_tokens"] == 30
    assert "tools" not in request.body
    system, opening = request.messages
    assert system == {"role": "system", "content": PROMPT}
    assert opening == {
        "role": "user",
        "content": "[user] why can't I log in?\n[assistant] The session cookie expired.",
    }

    # Later turns keep the title without asking again.
    s.turn(answer("Anything else?"), message="thanks")
    s.wait_idle()
    s.turn(answer("Bye."), message="bye")
    assert len(title_calls(s)) == 1
    assert s.get()["title"] == "Fix the login bug"


@pytest.mark.parametrize(
    ("answered", "title"),
    [
        pytest.param("Refactor " + "x" * 200, ("Refactor " + "x" * 200)[:80], id="long"),
        pytest.param("Add caching\nbecause it was slow", "Add caching", id="two-lines"),
        pytest.param("'Add caching'", "Add caching", id="single-quotes"),
        pytest.param('"Add caching"\nThe user asked about caching.', "Add caching", id="quoted"),
    ],
)
def test_the_answer_is_cut_to_one_unquoted_line(agent: Agent, answered: str, title: str) -> None:
    s = agent.session(title=None)
    s.push_completion(reply(answered))
    with s.events() as events:
        s.turn(answer("ok"))
        updated = events.until(
            lambda f: f.event == "session_updated" and "title" in f.data["payload"]
        )
    assert updated[-1].data["payload"]["title"] == title


def test_a_manual_title_is_never_replaced(agent: Agent) -> None:
    s = agent.session(title="Mine")
    s.turn(answer("ok"))
    s.turn(answer("ok again"))
    s.wait_idle()
    assert title_calls(s) == [], "no title call for a session that has a title"
    session = s.get()
    assert session["title"] == "Mine" and session["title_is_manual"] is True


def test_a_manual_title_set_while_the_title_is_generated_wins(agent: Agent) -> None:
    s = agent.session(title=None)
    gate = agent.fake.gate()
    s.push_completion([wait(gate), *reply("Generated title")])
    s.turn(answer("ok"))
    wait_until(lambda: len(title_calls(s)) == 1, "the title call", BOUND)
    patched = s.client.patch(f"/sessions/{s.id}", json={"title": "Chosen by me"})
    assert patched.status_code == 200, patched.text
    gate.set()
    wait_title_call_done(s, 1)
    # One more turn: by its end the generated title would long have been written.
    s.turn(answer("still here"))
    s.wait_idle()
    session = s.get()
    assert session["title"] == "Chosen by me" and session["title_is_manual"] is True
    assert len(title_calls(s)) == 1


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(http_error(500, "titles are down"), id="http-500"),
        pytest.param(http_error(401, "bad key", "invalid_api_key"), id="auth"),
        pytest.param(reply(""), id="empty"),
        pytest.param(reply(' "" '), id="only-quotes"),
    ],
)
def test_a_failed_title_leaves_no_title_and_the_kernel_serves_on(
    agent: Agent, failure: list[Any]
) -> None:
    s = agent.session(title=None)
    s.push_completion(failure)
    frames = s.turn(answer("first"))
    assert only(frames, "turn_complete")["status"] == "completed"
    wait_title_call_done(s, 1)
    s.wait_idle()
    assert agent.client.get("/healthz").status_code == 200
    assert "title" not in s.get()

    # The next completed turn tries again.
    s.push_completion(reply("Second try"))
    with s.events() as events:
        frames = s.turn(answer("second"))
        events.until(is_title("Second try"))
    assert only(frames, "turn_complete")["status"] == "completed"
    assert s.get()["title"] == "Second try" and s.get()["title_is_manual"] is False
    assert len(title_calls(s)) == 2


def test_a_failed_turn_does_not_ask_for_a_title(agent: Agent) -> None:
    s = agent.session(title=None)
    frames = s.turn(http_error(500, "broken"))
    assert only(frames, "turn_complete")["status"] == "failed"
    s.wait_idle()
    s.turn(answer("now it works"))
    wait_until(lambda: len(title_calls(s)) >= 1, "the title call", BOUND)
    assert len(title_calls(s)) == 1, "only the completed turn asked for a title"
