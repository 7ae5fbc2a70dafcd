"""How a step runs its tools: tools declared
parallel run side by side, at most 5 at once, and their results are recorded in call order; a
session limited to some tools is offered and allowed only those; a sub-agent's `max_turns` caps
its steps; the loop guard holds back a call that keeps failing and ends a turn that repeats
itself.

A real in-process kernel with the fake provider. The parallel probe is a tool of this test,
added to the kernel's tool set the way kernel tools are: it only counts how many of its calls
are in flight, and never finishes on its own, so the counts do not depend on timing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_provider import answer, call, tools
from support.inprocess import InProcess, inprocess_kernel, tool_messages, turn

from app import events as k
from app.kernel.sessions import Session
from app.kernel.turns.loopguard import REPEAT_MAX, gate_text
from app.tools import ToolResult
from app.tools.base import Action, ToolContext, schema


class Probe:
    """A parallel tool: call `i` waits until `expected` calls are in flight (or, on the last
    batch, until released), then finishes after call `i + 1` of its batch, so that results
    complete in reverse order."""

    name = "probe"
    description = "test probe"
    parameters = schema({"i": {"type": "integer"}}, ["i"])
    parallel = True

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.ran: list[int] = []
        self.full = asyncio.Event()
        self.finished: dict[int, asyncio.Event] = {}

    def action(self, args: dict[str, Any]) -> Action:
        return "read"

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        i = int(args["i"])
        self.ran.append(i)
        self.finished[i] = asyncio.Event()
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            if i < 5:  # the first batch: all five must be running together
                if self.in_flight == 5:
                    self.full.set()
                await asyncio.wait_for(self.full.wait(), 10)
                if i < 4:
                    await self.finished[i + 1].wait()
            return ToolResult(f"probe {i} by {ctx.call_id} in {ctx.session}")
        finally:
            self.in_flight -= 1
            self.finished[i].set()


_models = itertools.count()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_kernel(tmp_path_factory.mktemp("tools") / "d") as rig:
        yield rig


def new_session(rig: InProcess, **columns: Any) -> Session:
    """A session with a model of its own (the fake provider keeps scripts per model)."""
    fields = {"connection_id": rig.connection, "model": f"model-{next(_models)}"}
    session = rig.run(rig.kernel.sessions.create(fields))
    if columns:
        rig.run(rig.kernel.sessions.save(session["id"], columns))
    return session


def test_parallel_calls_run_five_at_once_and_are_recorded_in_call_order(rig: InProcess) -> None:
    probe = Probe()
    rig.kernel.turns.tool_runner.tools.static["probe"] = probe
    try:
        session = new_session(rig)
        calls = [call(f"p{i}", "probe", {"i": i}) for i in range(7)]
        rig.fake.push(session["model"], tools(*calls), answer("done"))
        events = turn(rig, session["id"])
    finally:
        del rig.kernel.turns.tool_runner.tools.static["probe"]
    assert probe.most == 5
    assert sorted(probe.ran) == list(range(7))
    results = tool_messages(events)
    assert [m["tool_call_id"] for m in results] == [f"p{i}" for i in range(7)]
    assert results[0]["content"] == f"probe 0 by p0 in {session['id']}"
    ends = [e.payload["id"] for e in events if e.kind == k.TOOL_END]
    assert ends == [f"p{i}" for i in range(7)]


def test_a_call_between_parallel_ones_keeps_its_place(rig: InProcess, tmp_path: Path) -> None:
    session = new_session(rig)
    rig.fake.push(
        session["model"],
        tools(
            call("r1", "read", {"path": "a.txt"}),
            call("w1", "write", {"path": "a.txt", "content": "written"}),
            call("r2", "read", {"path": "a.txt"}),
        ),
        answer("done"),
    )
    rig.run(rig.kernel.sessions.save(session["id"], {"approval_mode": "full_access"}))
    results = tool_messages(turn(rig, session["id"]))
    assert [m["tool_call_id"] for m in results] == ["r1", "w1", "r2"]
    assert results[0].get("is_error") and "written" in results[2]["content"]


def test_a_session_limited_to_some_tools_is_offered_and_allowed_only_those(
    rig: InProcess,
) -> None:
    session = new_session(rig, allowed_tools_json=json.dumps(["read"]))
    rig.fake.push(session["model"], tools(call("b1", "bash", {"command": "echo hi"})), answer("ok"))
    results = tool_messages(turn(rig, session["id"]))
    assert results[0].get("is_error")
    assert "not allowed" in results[0]["content"]
    offered = [
        t["function"]["name"]
        for t in rig.fake.chats(session["model"], streaming=True)[-1].body["tools"]
    ]
    assert offered == ["read"]


def test_a_sub_agents_max_turns_ends_its_turn(rig: InProcess) -> None:
    session = new_session(rig, agent_max_turns=2)
    rig.fake.push(
        session["model"],
        tools(call("s1", "read", {"path": "one"})),
        tools(call("s2", "read", {"path": "two"})),
        answer("never asked for"),
    )
    events = turn(rig, session["id"])
    assert events[-1].payload["status"] == "failed"
    errors = [e.payload for e in events if e.kind == k.ERROR]
    assert errors == ["the agent reached its limit of 2 model steps"]
    assert rig.fake.pending(session["model"]) == 1


def test_a_call_that_keeps_failing_is_held_back_the_third_time(rig: InProcess) -> None:
    session = new_session(rig)
    same = {"path": "missing.txt"}
    rig.fake.push(
        session["model"],
        *(tools(call(f"m{i}", "read", same)) for i in range(3)),
        tools(call("m3", "read", {"path": "other.txt"})),
        answer("giving up"),
    )
    events = turn(rig, session["id"])
    contents = [m["content"] for m in tool_messages(events)]
    assert contents[2] == gate_text("read")
    assert contents[0] != gate_text("read") and contents[3] != gate_text("read")
    assert events[-1].payload["status"] == "completed"


def test_a_turn_that_repeats_itself_without_progress_fails(rig: InProcess, tmp_path: Path) -> None:
    session = new_session(rig)
    stored = rig.run(rig.kernel.sessions.row(session["id"]))["workspace"]
    assert stored is not None
    workspace = Path(stored)
    (workspace / "status.txt").write_text("still waiting\n")
    steps = [tools(call(f"s{i}", "read", {"path": "status.txt"})) for i in range(REPEAT_MAX + 1)]
    rig.fake.push(session["model"], *steps, answer("never asked for"))
    events = turn(rig, session["id"])
    assert len(tool_messages(events)) == REPEAT_MAX + 1
    assert events[-1].payload == {**events[-1].payload, "status": "failed", "reason": "error"}
    (error,) = [e.payload for e in events if e.kind == k.ERROR]
    assert "repeated the same tool calls" in error
    assert rig.fake.pending(session["model"]) == 1
