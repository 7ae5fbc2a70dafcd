"""Agent turns end to end.

A real `foya serve` on a Unix socket talks to the fake OpenAI-compatible provider of
`fake_provider.py` through a connection made with `POST /connections`. Events are read from the
session's SSE stream, opened before the turn is submitted. One kernel and one fake serve the
module; each test uses a session (and so a model name, hence a script queue) of its own. The
restart tests start kernels of their own on a data directory they can kill and reopen.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import (
    API_KEY,
    BOUND,
    Agent,
    FakeProvider,
    Script,
    Session,
    agent_kernel,
    answer,
    call,
    call_chunks,
    connect,
    drop,
    finish,
    garbage,
    http_error,
    kinds,
    only,
    payloads,
    reasoning,
    sleep,
    text,
    tool_call,
    tools,
    usage,
    wait,
)
from support.helpers import Launcher, short_tmpdir, wait_until
from support.streams_helpers import Served, unix_kernel

RUN_ID = re.compile(r"^[0-9a-f]{24}$")
TC = "turn_complete"
# The agent tools, the context tools, then background commands, sub-agents, tasks,
# questions and browser actions, then the web and MCP tools.
TOOL_NAMES = (
    {"bash", "read", "write", "edit", "delete", "rule_load", "memory_remember"}
    | {"skill_load", "skill_search", "skill_read_resource"}
    | {"bash_status", "bash_cancel", "read_tasks", "update_tasks", "ask_user"}
    | {"agent", "agent_search", "spawn_agent", "wait_agents", "read_agent_output"}
    | {"cancel_agent", "list_agents"}
    | {"web_search", "web_fetch", "tool_search", "mcp_list_resources", "mcp_read_resource"}
    | {"mcp_list_prompts", "mcp_get_prompt"}
    | {
        f"browser_{name}"
        for name in (
            "navigate",
            "snapshot",
            "click",
            "type",
            "press_key",
            "wait",
            "scroll",
            "extract",
            "screenshot",
        )
    }
)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("turns")) as agent:
        yield agent


# ------------------------------------------------------------------------------ event order


def test_event_order_of_a_turn_with_one_tool_call(agent: Agent) -> None:
    s = agent.session()
    step1: Script = [
        reasoning("Thinking "),
        reasoning("hard."),
        text("Let me "),
        text("check."),
        tool_call(0, "call_echo", "bash"),
        tool_call(0, arguments='{"comm'),
        tool_call(0, arguments='and": "echo '),
        tool_call(0, arguments='hi"}'),
        finish("tool_calls"),
        usage(100, 20, cached=7),
    ]
    frames = s.turn(step1, answer("It says hi.", prompt=150, completion=4), message="say hi")

    assert kinds(frames) == [
        "message_end",  # the user's message
        "turn_started",
        "reasoning_delta",
        "reasoning_delta",
        "message_delta",
        "message_delta",
        "tool_begin",
        "usage_updated",
        "message_end",  # assistant, with tool_calls
        "tool_update",  # queued, with the arguments
        "tool_update",  # running
        "tool_end",
        "message_end",  # the tool result
        "message_delta",
        "message_delta",
        "message_delta",
        "usage_updated",
        "message_end",  # the final assistant message
        "turn_complete",
    ], kinds(frames)
    relevant = [f for f in frames if f.event in kinds(frames)]
    user, started = relevant[0].data["payload"], relevant[1].data["payload"]
    assert user["role"] == "user" and user["content"] == "say hi"
    run_id = started["run_id"]
    assert RUN_ID.match(run_id), started
    assert set(started) == {"run_id", "started_at"}

    deltas = [f for f in frames if f.event in ("message_delta", "reasoning_delta")]
    assert [f.data["payload"] for f in deltas] == [
        "Thinking ",
        "hard.",
        "Let me ",
        "check.",
        "It ",
        "says ",
        "hi.",
    ]
    assert all(f.id == "0" and f.data["seq"] == 0 for f in deltas), "deltas are not stored"
    stored = [f for f in relevant if f not in deltas]
    assert all(f.id is not None and int(f.id) == f.seq > 0 for f in stored)
    assert [f.seq for f in stored] == sorted(f.seq for f in stored)
    assert all(f.data.get("run_id") == run_id for f in stored[1:]), (
        "stored turn events name the run"
    )

    # Foya's tool_begin, with the empty `input` the desktop's store reads (app/wire.py).
    assert only(frames, "tool_begin") == {
        "id": "call_echo",
        "name": "bash",
        "status": "queued",
        "input": "",
    }
    first_usage, second_usage = payloads(frames, "usage_updated")
    assert first_usage == {
        "model": s.model,
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "cached_tokens": 7,
    }
    assert second_usage["input_tokens"] == 150 and second_usage["output_tokens"] == 4

    ends = payloads(frames, "message_end")
    assistant, tool_message, final = ends[1], ends[2], ends[3]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "Let me check."
    assert assistant["reasoning"] == "Thinking hard."
    # The desktop's ChatMessage: the call's arguments as JSON text, queued until it runs.
    assert assistant["tool_calls"] == [
        {"id": "call_echo", "name": "bash", "input": '{"command": "echo hi"}', "status": "queued"}
    ]
    assert "turn_status" not in assistant, "only the final assistant message closes the turn"

    queued, running = payloads(frames, "tool_update")
    # Foya's tool card: `input` is the arguments' JSON text, the status one of the card's.
    assert queued == {
        "id": "call_echo",
        "name": "bash",
        "input": queued["input"],
        "status": "queued",
    }
    assert json.loads(queued["input"]) == {"command": "echo hi"}
    assert running == {**queued, "status": "running"}
    end = only(frames, "tool_end")
    assert end["id"] == "call_echo" and end["name"] == "bash"
    assert end["output"].startswith("hi\n") and not end.get("is_error")
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_echo"
    assert tool_message["content"] == end["output"]

    assert final["role"] == "assistant" and final["content"] == "It says hi."
    assert final["turn_status"] == "completed"
    assert final["turn_started_at"] == started["started_at"]
    assert final["turn_completed_at"] >= final["turn_started_at"]
    complete = only(frames, "turn_complete")
    assert complete["run_id"] == run_id and complete["status"] == "completed"
    assert complete["started_at"] == started["started_at"]
    assert complete["completed_at"] >= complete["started_at"]
    assert "reason" not in complete

    # Deltas never reach the store: a replay from 0 holds exactly the stored frames.
    replay = s.replay(lambda f: f.event == "turn_complete")
    assert [f.seq for f in replay if f.event in kinds(replay)] == [f.seq for f in stored]
    assert not {"message_delta", "reasoning_delta"} & {f.event for f in replay}

    s.wait_idle()
    history = s.history()
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1]["turn_status"] == "completed"
    assert agent.client.get(f"/sessions/{s.id}/usage").json() == second_usage


def test_phase_is_turn_while_running_and_idle_after(agent: Agent) -> None:
    s = agent.session()
    frames = s.turn(answer("Fine."))
    phases = [f.data["payload"]["phase"] for f in frames if f.event == "session_updated"]
    assert phases[0] == "turn", phases
    s.wait_idle()


def test_tool_results_go_back_to_the_model(agent: Agent) -> None:
    s = agent.session()
    (s.workspace / "notes.txt").write_text("remember the milk\n")
    frames = s.tool_turn(call("call_r", "read", {"path": "notes.txt"}), final="Milk.")
    output = only(frames, "tool_end")["output"]
    assert output == "remember the milk\n"

    first, second = s.chats()
    for request in (first, second):
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        assert request.streaming
        assert request.body["stream_options"] == {"include_usage": True}
        assert request.body["model"] == s.model
        names = {t["function"]["name"] for t in request.body["tools"]}
        assert names == TOOL_NAMES
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.messages[1]["content"] == "hello"
    roles = [m["role"] for m in second.messages]
    assert roles == ["system", "user", "assistant", "tool"], roles
    assistant, result = second.messages[2], second.messages[3]
    (requested,) = assistant["tool_calls"]
    assert requested["id"] == "call_r" and requested["function"]["name"] == "read"
    assert json.loads(requested["function"]["arguments"]) == {"path": "notes.txt"}
    assert result == {"role": "tool", "tool_call_id": "call_r", "content": output}


def test_the_session_reasoning_effort_reaches_the_provider(agent: Agent) -> None:
    s = agent.session(reasoning_effort="high")
    s.turn(answer("Thought hard."))
    assert s.chats()[0].body["reasoning_effort"] == "high"
    plain = agent.session()
    plain.turn(answer("Quick."))
    assert "reasoning_effort" not in plain.chats()[0].body


def test_several_tools_in_one_step_run_in_call_order(agent: Agent) -> None:
    s = agent.session()
    frames = s.tool_turn(
        call("c1", "write", {"path": "a.txt", "content": "1\n"}),
        call("c2", "bash", {"command": "cat a.txt; echo 2 >> a.txt"}),
        call("c3", "read", {"path": "a.txt"}),
    )
    step = kinds(frames)[kinds(frames).index("tool_begin") :]
    assert step[:13] == [
        "tool_begin",
        "tool_begin",
        "tool_begin",
        "usage_updated",
        "message_end",
        "tool_update",
        "tool_update",
        "tool_update",
        "tool_update",  # c1 running
        "tool_end",
        "message_end",
        "tool_update",  # c2 running: after c1's result
        "tool_end",
    ], step
    assert [p["id"] for p in payloads(frames, "tool_begin")] == ["c1", "c2", "c3"]
    ends = payloads(frames, "tool_end")
    assert [e["id"] for e in ends] == ["c1", "c2", "c3"]
    assert ends[1]["output"].startswith("1\n"), "bash ran after write"
    assert ends[2]["output"] == "1\n2\n", "read ran after bash"
    results = [m for m in s.chats()[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["c1", "c2", "c3"]
    assert [m["content"] for m in results] == [e["output"] for e in ends]


def test_unknown_tool_and_bad_arguments_are_tool_errors(agent: Agent) -> None:
    s = agent.session()
    bad_json: Script = [
        tool_call(0, "c1", "teleport", "{}"),
        tool_call(1, "c2", "bash"),
        tool_call(1, arguments='{"command": '),
        usage(),
        finish("tool_calls"),
    ]
    frames = s.turn(bad_json, answer("Sorry."))
    ends = {e["id"]: e for e in payloads(frames, "tool_end")}
    assert ends["c1"]["is_error"] and "teleport" in ends["c1"]["output"]
    assert ends["c2"]["is_error"]
    assert only(frames, "turn_complete")["status"] == "completed"


# ---------------------------------------------------------------------------- provider failures


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param([text("partial "), drop()], id="connection-closed"),
        pytest.param([text("partial "), garbage()], id="garbage"),
        pytest.param(
            [text("partial "), garbage('data: {"error": {"message": "overloaded"}}\n\n')],
            id="error-chunk",
        ),
    ],
)
def test_a_broken_stream_fails_the_turn_and_the_kernel_keeps_serving(
    agent: Agent, broken: Script
) -> None:
    s = agent.session()
    frames = s.turn(broken)
    assert kinds(frames) == [
        "message_end",
        "turn_started",
        "message_delta",
        "error",
        "message_end",
        "turn_complete",
    ], kinds(frames)
    (error,) = payloads(frames, "error")
    assert isinstance(error, str) and error
    complete = only(frames, "turn_complete")
    assert complete["status"] == "failed" and complete["reason"] == "error"
    partial = payloads(frames, "message_end")[-1]
    assert partial["role"] == "assistant" and partial["content"] == "partial "
    assert partial["turn_status"] == "failed"

    s.wait_idle()
    assert agent.client.get("/healthz").status_code == 200
    again = s.turn(answer("Back again."))
    assert only(again, "turn_complete")["status"] == "completed"
    assert s.history()[-1]["content"] == "Back again."


def test_a_rejected_key_fails_with_a_clear_message_without_the_key(agent: Agent) -> None:
    s = agent.session()
    frames = s.turn(http_error(401, f"Incorrect API key provided: {API_KEY}", "invalid_api_key"))
    (error,) = payloads(frames, "error")
    assert "key" in error.lower(), error
    assert API_KEY not in json.dumps([f.data for f in frames])
    complete = only(frames, "turn_complete")
    assert complete["status"] == "failed" and complete["reason"] == "error"
    assert len(s.chats()) == 1, "an auth failure is not retried"


def test_a_rate_limit_is_retried_then_completes(agent: Agent) -> None:
    s = agent.session()
    frames = s.turn(http_error(429, "slow down", headers={"retry-after": "0"}), answer("Made it."))
    assert not payloads(frames, "error")
    assert only(frames, "turn_complete")["status"] == "completed"
    assert payloads(frames, "message_end")[-1]["content"] == "Made it."
    assert len(s.chats()) == 2


def test_a_context_overflow_fails_the_turn_with_a_clear_message(agent: Agent) -> None:
    s = agent.session()
    overflow = http_error(
        400,
        "This model's maximum context length is 8192 tokens (context_length_exceeded)",
        "context_length_exceeded",
    )
    frames = s.turn(overflow)
    (error,) = payloads(frames, "error")
    assert "context" in error.lower(), error
    assert only(frames, "turn_complete")["status"] == "failed"


def test_a_session_whose_connection_was_deleted_moves_to_the_default(agent: Agent) -> None:
    """Its next turn binds it to the default language connection (app.kernel.binding), keeping
    its model (that connection lists none), and runs there."""
    other = connect(agent.client, agent.fake, name="doomed")
    s = agent.session(connection_id=other["id"])
    assert agent.client.delete(f"/connections/{other['id']}").status_code == 204
    frames = s.turn(answer("Still here."))
    bound = payloads(frames, "session_updated")[0]
    assert (bound["connection_id"], bound["model"]) == (agent.connection_id, s.model)
    assert only(frames, "turn_complete")["status"] == "completed"


# ----------------------------------------------------------------------- reconnect and delete


def test_a_client_joining_mid_generation_gets_a_snapshot_then_the_rest(agent: Agent) -> None:
    s = agent.session()
    gate = agent.fake.gate()
    s.push(
        [
            reasoning("Hmm. "),
            text("alpha "),
            text("beta "),
            wait(gate),
            text("gamma "),
            text("delta"),
            usage(),
            finish(),
        ]
    )
    with s.events() as first:
        s.submit()
        first.until(lambda f: f.event == "message_delta" and f.data["payload"] == "beta ")
        with s.events() as second:
            snapshot = second.next()
            gate.set()
            rest = second.until_kind("message_end", role="assistant")
        first.until_kind("turn_complete")
    assert snapshot.event == "message_snapshot", snapshot
    assert snapshot.id == "0", "a snapshot is not a stored event (id 0, as Foya)"
    body = snapshot.data["payload"]
    assert body["role"] == "assistant"
    assert body["content"] == "alpha beta "
    assert body["reasoning"] == "Hmm. "
    deltas = [f.data["payload"] for f in rest if f.event == "message_delta"]
    final = rest[-1].data["payload"]
    assert body["content"] + "".join(deltas) == final["content"] == "alpha beta gamma delta"

    # Once the turn is over, a new client gets no snapshot: its first frame is a real event.
    s.wait_idle()
    with s.events() as third:
        assert agent.client.patch(f"/sessions/{s.id}", json={"title": "t"}).status_code == 200
        assert third.next().event == "session_updated"


def test_deleting_a_session_cancels_its_running_turn_first(agent: Agent) -> None:
    s = agent.session()
    s.push([text("working "), wait(agent.fake.gate()), text("never"), finish()])
    with s.events() as events:
        s.submit()
        events.until_kind("message_delta")
        response = agent.client.delete(f"/sessions/{s.id}")
        assert response.status_code == 204, response.text
        rest = events.stream.rest()
    order = [f.event for f in rest if f.event != "session_updated"]
    assert order == [
        "turn_cancel_requested",
        "message_end",
        "turn_complete",
        "session_deleted",
    ], order
    cancel = next(f.data["payload"] for f in rest if f.event == "turn_cancel_requested")
    assert cancel["reason"] == "session_deleted"
    complete = next(f.data["payload"] for f in rest if f.event == "turn_complete")
    assert complete["status"] == "cancelled" and complete["reason"] == "session_deleted"
    assert agent.client.get(f"/sessions/{s.id}/history").status_code == 404
    wait_until(lambda: s.chats()[0].done, "the provider stream to be closed", BOUND)
    assert s.chats()[0].disconnected, "the provider stream was abandoned, not read to the end"


# ------------------------------------------------------------------------------------- restart


@pytest.fixture(scope="module")
def fake_for_restarts() -> Iterator[FakeProvider]:
    with FakeProvider.running() as fake:
        yield fake


@contextlib.contextmanager
def restartable(tmp_path: Path, fake: FakeProvider) -> Iterator[tuple[Launcher, Path, Served]]:
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path / "procs")
        try:
            served = unix_kernel(launcher, root, "r")
            with served.client() as client:
                connect(client, fake)
            yield launcher, root, served
        finally:
            launcher.close()


def snapshot_text(data_dir: Path, session: str) -> str:
    """The stored stream snapshot's text (read-only; the kernel keeps running)."""
    conn = sqlite3.connect(f"file:{data_dir / 'foya.db'}?mode=ro", uri=True)
    try:
        row = conn.execute(
            "SELECT message_json FROM stream_snapshots WHERE session_id = ?", (session,)
        ).fetchone()
    finally:
        conn.close()
    return str(json.loads(row[0]).get("content", "")) if row else ""


def stored_events(data_dir: Path, session: str) -> list[tuple[str, Any]]:
    """(kind, payload) of the session's stored events, in seq order (read-only)."""
    conn = sqlite3.connect(f"file:{data_dir / 'foya.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT kind, payload_json FROM events WHERE session_id = ? ORDER BY seq", (session,)
        ).fetchall()
    finally:
        conn.close()
    return [(kind, json.loads(payload) if payload else None) for kind, payload in rows]


def make_session(client: httpx.Client, approval_mode: str) -> dict[str, Any]:
    (connection,) = client.get("/connections").json()
    body = {"connection_id": connection["id"], "model": f"m-{approval_mode}-restart"}
    response = client.post("/sessions", json={**body, "approval_mode": approval_mode})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_restart_mid_stream_records_the_partial_reply_and_reruns_nothing(
    tmp_path: Path, fake_for_restarts: FakeProvider
) -> None:
    fake = fake_for_restarts
    with restartable(tmp_path, fake) as (launcher, root, served):
        with served.client() as client:
            row = make_session(client, "full_access")
            fake.push(
                row["model"],
                [
                    text("first part "),
                    sleep(0.4),  # longer than the 0.25 s snapshot interval
                    text("second part "),
                    wait(fake.gate()),
                    text("never sent"),
                    finish(),
                ],
            )
            s = Session(Agent(served, fake, client, row["connection_id"]), row)
            with s.events() as events:
                s.submit("write me something long")
                started = events.until_kind("turn_started")[-1].data["payload"]
                events.until(lambda f: f.data.get("payload") == "second part ")
                wait_until(
                    lambda: snapshot_text(served.data_dir, s.id) == "first part second part ",
                    "the stream snapshot",
                    BOUND,
                )
                served.kernel.proc.kill()  # SIGKILL by PID
                served.kernel.proc.wait(BOUND)
        assert len(fake.chats(row["model"])) == 1

        again = unix_kernel(launcher, root, "r")
        with again.client() as client:
            s = Session(Agent(again, fake, client, row["connection_id"]), row)
            assert s.get()["phase"] == "idle"
            history = s.history()
            assert [m["role"] for m in history] == ["user", "assistant"]
            partial = history[1]
            assert partial["content"] == "first part second part "
            assert partial["turn_status"] == "failed"
            assert partial["turn_reason"] == "interrupted"
            assert partial["turn_started_at"] == started["started_at"]
            assert client.get(f"/sessions/{s.id}/queue").json() == []
        assert len(fake.chats(row["model"])) == 1, "nothing is re-run after a restart"
        again.kernel.stop()
        completes = [p for kind, p in stored_events(again.data_dir, row["id"]) if kind == TC]
        assert completes == [
            {
                "run_id": started["run_id"],
                "started_at": started["started_at"],
                "completed_at": partial["turn_completed_at"],
                "status": "failed",
                "reason": "interrupted",
            }
        ]
        foya_check(again.data_dir)


def test_restart_while_a_tool_waits_for_approval_closes_the_turn_once(
    tmp_path: Path, fake_for_restarts: FakeProvider
) -> None:
    """A crash after a step that streamed long enough to be snapshotted, while its tool waits
    for approval: the step's reply is already stored, so recovery must not add it again, and
    the turn must still be closed with `turn_complete{failed, interrupted}`."""
    fake = fake_for_restarts
    with restartable(tmp_path, fake) as (launcher, root, served):
        with served.client() as client:
            row = make_session(client, "manual")
            step = [
                text("Writing "),
                sleep(0.4),
                text("the file."),
                *call_chunks(0, call("w1", "write", {"path": "f.txt", "content": "x"})),
                usage(),
                finish("tool_calls"),
            ]
            fake.push(row["model"], step)
            s = Session(Agent(served, fake, client, row["connection_id"]), row)
            with s.events() as events:
                s.submit()
                started = events.until_kind("turn_started")[-1].data["payload"]
                events.until_kind("approval_request")
                served.kernel.proc.kill()
                served.kernel.proc.wait(BOUND)

        again = unix_kernel(launcher, root, "r")
        with again.client() as client:
            s = Session(Agent(again, fake, client, row["connection_id"]), row)
            assert s.get()["phase"] == "idle"
            history = s.history()
            said = [m["content"] for m in history if m["role"] == "assistant"]
            assert said.count("Writing the file.") == 1, history
            assert not (s.workspace / "f.txt").exists()
        assert len(fake.chats(row["model"])) == 1
        again.kernel.stop()
        completes = [p for kind, p in stored_events(again.data_dir, row["id"]) if kind == TC]
        assert [(c["run_id"], c["status"], c.get("reason")) for c in completes] == [
            (started["run_id"], "failed", "interrupted")
        ], "the interrupted turn is closed exactly once"
        foya_check(again.data_dir)


def test_the_fake_splits_tool_calls_like_openai() -> None:
    """The fake's tool-call chunks: id and name once, then argument fragments."""
    chunks = tools(call("x", "bash", {"command": "ls -la /tmp"}))
    calls = [c.delta["tool_calls"][0] for c in chunks if hasattr(c, "delta") and c.delta]
    assert calls[0]["id"] == "x" and calls[0]["function"]["name"] == "bash"
    assert all("id" not in c and "name" not in c["function"] for c in calls[1:])
    joined = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(joined) == {"command": "ls -la /tmp"}
    assert len(calls) >= 3
