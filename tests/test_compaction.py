"""Context management end to end: compaction, checkpoints and the accepted boundary.

A real `foya serve` on a Unix socket talks to the fake OpenAI-compatible provider of
`fake_provider.py`. What the model saw is read from the fake's recorded request bodies; what the
kernel stored is read from the event replay (`?after=0`) and, read-only, from `foya.db`. Tests
that corrupt or rewind the store start kernels of their own, stop them by PID, change the data
directory with the kernel stopped (plain sqlite3, or the real `app.store.Store`), and restart.

`SlowFake` is the shared fake plus one thing it lacks: `wait`/`sleep` actions at the start of a
non-streaming script hold that answer back (a slow compaction summary).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import (
    BOUND,
    Agent,
    FakeProvider,
    Session,
    Sleep,
    Wait,
    answer,
    call,
    connect,
    finish,
    http_error,
    kinds,
    only,
    payloads,
    reply,
    text,
    tools,
    usage,
    wait,
)
from support.helpers import Launcher, short_tmpdir, wait_until
from support.streams_helpers import Frame, Served, assert_error, module_kernels, unix_kernel

from app import events as k
from app.kernel.turns.compaction import SECTIONS, estimate_tokens
from app.kernel.turns.context import summary_message
from app.store import Store

SUMMARY = "## Goal\nShip the parser.\n## Progress\nTests pass.\n## Next Steps\nRelease."
SUMMARY_TEXT = summary_message(SUMMARY)["content"]
LONG = "word " * 400  # ~500 estimated tokens
OVERFLOW = http_error(
    400,
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9100 tokens. Please reduce the length of the messages. (context_length_exceeded)",
    "context_length_exceeded",
)
COMPACTION_KINDS = ("compaction_started", "compaction_completed", "compaction_failed")


class SlowFake(FakeProvider):
    """The fake provider, where a non-streaming script may start with `sleep`/`wait`."""

    async def _chat(self, record: Any, receive: Any, send: Any) -> None:
        if not record.streaming:
            with self._lock:
                queued = self._scripts[record.model or "", False]
                script = queued[0] if queued else None
            while script and isinstance(script[0], Sleep | Wait):
                action = script.pop(0)
                if isinstance(action, Sleep):
                    await asyncio.sleep(action.seconds)
                    continue
                assert isinstance(action, Wait)
                end = time.monotonic() + BOUND
                while not action.gate.is_set() and time.monotonic() < end:
                    await asyncio.sleep(0.01)
        await super()._chat(record, receive, send)


@pytest.fixture(scope="module")
def fake() -> Iterator[SlowFake]:
    with SlowFake.running() as fake:
        yield fake


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, fake: SlowFake) -> Iterator[Agent]:
    with (
        short_tmpdir() as root,
        module_kernels(tmp_path_factory.mktemp("compaction"), root, "k") as kernels,
        kernels["k"].client() as client,
    ):
        client.timeout = httpx.Timeout(BOUND)
        connection = connect(client, fake)
        yield Agent(kernels["k"], fake, client, connection["id"])


# --------------------------------------------------------------------------------- helpers


def compact(s: Session) -> httpx.Response:
    return s.client.post(f"/sessions/{s.id}/compact")


def compact_idle(s: Session, client: httpx.Client | None = None) -> httpx.Response:
    """POST compact once the runner is gone: for a moment after `turn_complete` the kernel
    still answers `session_busy` (see `test_compaction_right_after_a_turn_is_not_busy`)."""
    end = time.monotonic() + BOUND
    while True:
        response = (client or s.client).post(f"/sessions/{s.id}/compact")
        if response.status_code != 409 or response.json()["code"] != "session_busy":
            return response
        assert time.monotonic() < end, "still busy"
        time.sleep(0.02)


def compaction_frames(frames: list[Frame]) -> list[tuple[str, Any]]:
    return [(f.event or "", f.data.get("payload")) for f in frames if f.event in COMPACTION_KINDS]


def by_role(history: list[dict[str, Any]], role: str, content: str) -> dict[str, Any]:
    return next(m for m in history if m["role"] == role and m.get("content") == content)


def contents(request_messages: list[dict[str, Any]]) -> list[Any]:
    return [m.get("content") for m in request_messages]


def db_rows(data_dir: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read `foya.db` on a read-only connection (the kernel may be running)."""
    conn = sqlite3.connect(f"file:{data_dir / 'foya.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def db_write(data_dir: Path, sql: str, args: tuple[Any, ...] = ()) -> None:
    """Change `foya.db` behind the store's back (the kernel must be stopped)."""
    conn = sqlite3.connect(data_dir / "foya.db")
    try:
        with conn:
            conn.execute(sql, args)
    finally:
        conn.close()


def checkpoint_row(data_dir: Path, session: str) -> tuple[int, str] | None:
    found = db_rows(
        data_dir,
        "SELECT event_seq, checkpoint_json FROM compaction_checkpoints WHERE session_id = ?",
        (session,),
    )
    return (int(found[0][0]), str(found[0][1])) if found else None


def boundaries(data_dir: Path, session: str) -> dict[str, dict[str, int]]:
    keys: tuple[str, ...] = (
        "event_seq",
        "through_seq",
        "input_tokens",
        "output_tokens",
        "total_tokens",
    )
    keys += ("cached_tokens", "payload_bytes")
    found = db_rows(
        data_dir,
        f"SELECT route, {', '.join(keys)} FROM context_accepted_boundaries WHERE session_id = ?",
        (session,),
    )
    return {str(r[0]): dict(zip(keys, r[1:], strict=True)) for r in found}


def route_of(s: Session, connection_id: str | None = None, model: str | None = None) -> str:
    return "|".join(
        (connection_id or s.agent.connection_id, "openai", s.agent.fake.base_url, model or s.model)
    )


def two_exchanges(s: Session) -> None:
    """u1 "first question" → a long answer; u2 "second question" → a short one."""
    s.turn(answer(LONG), message="first question")
    s.turn(answer("second answer"), message="second question")


# ---------------------------------------------------------------------- manual compaction


def test_manual_compaction_summarises_all_but_the_last_user_message(agent: Agent) -> None:
    s = agent.session()
    s.turn(answer(LONG), message="first question")
    # A turn that ran a tool, then failed: its last messages are the call and its result.
    failed = s.turn(
        tools(call("call_t", "bash", {"command": "echo tool-output"})),
        http_error(500, "upstream broke"),
        message="run the tool",
    )
    assert only(failed, "turn_complete")["status"] == "failed"
    s.turn(answer("second answer"), message="second question")
    before = s.history()
    assert [m["role"] for m in before] == [
        *("user", "assistant", "user", "assistant", "tool", "user", "assistant"),
    ]
    u1 = by_role(before, "user", "run the tool")

    s.push_completion(reply(SUMMARY))
    response = compact_idle(s)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) >= {"checkpoint_id", "phase", "through_seq"}
    assert body["phase"] == "standalone"
    # The tool call and its result stay together after the boundary: it moves back to u1.
    assert body["through_seq"] == u1["event_seq"] > 0
    assert body["estimated_tokens_before"] > body["estimated_tokens_after"] > 0
    assert isinstance(body["checkpoint_id"], str) and body["checkpoint_id"]

    # The summary call: non-streaming, the five sections asked for, only the covered part.
    summary_call = s.chats(streaming=False)[-1]
    assert not summary_call.streaming
    system, covered = summary_call.messages
    assert all(f"## {section}" in system["content"] for section in SECTIONS)
    assert "[user] first question" in covered["content"]
    assert "[assistant] word word" in covered["content"]
    assert "[user] run the tool" in covered["content"]
    assert "second question" not in covered["content"]
    assert "tool-output" not in covered["content"]

    # Stored facts: compaction_started, then compaction_completed carrying the checkpoint.
    replay = s.replay(lambda f: f.event == "compaction_completed")
    (started, completed) = compaction_frames(replay)
    assert started == ("compaction_started", {"phase": "standalone"})
    checkpoint = completed[1]
    assert checkpoint["id"] == body["checkpoint_id"]
    assert checkpoint["through_seq"] == body["through_seq"]
    assert checkpoint["phase"] == "standalone"
    assert checkpoint["summary"] == SUMMARY
    assert checkpoint["version"] == 1 and len(checkpoint["source_digest"]) == 64
    assert checkpoint["estimated_tokens_before"] == body["estimated_tokens_before"]
    assert checkpoint["estimated_tokens_after"] == body["estimated_tokens_after"]
    phases = [f.data["payload"]["phase"] for f in replay if f.event == "session_updated"]
    assert phases[-1] == "compaction", phases
    s.wait_idle()
    completed_seq = replay[-1].seq
    row = checkpoint_row(agent.data_dir, s.id)
    assert row is not None and row[0] == completed_seq and json.loads(row[1]) == checkpoint

    # The next model request: the summary, then only what follows the boundary.
    s.turn(answer("third answer"), message="third question")
    request = s.chats(streaming=True)[-1].messages
    assert [m["role"] for m in request] == [
        *("system", "user", "assistant", "tool", "user", "assistant", "user"),
    ]
    assert request[1] == {"role": "user", "content": SUMMARY_TEXT}
    (tool_call,) = request[2]["tool_calls"]
    assert tool_call["id"] == "call_t" == request[3]["tool_call_id"]
    assert request[3]["content"].startswith("tool-output")
    assert contents(request)[4:] == ["second question", "second answer", "third question"]
    sent = json.dumps(request)
    assert "first question" not in sent and "word word" not in sent and "run the tool" not in sent

    # The user's history stays whole.
    after = s.history()
    assert after[: len(before)] == before
    assert [m.get("content") for m in after[len(before) :]] == ["third question", "third answer"]


def test_compaction_then_compacting_again_covers_the_rest(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    s.push_completion(reply(SUMMARY))
    assert compact_idle(s).status_code == 200
    # What is left is one exchange: a second compaction covers it, building on the summary.
    s.push_completion(reply("## Goal\nsecond summary"))
    again = compact_idle(s)
    assert again.status_code == 200, again.text
    body = again.json()
    assert body["level"] == "session" and body["segment_count"] == 1
    assert body["through_seq"] == s.history()[-1]["event_seq"]
    covered = s.chats(streaming=False)[-1].messages[1]["content"]
    assert covered.startswith(f"Summary of the conversation before this part:\n{SUMMARY}")
    assert "[user] second question" in covered and "first question" not in covered
    # Nothing is left after the boundary now.
    assert_error(compact(s), 409, "nothing_to_compact")
    s.turn(answer("third answer"), message="third question")
    request = s.chats(streaming=True)[-1].messages
    assert contents(request)[1:] == [
        summary_message("## Goal\nsecond summary")["content"],
        "third question",
    ]


def test_a_one_exchange_session_is_compacted(agent: Agent) -> None:
    """Foya compacts a session of one user message and a long answer: the kept tail must not
    make it uncompactable."""
    s = agent.session()
    s.turn(answer(LONG), message="only question")
    s.push_completion(reply(SUMMARY))
    response = compact_idle(s)
    assert response.status_code == 200, response.text
    body = response.json()
    history = s.history()
    assert body["through_seq"] == history[-1]["event_seq"] > 0
    assert body["projection_kind"] == "text"
    assert body["level"] == "segmented" and body["segment_count"] == 1
    covered = s.chats(streaming=False)[-1].messages[1]["content"]
    assert "[user] only question" in covered and "[assistant] word word" in covered
    s.turn(answer("next answer"), message="next question")
    request = s.chats(streaming=True)[-1].messages
    assert contents(request)[1:] == [SUMMARY_TEXT, "next question"]
    assert s.history()[: len(history)] == history  # the user's history stays whole


# -------------------------------------------------------------------------------- errors


def test_compacting_a_session_with_a_running_turn_is_busy(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    gate = agent.fake.gate()
    s.push([text("working "), wait(gate), text("done"), finish(), usage()])
    with s.events() as events:
        s.submit("third question")
        events.until_kind("message_delta")
        assert_error(compact(s), 409, "session_busy")
        gate.set()
        events.until_kind("turn_complete")
    s.wait_idle()
    assert not s.chats(streaming=False), "no summary was asked for"


def test_a_session_with_too_little_history_has_nothing_to_compact(agent: Agent) -> None:
    s = agent.session()
    assert_error(compact(s), 409, "nothing_to_compact")
    # A lone user message (its turn failed before any answer) has nothing to summarise.
    s.turn(http_error(500, "upstream broke"), message="only question")
    assert_error(compact_idle(s), 409, "nothing_to_compact")
    assert not s.chats(streaming=False)
    s.wait_idle()
    assert s.get()["phase"] == "idle"


def test_compaction_right_after_a_turn_is_not_busy(agent: Agent) -> None:
    """Once a client has `turn_complete` (the session's phase is idle, its queue empty), the
    session is idle: compacting it must not be refused as busy. The runner task lingers a few
    loop iterations after storing `turn_complete`; 20 tries make that window show."""
    codes = []
    for _ in range(20):
        s = agent.session()
        s.turn(http_error(500, "upstream broke"), message="only question")
        codes.append(compact(s).json()["code"])
    busy = codes.count("session_busy")
    assert codes == ["nothing_to_compact"] * 20, f"{busy} of 20 refused as busy: {codes}"


def test_compaction_without_a_connection_is_unavailable(agent: Agent) -> None:
    doomed = connect(agent.client, agent.fake, name="doomed")
    s = agent.session(connection_id=doomed["id"])
    two_exchanges(s)
    assert agent.client.delete(f"/connections/{doomed['id']}").status_code == 204
    assert_error(compact_idle(s), 501, "compaction_unavailable")
    assert not s.chats(streaming=False)
    assert s.get()["phase"] == "idle"


def test_a_failing_summary_call_is_compaction_failed(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    s.push_completion(http_error(500, "summary broke"))
    assert_error(compact_idle(s), 502, "compaction_failed")
    replay = s.replay(lambda f: f.event == "compaction_failed")
    started, failed = compaction_frames(replay)
    assert started == ("compaction_started", {"phase": "standalone"})
    assert failed[1]["phase"] == "standalone"
    assert isinstance(failed[1]["error"], str) and failed[1]["error"]
    assert "compaction_completed" not in [f.event for f in replay]
    assert checkpoint_row(agent.data_dir, s.id) is None
    s.wait_idle()
    # The next turn sends the raw history.
    s.turn(answer("third answer"), message="third question")
    request = s.chats(streaming=True)[-1].messages
    assert contents(request)[1:] == [
        *("first question", LONG, "second question", "second answer", "third question"),
    ]


# --------------------------------------------------------------------- queue during compaction


@contextlib.contextmanager
def compacting_slowly(
    s: Session, script: list[Any]
) -> Iterator[concurrent.futures.Future[httpx.Response]]:
    """POST compact from another thread; yields once the summary call is held at the fake."""
    asked = len(s.chats(streaming=False))
    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        s.agent.served.client() as other,
    ):
        other.timeout = httpx.Timeout(BOUND)
        s.push_completion(script)
        future = pool.submit(compact_idle, s, other)
        wait_until(lambda: len(s.chats(streaming=False)) > asked, "the summary call", BOUND)
        yield future


def test_input_submitted_during_a_compaction_is_queued_and_runs_after_it(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    gate = agent.fake.gate()
    s.push(answer("third answer"))
    with s.events() as events, compacting_slowly(s, [wait(gate), *reply(SUMMARY)]) as pending:
        assert s.get()["phase"] == "compaction"
        accepted = s.submit("third question")
        assert accepted["status"] == "queued", accepted
        assert [i["text"] for i in s.queue()] == ["third question"]
        assert_error(compact(s), 409, "session_busy")
        assert len(s.chats(streaming=True)) == 2, "nothing runs while compacting"
        gate.set()
        response = pending.result(BOUND)
        assert response.status_code == 200, response.text
        frames = events.until_kind("turn_complete")
    assert only(frames, "turn_complete")["status"] == "completed"
    order = kinds(frames, ("compaction_completed", "turn_started"))
    assert order == ["compaction_completed", "turn_started"], order
    request = s.chats(streaming=True)[-1].messages
    assert contents(request)[1:] == [
        *(SUMMARY_TEXT, "second question", "second answer", "third question"),
    ]
    s.wait_idle()
    assert s.queue() == []


def test_input_queued_during_a_failed_compaction_still_runs(agent: Agent) -> None:
    """Whatever the compaction's outcome, it ends and the queued input runs."""
    s = agent.session()
    two_exchanges(s)
    gate = agent.fake.gate()
    s.push(answer("third answer"))
    with compacting_slowly(s, [wait(gate), *http_error(500, "summary broke")]) as pending:
        assert s.submit("third question")["status"] == "queued"
        gate.set()
        assert_error(pending.result(BOUND), 502, "compaction_failed")
    wait_until(
        lambda: len(s.chats(streaming=True)) == 3,
        "the queued input to run after the failed compaction",
        5,
    )
    s.wait_idle()
    assert s.history()[-1]["content"] == "third answer"


def test_cancel_stops_a_running_compaction(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    gate = agent.fake.gate()
    with compacting_slowly(s, [wait(gate), *reply(SUMMARY)]) as pending:
        assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204
        assert_error(pending.result(BOUND), 409, "compaction_cancelled")
        gate.set()
    replay = s.replay(lambda f: f.event == "compaction_failed")
    assert compaction_frames(replay)[-1] == (
        "compaction_failed",
        {"phase": "standalone", "error": "cancelled"},
    )
    s.wait_idle()
    assert checkpoint_row(agent.data_dir, s.id) is None


def test_dispatching_queued_input_cancels_a_compaction_and_runs_it(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    gate = agent.fake.gate()
    s.push(answer("third answer"))
    with compacting_slowly(s, [wait(gate), *reply(SUMMARY)]) as pending:
        item = s.submit("third question")["queued"]
        response = s.client.post(f"/sessions/{s.id}/queue/{item['id']}/dispatch")
        assert response.status_code == 200, response.text
        assert_error(pending.result(BOUND), 409, "compaction_cancelled")
        gate.set()
    wait_until(lambda: len(s.chats(streaming=True)) == 3, "the dispatched input to run", BOUND)
    s.wait_idle()
    assert s.history()[-1]["content"] == "third answer"
    assert checkpoint_row(agent.data_dir, s.id) is None


def test_a_summary_request_too_long_for_the_model_is_summarized_in_halves(agent: Agent) -> None:
    s = agent.session()
    two_exchanges(s)
    s.turn(answer("third answer"), message="third question")
    s.push_completion(OVERFLOW, reply("first half summary"), reply(SUMMARY))
    response = compact_idle(s)
    assert response.status_code == 200, response.text
    summaries = s.chats(streaming=False)[-3:]
    halves = [json.dumps(r.messages) for r in summaries[1:]]
    assert "first question" in halves[0] and "second question" not in halves[0]
    assert "first half summary" in halves[1] and "second question" in halves[1]
    replay = s.replay(lambda f: f.event == "compaction_completed")
    completed = compaction_frames(replay)[-1][1]
    assert completed["summary"] == SUMMARY and completed["segment_count"] == 2


# ------------------------------------------------------------------------- budget trigger


def small_window_session(agent: Agent, window: int) -> Session:
    model = f"m-small-{window}-{time.monotonic_ns()}"
    settings = {model: {"context_window": window}}
    connection = connect(agent.client, agent.fake, name="small", model_settings=settings)
    return agent.session(model=model, connection_id=connection["id"])


def test_a_request_over_the_window_is_compacted_before_it_is_sent(agent: Agent) -> None:
    """Window 600: 600 - 150 (a quarter, no reply yet in this turn) = 450 tokens for the input;
    the long first answer alone is ~500."""
    s = small_window_session(agent, 600)
    s.turn(answer(LONG), message="first question")
    s.push_completion(reply(SUMMARY))
    frames = s.turn(answer("second answer"), message="second question")
    started = kinds(frames, ("turn_started", "compaction_started", "compaction_completed"))
    assert started == ["turn_started", "compaction_started", "compaction_completed"], started
    (begun, completed) = compaction_frames(frames)
    assert begun[1] == {"phase": "pre_turn"}
    assert completed[1]["phase"] == "pre_turn"
    first_answer = by_role(s.history(), "assistant", LONG)
    assert completed[1]["through_seq"] == first_answer["event_seq"]
    run_id = only(frames, "turn_started")["run_id"]
    assert all(f.data.get("run_id") == run_id for f in frames if f.event in COMPACTION_KINDS)
    assert only(frames, "turn_complete")["status"] == "completed"

    first, second = s.chats(streaming=True)
    assert contents(second.messages)[1:] == [SUMMARY_TEXT, "second question"]
    assert LONG not in json.dumps(second.messages)
    raw = [*first.messages, {"role": "assistant", "content": LONG}, second.messages[-1]]
    assert estimate_tokens(second.messages) < 450 < estimate_tokens(raw)


def test_the_accepted_input_count_is_the_token_baseline(agent: Agent) -> None:
    """The provider counted 500 input tokens for the last request: with a 450-token budget the
    next request is compacted although its characters alone would fit."""
    s = small_window_session(agent, 600)
    s.turn(answer("short", prompt=500), message="first question")
    s.push_completion(reply(SUMMARY))
    frames = s.turn(answer("second answer"), message="second question")
    (begun, _) = compaction_frames(frames)
    assert begun[1] == {"phase": "pre_turn"}
    assert estimate_tokens(s.chats(streaming=True)[0].messages) < 200


def test_after_a_manual_compaction_the_next_turn_is_not_compacted_again(agent: Agent) -> None:
    """Window 1200: 1200 - 300 = 900 tokens. The provider's counts match the estimates. After
    `POST /compact` the input is the summary plus the last exchange (~650 tokens), which fits:
    the baseline of the request made before the compaction must not be reused for it."""
    s = small_window_session(agent, 1200)
    s.turn(answer(LONG, prompt=110), message="first question")
    s.turn(answer(LONG, prompt=640), message="second question")
    assert not compaction_frames(s.replay(lambda f: f.event == "turn_complete"))
    s.push_completion(reply(SUMMARY))
    assert compact_idle(s).status_code == 200
    frames = s.turn(answer("third answer"), message="third question")
    request = s.chats(streaming=True)[-1].messages
    assert estimate_tokens(request) < 900
    assert compaction_frames(frames) == [], "compacted again right after a compaction"
    assert contents(request)[1:] == [SUMMARY_TEXT, "second question", LONG, "third question"]


def test_a_later_step_over_the_window_is_compacted_mid_turn(agent: Agent) -> None:
    """Window 2000: 1500 tokens for the first step of a turn, 1000 once a reply was seen
    (reserve 2x the last output, at least 1K). The tool's 4000-character output pushes the
    turn's second step over."""
    s = small_window_session(agent, 2000)
    s.turn(answer("first answer", prompt=100), message="first question")
    s.push_completion(reply(SUMMARY))
    frames = s.turn(
        tools(call("c1", "bash", {"command": "head -c 4000 /dev/zero | tr '\\0' z"}), prompt=120),
        answer("done"),
        message="second question",
    )
    (begun, completed) = compaction_frames(frames)
    assert begun[1] == {"phase": "mid_turn"}
    assert (
        completed[1]["through_seq"]
        == by_role(s.history(), "assistant", "first answer")["event_seq"]
    )
    step1, step2 = s.chats(streaming=True)[1:]
    assert contents(step1.messages)[1:] == ["first question", "first answer", "second question"]
    assert [m["role"] for m in step2.messages] == ["system", "user", "user", "assistant", "tool"]
    assert contents(step2.messages)[1:3] == [SUMMARY_TEXT, "second question"]
    assert step2.messages[4]["content"].startswith("z" * 4000)
    assert only(frames, "turn_complete")["status"] == "completed"


def test_without_reported_usage_the_whole_input_is_estimated(agent: Agent) -> None:
    """A provider that sends no usage gives no real count: the accepted boundary (0 input
    tokens) must not make the input before it count as nothing. Window 800: 600 tokens."""
    s = small_window_session(agent, 800)
    question = "word " * 360
    s.turn([text("word " * 100), finish("stop")], message=question)  # no usage chunk
    first = s.chats(streaming=True)[0].messages
    assert estimate_tokens(first) < 600, "the first request fits"
    s.push_completion(reply(SUMMARY))
    frames = s.turn(answer("second answer"), message="second question")
    raw = [*first, {"role": "assistant", "content": "word " * 100}]
    raw.append({"role": "user", "content": "second question"})
    assert estimate_tokens(raw) > 600, "the second one does not"
    assert [kind for kind, _ in compaction_frames(frames)] == [
        "compaction_started",
        "compaction_completed",
    ], "the request over the window was sent as is"
    assert contents(s.chats(streaming=True)[-1].messages)[1:] == [SUMMARY_TEXT, "second question"]


def test_an_unknown_window_counts_as_32k(agent: Agent) -> None:
    s = agent.session()  # the connection has no model settings
    two_exchanges(s)
    frames = s.turn(answer("third answer"), message="third question")
    assert compaction_frames(frames) == []
    assert LONG in contents(s.chats(streaming=True)[-1].messages)

    # ~25K estimated tokens > 32K - 8K: compacted before the request.
    big = agent.session()
    big.turn([text("y" * 100_000), finish("stop"), usage()], message="first question")
    big.push_completion(reply(SUMMARY))
    frames = big.turn(answer("second answer"), message="second question")
    (begun, _) = compaction_frames(frames)
    assert begun[1] == {"phase": "pre_turn"}
    assert contents(big.chats(streaming=True)[-1].messages)[1:] == [
        SUMMARY_TEXT,
        "second question",
    ]


# ------------------------------------------------------------------------ overflow retry


def test_a_context_overflow_is_compacted_and_retried_once(agent: Agent) -> None:
    s = agent.session()
    s.turn(answer("first answer"), message="first question")
    s.push_completion(reply(SUMMARY))
    frames = s.turn(OVERFLOW, answer("recovered"), message="second question")
    assert not payloads(frames, "error")
    assert only(frames, "turn_complete")["status"] == "completed"
    (begun, completed) = compaction_frames(frames)
    assert begun[1] == {"phase": "mid_turn"}
    assert completed[1]["phase"] == "mid_turn"
    assert payloads(frames, "message_end")[-1]["content"] == "recovered"
    _, overflowed, retried = s.chats(streaming=True)
    assert contents(overflowed.messages)[1:] == [
        *("first question", "first answer", "second question"),
    ]
    assert contents(retried.messages)[1:] == [SUMMARY_TEXT, "second question"]
    assert agent.fake.pending(s.model) == 0


def test_a_second_overflow_in_the_same_turn_fails_it(agent: Agent) -> None:
    s = agent.session()
    s.turn(answer("first answer"), message="first question")
    s.push_completion(reply(SUMMARY), reply("never asked for"))
    frames = s.turn(OVERFLOW, OVERFLOW, answer("never sent"), message="second question")
    complete = only(frames, "turn_complete")
    assert complete["status"] == "failed" and complete["reason"] == "error"
    (error,) = payloads(frames, "error")
    assert "context" in error.lower(), error
    assert [kind for kind, _ in compaction_frames(frames)] == [
        "compaction_started",
        "compaction_completed",
    ]
    assert len(s.chats(streaming=True)) == 3, "one retry per turn"
    assert agent.fake.pending(s.model) == 1 and agent.fake.pending(s.model, streaming=False) == 1


# -------------------------------------------------------------------- accepted boundaries


def test_each_request_records_an_accepted_boundary_per_route(agent: Agent) -> None:
    s = agent.session()
    frames = s.turn(
        tools(call("c1", "bash", {"command": "echo hi"}), prompt=100, completion=20),
        [text("done"), finish("stop"), usage(150, 7, cached=40)],
        message="first question",
    )
    history = s.history()
    user, tool = history[0], history[2]
    route = route_of(s)
    first, second = payloads(frames, "context_request_accepted")
    # Reference §2: `{session_id, route, through_seq, …}`; more fields may follow.
    assert {key: first[key] for key in ("session_id", "route", "through_seq", "usage")} == {
        "session_id": s.id,
        "route": route,
        "through_seq": user["event_seq"],
        "usage": {
            "input_tokens": 100,
            "output_tokens": 20,
            "total_tokens": 120,
            "cached_tokens": 0,
        },
    }
    assert second["through_seq"] == tool["event_seq"]
    requests = s.chats(streaming=True)
    for accepted, request in zip((first, second), requests, strict=True):
        sent = json.dumps(request.messages, ensure_ascii=False)
        assert accepted["payload_bytes"] == len(sent)
    accepted_seq = [f.seq for f in frames if f.event == "context_request_accepted"][-1]
    assert boundaries(agent.data_dir, s.id) == {
        route: {
            "event_seq": accepted_seq,
            "through_seq": tool["event_seq"],
            "input_tokens": 150,
            "output_tokens": 7,
            "total_tokens": 157,
            "cached_tokens": 40,
            "payload_bytes": second["payload_bytes"],
        }
    }

    # Another model, then another connection: a row of their own; the first one is untouched.
    other_model = s.model + "-b"
    assert s.client.patch(f"/sessions/{s.id}", json={"model": other_model}).status_code == 200
    agent.fake.push(other_model, answer("from b", prompt=300, completion=3))
    s.turn(message="second question")
    second_connection = connect(agent.client, agent.fake, name="second")
    patched = s.client.patch(f"/sessions/{s.id}", json={"connection_id": second_connection["id"]})
    assert patched.status_code == 200
    agent.fake.push(other_model, answer("from c", prompt=400, completion=4))
    s.turn(message="third question")
    rows = boundaries(agent.data_dir, s.id)
    routes = {
        route: 150,
        route_of(s, model=other_model): 300,
        route_of(s, connection_id=second_connection["id"], model=other_model): 400,
    }
    assert {r: v["input_tokens"] for r, v in rows.items()} == routes
    assert rows[route]["event_seq"] == accepted_seq


# ------------------------------------------------------------------- restarts and repairs


@contextlib.contextmanager
def restartable(tmp_path: Path, fake: FakeProvider) -> Iterator[Restartable]:
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path / "procs")
        try:
            yield Restartable(launcher, root, fake)
        finally:
            launcher.close()


class Restartable:
    """A kernel on a data directory that outlives it; one session driven across restarts."""

    def __init__(self, launcher: Launcher, root: Path, fake: FakeProvider) -> None:
        self.launcher, self.root, self.fake = launcher, root, fake
        self.served: Served | None = None
        self.client: httpx.Client | None = None
        self.connection_id = ""
        self.row: dict[str, Any] = {}

    @property
    def data_dir(self) -> Path:
        return self.root / "r"

    def start(self) -> Session:
        self.served = unix_kernel(self.launcher, self.root, "r")
        self.client = self.served.client()
        self.client.timeout = httpx.Timeout(BOUND)
        if not self.connection_id:
            self.connection_id = connect(self.client, self.fake)["id"]
        agent = Agent(self.served, self.fake, self.client, self.connection_id)
        if not self.row:
            self.row = agent.session().row
        return Session(agent, self.row)

    def stop(self) -> None:
        assert self.served is not None and self.client is not None
        self.client.close()
        assert self.served.kernel.stop() == 0, self.served.kernel.describe()

    def store(self, fn: Any) -> Any:
        """Run `fn(store)` on the real store (kernel stopped)."""
        store = Store(self.data_dir)
        store.open()
        try:
            return asyncio.run(fn(store))
        finally:
            store.close()

    def events_of(self, kind: str) -> list[tuple[int, dict[str, Any]]]:
        found = db_rows(
            self.data_dir,
            "SELECT seq, payload_json FROM events WHERE session_id = ? AND kind = ? ORDER BY seq",
            (self.row["id"], kind),
        )
        return [(int(seq), json.loads(payload)) for seq, payload in found]


def three_exchanges_compacted(s: Session) -> dict[str, Any]:
    """u1 a1 u2 a2 u3 a3, then a compaction through a2."""
    two_exchanges(s)
    s.turn(answer("third answer"), message="third question")
    s.push_completion(reply(SUMMARY))
    response = compact_idle(s)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_corrupted_checkpoint_row_is_rebuilt_from_its_event(
    tmp_path: Path, fake: SlowFake
) -> None:
    with restartable(tmp_path, fake) as r:
        s = r.start()
        made = three_exchanges_compacted(s)
        assert (
            made["through_seq"] == by_role(s.history(), "assistant", "second answer")["event_seq"]
        )
        r.stop()
        db_write(
            r.data_dir,
            "UPDATE compaction_checkpoints SET checkpoint_json = '{not json' WHERE session_id = ?",
            (s.id,),
        )

        s = r.start()
        s.turn(answer("fourth answer"), message="fourth question")
        request = s.chats(streaming=True)[-1].messages
        assert contents(request)[1:] == [
            *(SUMMARY_TEXT, "third question", "third answer", "fourth question"),
        ]
        r.stop()
        ((seq, payload),) = r.events_of(k.COMPACTION_COMPLETED)
        row = checkpoint_row(r.data_dir, s.id)
        assert row is not None and row[0] == seq and json.loads(row[1]) == payload
        assert payload["id"] == made["checkpoint_id"]
        foya_check(r.data_dir)


def test_an_old_format_checkpoint_is_dropped_and_the_raw_history_used(
    tmp_path: Path, fake: SlowFake
) -> None:
    """No migration of old checkpoint formats: neither the row nor the event can be used."""
    with restartable(tmp_path, fake) as r:
        s = r.start()
        three_exchanges_compacted(s)
        r.stop()
        ((seq, payload),) = r.events_of(k.COMPACTION_COMPLETED)
        old = json.dumps({**payload, "version": 0})
        db_write(r.data_dir, "UPDATE events SET payload_json = ? WHERE seq = ?", (old, seq))
        db_write(
            r.data_dir,
            "UPDATE compaction_checkpoints SET checkpoint_json = '[]' WHERE session_id = ?",
            (s.id,),
        )
        s = r.start()
        s.turn(answer("fourth answer"), message="fourth question")
        request = s.chats(streaming=True)[-1].messages
        assert SUMMARY_TEXT not in contents(request)
        assert contents(request)[1:3] == ["first question", LONG]
        r.stop()
        assert checkpoint_row(r.data_dir, s.id) is None
        foya_check(r.data_dir)


def test_a_rewind_before_the_boundary_leaves_no_checkpoint(tmp_path: Path, fake: SlowFake) -> None:
    with restartable(tmp_path, fake) as r:
        s = r.start()
        three_exchanges_compacted(s)
        history = s.history()
        u2 = by_role(history, "user", "second question")
        r.stop()
        # A corrupted row, and a rewind at u2 (before the boundary at a2): no candidate left.
        db_write(
            r.data_dir,
            "UPDATE compaction_checkpoints SET checkpoint_json = 'garbage' WHERE session_id = ?",
            (s.id,),
        )
        head = history[-1]["event_seq"]
        r.store(lambda store: store.rewind(s.id, u2["event_seq"], head))
        s = r.start()
        assert [m["content"] for m in s.history()] == ["first question", LONG]
        s.turn(answer("again"), message="second question, again")
        request = s.chats(streaming=True)[-1].messages
        assert contents(request)[1:] == ["first question", LONG, "second question, again"]
        r.stop()
        assert checkpoint_row(r.data_dir, s.id) is None
        foya_check(r.data_dir)


def test_a_rewind_removes_the_boundaries_it_passes(tmp_path: Path, fake: SlowFake) -> None:
    with restartable(tmp_path, fake) as r:
        s = r.start()
        two_exchanges(s)  # model A: its boundary is at u2
        model_b = s.model + "-b"
        assert s.client.patch(f"/sessions/{s.id}", json={"model": model_b}).status_code == 200
        fake.push(model_b, answer("third answer"))
        s.turn(message="third question")  # model B: its boundary is at u3
        history = s.history()
        u2, u3 = history[2], history[4]
        route_a, route_b = route_of(s), route_of(s, model=model_b)
        rows = boundaries(r.data_dir, s.id)
        assert {route: v["through_seq"] for route, v in rows.items()} == {
            route_a: u2["event_seq"],
            route_b: u3["event_seq"],
        }
        r.stop()
        r.store(lambda store: store.rewind(s.id, u3["event_seq"], history[-1]["event_seq"]))
        s = r.start()
        assert list(boundaries(r.data_dir, s.id)) == [route_a]
        assert len(s.history()) == 4
        r.stop()
        foya_check(r.data_dir)
