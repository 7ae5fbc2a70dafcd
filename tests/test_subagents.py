"""Sub-agents (Foya's `subagent` and `agents_test.go`): child sessions started
by a parent's tools or `POST …/agents`, their limits, token budget, cancel, deletion and restart.

The rules run on a real kernel in the test's process (tests/support/inprocess.py) with the fake
provider; one real `foya serve` checks the wire (routes, statuses, payloads, SSE, a SIGKILL
restart). Children use the agent `helper` (a file in the test's HOME) whose model is `CHILD`:
the fake answers them through `Responder`, by the words of their task (`HOLD <gate>` waits for
that gate, `SPEND <n>` reports n prompt tokens), so concurrent children never race for scripts.
Nothing here waits for time to pass: waits are for states, with an upper bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    BOUND,
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    Recorded,
    Script,
    Session,
    answer,
    call,
    connect,
    tools,
    wait,
)
from support.helpers import Launcher, base_env, short_tmpdir, wait_until
from support.inprocess import InProcess, inprocess_kernel, tool_messages, turn_events
from support.streams_helpers import Served, assert_error, is_title, unix_kernel

from app import events as k
from app.events import Event
from app.kernel.agents.errors import AgentRunFailed
from app.kernel.agents.limits import MAX_CHILDREN_PER_ROOT, AgentLimits
from app.kernel.agents.package import ContextSelection
from app.kernel.agents.runs import AgentRunSnapshot
from app.kernel.agents.service import BUDGET_SPENT, SpawnRequest
from app.kernel.emit import topic

CHILD = "child-model"
HELPER = f"""---
name: helper
description: Answers delegated questions
model: {CHILD}
tools: [read]
---
You help. Answer in one line.
"""
HASTY = f"""---
name: hasty
description: Must answer at once
model: {CHILD}
max_turns: 3
timeout: 50ms
---
Be quick.
"""
_models = itertools.count()


class Responder:
    """The fake's answers to requests no script was pushed for: children by their task,
    parents by a plan of the test's (`plans[model]`)."""

    def __init__(self, fake: FakeProvider) -> None:
        self.fake = fake
        self.gates: dict[str, threading.Event] = {}
        self.plans: dict[str, Callable[[Recorded], Script]] = {}

    def gate(self, name: str) -> threading.Event:
        self.gates[name] = self.fake.gate()
        return self.gates[name]

    def __call__(self, record: Recorded) -> Script | None:
        if record.model in self.plans:
            return self.plans[record.model](record)
        if record.model != CHILD:
            return None
        task = task_of(record)
        held = re.search(r"HOLD (\S+)", task)
        if held:
            return [wait(self.gates[held.group(1)]), *answer(f"released {held.group(1)}")]
        spent = re.search(r"SPEND (\d+)", task)
        if spent:
            return answer("spent", prompt=int(spent.group(1)), completion=0)
        return answer(f"did: {task}")


def task_of(record: Recorded) -> str:
    users = [m for m in record.messages if m.get("role") == "user"]
    return str(users[0].get("content")) if users else ""


def child_requests(fake: FakeProvider, word: str) -> list[Recorded]:
    return [r for r in fake.chats(CHILD) if word in task_of(r)]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    (home / ".agents" / "agents").mkdir(parents=True)
    (home / ".agents" / "agents" / "helper.md").write_text(HELPER)
    (home / ".foya" / "agents").mkdir(parents=True)
    (home / ".foya" / "agents" / "hasty.md").write_text(HASTY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        yield home


@contextlib.contextmanager
def kernel_rig(data_dir: Path) -> Iterator[tuple[InProcess, Responder]]:
    with inprocess_kernel(data_dir) as rig:
        responder = Responder(rig.fake)
        rig.fake.respond = responder
        yield rig, responder


@pytest.fixture(scope="module")
def rigged(
    home: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[InProcess, Responder]]:
    with kernel_rig(tmp_path_factory.mktemp("subagents") / "d") as pair:
        yield pair


@pytest.fixture
def rig(rigged: tuple[InProcess, Responder]) -> Iterator[InProcess]:
    rig = rigged[0]
    before = rig.kernel.agents.limits()
    yield rig
    rig.run(rig.kernel.agents.set_limits(before))


@pytest.fixture
def responder(rigged: tuple[InProcess, Responder]) -> Responder:
    return rigged[1]


def new_parent(rig: InProcess) -> dict[str, Any]:
    fields = {"connection_id": rig.connection, "model": f"parent-{next(_models)}"}
    session = rig.run(rig.kernel.sessions.create(fields))
    return dict(rig.run(rig.kernel.sessions.update(session["id"], {"title": "parent"})))


def spawn(rig: InProcess, parent: str, task: str, **fields: Any) -> AgentRunSnapshot:
    request = SpawnRequest(task=task, agent_ref=fields.pop("agent_ref", "helper"), **fields)
    return rig.run(rig.kernel.agents.spawn(parent, request))


def run_of(rig: InProcess, parent: str, run_id: str) -> dict[str, Any]:
    return dict(rig.run(rig.kernel.agents.get(parent, run_id)))


def wait_status(rig: InProcess, parent: str, run_id: str, status: str) -> dict[str, Any]:
    wait_until(lambda: run_of(rig, parent, run_id)["status"] == status, f"run {status}", BOUND)
    return run_of(rig, parent, run_id)


def stored(rig: InProcess, session: str, *kinds: str) -> list[Event]:
    events = rig.run(rig.kernel.store.events_after(0, 10_000, session))
    return [e for e in events if not kinds or e.kind in kinds]


def run_files(rig: InProcess) -> list[str]:
    directory = rig.kernel.settings.data_dir / "agent-runs"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def lifecycle(rig: InProcess, parent: str, run_id: str) -> list[str]:
    """The kinds of the parent's `subagent_*` events about one run, in order."""
    runs = [e for e in stored(rig, parent) if e.kind.startswith("subagent_")]
    return [e.kind for e in runs if e.payload["id"] == run_id]


# ----------------------------------------------------------------------------- the agent tool


def test_three_agent_calls_of_one_step_run_side_by_side(
    rig: InProcess, responder: Responder
) -> None:
    gate = responder.gate("trio")
    parent = new_parent(rig)
    calls = [
        call(f"a{i}", "agent", {"task": f"HOLD trio part {i}", "agent": "helper"}) for i in range(3)
    ]
    rig.fake.push(parent["model"], tools(*calls), answer("all three answered"))
    turn = asyncio.run_coroutine_threadsafe(turn_events(rig, parent["id"], "delegate"), rig.loop)
    # All three children are asking the model at once before any of them may answer.
    wait_until(lambda: len(child_requests(rig.fake, "HOLD trio")) == 3, "three children", BOUND)
    gate.set()
    events = turn.result(BOUND)

    assert events[-1].payload["status"] == "completed"
    run_id = events[-1].payload["run_id"]
    results = tool_messages(events)
    assert [m["tool_call_id"] for m in results] == ["a0", "a1", "a2"]
    children = {c["id"]: c for c in rig.run(rig.kernel.sessions.children(parent["id"]))}
    for i, message in enumerate(results):
        result = json.loads(message["content"])
        assert not message.get("is_error")
        assert result["status"] == "completed" and result["output"] == "released trio"
        assert (result["agent_ref"], result["agent_name"]) == ("user:helper", "helper")
        child = children[result["child_session_id"]]
        assert child["parent_id"] == parent["id"]
        assert child["spawned_by"] == {"parent_run_id": run_id, "parent_tool_call_id": f"a{i}"}
        assert (child["agent_ref"], child["agent_name"]) == ("user:helper", "helper")
        assert child["model"] == CHILD and child["title"] == f"helper: HOLD trio part {i}"
        row = rig.run(rig.kernel.sessions.row(child["id"]))
        assert row["allowed_tools_json"] is not None
        assert json.loads(row["allowed_tools_json"]) == ["read"]
        assert row["agent_max_turns"] == 20
        assert row["agent_instructions"] == "You help. Answer in one line."
    offered = [
        t["function"]["name"] for t in child_requests(rig.fake, "HOLD trio")[0].body["tools"]
    ]
    assert offered == ["read"]  # a child never gets the agent tools

    runs = rig.run(rig.kernel.agents.listing(parent["id"]))
    assert sorted(r["parent_tool_call_id"] for r in runs) == ["a0", "a1", "a2"]
    assert {r["root_run_id"] for r in runs} == {run_id}
    for run in runs:
        assert run["depth"] == 1 and run["root_session_id"] == parent["id"]
        assert lifecycle(rig, parent["id"], run["id"]) == [
            k.SUBAGENT_QUEUED,
            k.SUBAGENT_RUNNING,
            k.SUBAGENT_STARTED,
            k.SUBAGENT_COMPLETED,
        ]


def test_the_model_spawns_then_waits_for_its_children(rig: InProcess) -> None:
    parent = new_parent(rig)

    def plan(record: Recorded) -> Script:
        results = [m for m in record.messages if m.get("role") == "tool"]
        if not results:
            spawns = [
                call(f"s{i}", "spawn_agent", {"task": f"part {i}", "agent": "helper"})
                for i in range(2)
            ]
            return tools(*spawns)
        if len(results) == 2:
            ids = [json.loads(m["content"])["id"] for m in results]
            return tools(call("w", "wait_agents", {"ids": ids, "mode": "all"}))
        return answer("both parts are done")

    rigged_responder = rig.fake.respond
    assert isinstance(rigged_responder, Responder)
    rigged_responder.plans[parent["model"]] = plan
    events = rig.run(turn_events(rig, parent["id"], "split the work"))
    spawned, waited = tool_messages(events)[:2], tool_messages(events)[2]
    assert [json.loads(m["content"])["status"] for m in spawned] == ["queued", "queued"]
    outcome = json.loads(waited["content"])
    assert [(r["status"], r["output"]) for r in outcome] == [
        ("completed", "did: part 0"),
        ("completed", "did: part 1"),
    ]
    assert events[-1].payload["status"] == "completed"


def test_stopping_the_parent_turn_stops_the_child_it_waits_for(
    rig: InProcess, responder: Responder
) -> None:
    responder.gate("stop")
    parent = new_parent(rig)
    rig.fake.push(
        parent["model"], tools(call("a", "agent", {"task": "HOLD stop", "agent": "helper"}))
    )
    turn = asyncio.run_coroutine_threadsafe(turn_events(rig, parent["id"], "delegate"), rig.loop)
    wait_until(lambda: len(child_requests(rig.fake, "HOLD stop")) == 1, "the child", BOUND)
    rig.run(rig.kernel.turns.cancel(parent["id"]))  # POST /sessions/{id}/cancel
    events = turn.result(BOUND)
    assert events[-1].payload["status"] == "cancelled"
    (run,) = rig.run(rig.kernel.agents.listing(parent["id"]))
    (run,) = rig.run(rig.kernel.agents.wait(parent["id"], [run["id"]], "all"))
    assert run["status"] == "cancelled" and run["parent_tool_call_id"] == "a"
    (complete,) = stored(rig, run["child_session_id"], k.TURN_COMPLETE)
    assert complete.payload["status"] == "cancelled"


def test_a_definitions_timeout_and_max_turns(rig: InProcess, responder: Responder) -> None:
    responder.gate("slow")
    parent = new_parent(rig)["id"]
    run = spawn(rig, parent, "HOLD slow", agent_ref="hasty")
    (run,) = rig.run(rig.kernel.agents.wait(parent, [run["id"]], "all"))
    assert (run["status"], run["agent_ref"]) == ("failed", "user:hasty")
    assert run["error"] == "the agent did not finish within its timeout of 0.05 s"
    row = rig.run(rig.kernel.sessions.row(run["child_session_id"]))
    assert row["agent_max_turns"] == 3
    (complete,) = stored(rig, run["child_session_id"], k.TURN_COMPLETE)
    assert complete.payload["status"] == "cancelled"


def test_a_child_is_told_its_agents_instructions(rig: InProcess) -> None:
    parent = new_parent(rig)["id"]
    run = spawn(rig, parent, "introduce yourself")
    rig.run(rig.kernel.agents.wait(parent, [run["id"]], "all"))
    (request,) = child_requests(rig.fake, "introduce yourself")
    assert "You help. Answer in one line." in request.messages[0]["content"]


# ------------------------------------------------------------------------- waiting and cancel


def test_wait_any_wait_all_and_cancelling_one(rig: InProcess, responder: Responder) -> None:
    held, other = responder.gate("w1"), responder.gate("w2")
    parent = new_parent(rig)["id"]
    quick = spawn(rig, parent, "quick one")
    first = spawn(rig, parent, "HOLD w1")
    second = spawn(rig, parent, "HOLD w2")
    assert quick["status"] == "queued" and quick["agent_ref"] == "user:helper"
    ids = [quick["id"], first["id"], second["id"]]

    some = rig.run(rig.kernel.agents.wait(parent, ids, "any"))
    assert some[0]["status"] == "completed" and some[0]["output"] == "did: quick one"
    assert some[1]["status"] in ("queued", "running") and some[2]["status"] in ("queued", "running")

    wait_until(lambda: len(child_requests(rig.fake, "HOLD w1")) == 1, "the held child", BOUND)
    rig.run(rig.kernel.agents.cancel(parent, first["id"]))
    other.set()
    done = rig.run(rig.kernel.agents.wait(parent, ids, "all"))
    assert [r["status"] for r in done] == ["completed", "cancelled", "completed"]
    assert done[1]["error"] == "the agent run was cancelled"
    assert done[2]["output"] == "released w2"
    # The cancelled child's own turn ended cancelled, its provider stream closed.
    (complete,) = stored(rig, done[1]["child_session_id"], k.TURN_COMPLETE)
    assert complete.payload["status"] == "cancelled"
    wait_until(lambda: child_requests(rig.fake, "HOLD w1")[0].disconnected, "hang-up", BOUND)
    assert not held.is_set()
    # A run that has ended stays as it is.
    rig.run(rig.kernel.agents.cancel(parent, quick["id"]))
    assert run_of(rig, parent, quick["id"])["status"] == "completed"


def test_the_per_root_cap_queue_and_a_user_stop_reach_the_whole_tree(
    rig: InProcess, responder: Responder
) -> None:
    responder.gate("cap")
    limits: AgentLimits = {"max_global_concurrency": 4, "max_per_root": 2, "max_tree_tokens": 0}
    rig.run(rig.kernel.agents.set_limits(limits))
    parent = new_parent(rig)["id"]
    runs = [
        spawn(rig, parent, "HOLD cap", root_run_id="root-cap") for _ in range(MAX_CHILDREN_PER_ROOT)
    ]
    with pytest.raises(AgentRunFailed, match="too many children per root run"):
        spawn(rig, parent, "one too many", root_run_id="root-cap")
    # Another root is not held back by the first one's queue.
    elsewhere = spawn(rig, parent, "HOLD cap", root_run_id="root-other")
    wait_until(lambda: len(child_requests(rig.fake, "HOLD cap")) == 3, "3 running", BOUND)
    statuses = [run_of(rig, parent, r["id"])["status"] for r in runs]
    assert statuses.count("running") == 2 and statuses.count("queued") == 62
    assert run_of(rig, parent, elsewhere["id"])["status"] == "running"

    rig.run(rig.kernel.turns.cancel(parent))  # POST /sessions/{id}/cancel
    ids = [r["id"] for r in [*runs, elsewhere]]
    done = rig.run(rig.kernel.agents.wait(parent, ids, "all"))
    assert {r["status"] for r in done} == {"cancelled"}
    assert sum(1 for r in done if "child_session_id" in r) == 3  # queued ones never had one
    assert lifecycle(rig, parent, runs[-1]["id"]) == [k.SUBAGENT_QUEUED, k.SUBAGENT_CANCELLED]


def test_the_token_budget_of_a_tree(rig: InProcess, responder: Responder) -> None:
    responder.gate("budget")
    limits: AgentLimits = {"max_global_concurrency": 4, "max_per_root": 4, "max_tree_tokens": 100}
    rig.run(rig.kernel.agents.set_limits(limits))
    parent = new_parent(rig)["id"]
    first = spawn(rig, parent, "SPEND 60", root_run_id="tree-b")
    (first,) = rig.run(rig.kernel.agents.wait(parent, [first["id"]], "all"))
    assert (first["status"], first["tokens_used"]) == ("completed", 60)
    held = spawn(rig, parent, "HOLD budget", root_run_id="tree-b")
    wait_until(lambda: len(child_requests(rig.fake, "HOLD budget")) == 1, "held child", BOUND)
    over = spawn(rig, parent, "SPEND 60", root_run_id="tree-b")
    done = rig.run(rig.kernel.agents.wait(parent, [held["id"], over["id"]], "all"))
    assert [(r["status"], r["error"]) for r in done] == [("cancelled", BUDGET_SPENT)] * 2
    assert {r["tokens_used"] for r in done} == {120}

    budget = rig.run(rig.kernel.agents.budget(parent))
    assert budget == {
        "root_session_id": parent,
        "root_run_id": "tree-b",
        "tokens_used": 120,
        "max_tokens": 100,
        "exceeded": True,
    }
    updates = [e.payload["tokens_used"] for e in stored(rig, parent, k.AGENT_BUDGET_UPDATED)]
    assert updates == [60, 120]
    (exceeded,) = stored(rig, parent, k.AGENT_BUDGET_EXCEEDED)
    assert exceeded.payload == budget
    with pytest.raises(AgentRunFailed, match="token budget"):
        spawn(rig, parent, "more", root_run_id="tree-b")
    # Another tree has a budget of its own.
    fresh = spawn(rig, parent, "SPEND 1", root_run_id="tree-c")
    assert "tokens_used" not in fresh
    (fresh,) = rig.run(rig.kernel.agents.wait(parent, [fresh["id"]], "all"))
    assert (fresh["status"], fresh["tokens_used"]) == ("completed", 1)


def test_deleting_the_parent_cancels_its_runs_and_forgets_them(
    rig: InProcess, responder: Responder
) -> None:
    responder.gate("gone")
    parent = new_parent(rig)["id"]
    run = spawn(rig, parent, "HOLD gone")
    wait_until(lambda: len(child_requests(rig.fake, "HOLD gone")) == 1, "running child", BOUND)
    child = run_of(rig, parent, run["id"])["child_session_id"]
    events: list[Event] = []

    async def delete() -> None:
        with rig.kernel.broker.subscribe(topic(parent)) as sub:
            await rig.kernel.delete_session(parent)
            while (event := sub.queue.get_nowait() if not sub.queue.empty() else None) is not None:
                events.append(event)

    rig.run(delete())
    assert [e.payload["status"] for e in events if e.kind == k.SUBAGENT_CANCELLED] == ["cancelled"]
    assert rig.run(rig.kernel.store.get_session(child)) is None
    assert run["id"] not in rig.kernel.agents.runs
    assert not (rig.kernel.settings.data_dir / "agent-runs" / f"{run['id']}.json").exists()
    wait_until(lambda: child_requests(rig.fake, "HOLD gone")[0].disconnected, "hang-up", BOUND)


# --------------------------------------------------------------------------------- bad input


def test_a_refused_spawn_changes_nothing(rig: InProcess) -> None:
    parent = new_parent(rig)["id"]
    refusals = [
        (SpawnRequest(task="  "), "task is required"),
        (SpawnRequest(task="x", agent_ref="nobody"), 'unknown agent "nobody"'),
        (SpawnRequest(task="x" * (256 * 1024 + 1)), "longer than"),
        (
            SpawnRequest(task="x", context=ContextSelection("selected", (999_999,))),
            "selected parent messages were not found",
        ),
    ]
    before = run_files(rig)
    for request, reason in refusals:
        with pytest.raises(AgentRunFailed, match=reason):
            rig.run(rig.kernel.agents.spawn(parent, request))
    assert rig.run(rig.kernel.agents.listing(parent)) == []
    assert [e for e in stored(rig, parent) if e.kind.startswith("subagent_")] == []
    assert run_files(rig) == before
    assert rig.run(rig.kernel.sessions.children(parent)) == []


# ---------------------------------------------------------------------------------- restart


def test_a_restart_marks_unfinished_runs_interrupted_and_runs_none_again(
    home: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "d"
    limits: AgentLimits = {"max_global_concurrency": 3, "max_per_root": 1, "max_tree_tokens": 500}
    with kernel_rig(data_dir) as (rig, responder):
        responder.gate("restart")
        rig.run(rig.kernel.agents.set_limits(limits))
        parent = new_parent(rig)["id"]
        done = spawn(rig, parent, "finished before")
        rig.run(rig.kernel.agents.wait(parent, [done["id"]], "all"))
        running = spawn(rig, parent, "HOLD restart", root_run_id="r")
        queued = spawn(rig, parent, "HOLD restart", root_run_id="r")
        wait_until(lambda: len(child_requests(rig.fake, "HOLD restart")) == 1, "running", BOUND)
        child = run_of(rig, parent, running["id"])["child_session_id"]
    with kernel_rig(data_dir) as (rig, _):
        assert rig.kernel.agents.limits() == limits
        runs = {r["id"]: r for r in rig.run(rig.kernel.agents.listing(parent))}
        assert runs[done["id"]]["status"] == "completed"
        for run_id in (running["id"], queued["id"]):
            assert runs[run_id]["status"] == "interrupted"
            assert runs[run_id]["error"] == "kernel restarted before the agent run completed"
        interrupted = [e.payload["id"] for e in stored(rig, parent, k.SUBAGENT_INTERRUPTED)]
        assert sorted(interrupted) == sorted([running["id"], queued["id"]])
        # Nothing is run again: no turn of the child started after the restart.
        child_row = rig.run(rig.kernel.sessions.get(child))
        assert child_row["phase"] == "idle"
        assert len(stored(rig, child, k.TURN_STARTED)) == 1
        assert rig.fake.chats(CHILD) == []
        waited = rig.run(rig.kernel.agents.wait(parent, [running["id"]], "all"))
        assert waited[0]["status"] == "interrupted"  # answered at once


# ------------------------------------------------------------------------------------ the wire


PROJECT_AGENT = "---\nname: project-reviewer\ndescription: Reviews this project\n---\nReview.\n"


@dataclass
class Wire:
    """A real `foya serve` (Unix socket, HOME of the test's) with the fake connected."""

    launcher: Launcher
    root: Path
    env: dict[str, str]
    fake: FakeProvider
    responder: Responder
    served: Served
    client: httpx.Client
    connection: str

    def restart(self, sig: int) -> None:
        """Stop the kernel with `sig` and start it again on the same data dir."""
        self.client.close()
        self.served.kernel.stop(sig)
        self.served = unix_kernel(self.launcher, self.root, "k", env=self.env)
        self.client = self.served.client()
        self.client.timeout = httpx.Timeout(READ_TIMEOUT)

    def parent(self) -> Session:
        return Agent(self.served, self.fake, self.client, self.connection).session()

    def again(self, session: Session) -> Session:
        """`session` on the current kernel (after a restart)."""
        return Session(Agent(self.served, self.fake, self.client, self.connection), session.row)


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    base = tmp_path_factory.mktemp("wire")
    home = base / "home"  # one agent of the user's own, as in Foya's acceptance test
    (home / ".agents" / "agents").mkdir(parents=True)
    (home / ".agents" / "agents" / "helper.md").write_text(HELPER)
    project = base / "project"
    (project / ".agents" / "agents").mkdir(parents=True)
    (project / ".agents" / "agents" / "r.md").write_text(PROJECT_AGENT)
    env = base_env(HOME=str(home), FOYA_AGENT_MAX_PER_ROOT="3")
    launcher = Launcher(base / "procs")
    try:
        with FakeProvider.running() as fake, short_tmpdir() as root:
            responder = Responder(fake)
            fake.respond = responder
            served = unix_kernel(launcher, root, "k", env=env)
            client = served.client()
            client.timeout = httpx.Timeout(READ_TIMEOUT)
            connection = connect(client, fake)["id"]
            created = client.post("/projects", json={"path": str(project), "name": "p"})
            assert created.status_code == 201, created.text
            wire = Wire(launcher, root, env, fake, responder, served, client, connection)
            try:
                yield wire
            finally:
                wire.client.close()
    finally:
        launcher.close()


def project_id(wire: Wire) -> str:
    return str(wire.client.get("/projects").json()[0]["id"])


def test_wire_definitions_as_foya_lists_them(wire: Wire) -> None:
    listed = wire.client.get("/agents")
    assert listed.status_code == 200
    assert [a["ref"] for a in listed.json()] == [
        "user:helper",
        "builtin:explorer",
        "builtin:researcher",
        "builtin:worker",
    ]
    helper = listed.json()[0]
    assert helper["model"] == CHILD and helper["tools"] == ["read"]
    assert helper["path"] == str(Path(wire.env["HOME"]) / ".agents" / "agents" / "helper.md")
    assert set(listed.json()[1]) == {"ref", "name", "description", "scope", "tools", "digest"}
    pid = project_id(wire)
    scoped = wire.client.get(f"/projects/{pid}/agents")
    assert scoped.status_code == 200 and len(scoped.json()) == 5
    assert scoped.json()[0]["ref"] == f"project:{pid}:project-reviewer"
    assert_error(wire.client.get("/projects/nope/agents"), 404, "project_not_found")


def test_wire_limits_persist_and_bad_limits_change_nothing(wire: Wire) -> None:
    assert wire.client.get("/settings/agent-limits").json() == {
        "max_global_concurrency": 4,
        "max_per_root": 3,  # FOYA_AGENT_MAX_PER_ROOT
        "max_tree_tokens": 0,
    }
    want = {"max_global_concurrency": 6, "max_per_root": 3, "max_tree_tokens": 150_000}
    put = wire.client.put("/settings/agent-limits", json=want)
    assert put.status_code == 200 and put.json() == want
    path = wire.served.data_dir / "agent-limits.json"
    stored_bytes = path.read_bytes()
    assert json.loads(stored_bytes) == want and path.stat().st_mode & 0o777 == 0o600
    bad = [
        ({**want, "max_depth": 1}, "bad_request"),
        ({**want, "max_global_concurrency": 0}, "agent_limits_update_failed"),
        ({**want, "max_per_root": 257}, "agent_limits_update_failed"),
        ({**want, "max_tree_tokens": -1}, "agent_limits_update_failed"),
        ({"max_per_root": 2}, "agent_limits_update_failed"),  # a missing field counts as 0
        ({**want, "max_per_root": "many"}, "bad_request"),
    ]
    for body, code in bad:
        assert_error(wire.client.put("/settings/agent-limits", json=body), 400, code)
    assert wire.client.get("/settings/agent-limits").json() == want
    assert path.read_bytes() == stored_bytes
    wire.restart(signal.SIGTERM)
    assert wire.client.get("/settings/agent-limits").json() == want


def test_wire_a_run_from_post_to_its_answer(wire: Wire) -> None:
    parent = wire.parent()
    runs = f"/sessions/{parent.id}/agents"
    with parent.events() as events:
        started = wire.client.post(runs, json={"task": "quick wire", "agent_ref": "helper"})
        assert started.status_code == 202, started.text
        run = started.json()
        frames = events.until(
            lambda f: f.event == "subagent_completed" and f.data["payload"]["id"] == run["id"]
        )
    assert run["status"] == "queued" and re.fullmatch(r"[0-9a-f]{24}", run["root_run_id"])
    assert {k: run[k] for k in ("parent_session_id", "root_session_id", "task", "depth")} == {
        "parent_session_id": parent.id,
        "root_session_id": parent.id,
        "task": "quick wire",
        "depth": 1,
    }
    mine = [f for f in frames if f.event and f.event.startswith("subagent_")]
    assert [f.event for f in mine] == [
        "subagent_queued",
        "subagent_running",
        "subagent_started",
        "subagent_completed",
    ]
    done = mine[-1].data["payload"]
    assert done["status"] == "completed" and done["output"] == "did: quick wire"
    assert done["tokens_used"] == 15 and done["started_at"] and done["completed_at"]
    assert wire.client.get(runs).json() == [done]
    assert wire.client.get(f"{runs}/{run['id']}").json() == done
    waited = wire.client.post(f"{runs}/wait", json={"ids": [run["id"]], "mode": "any"})
    assert waited.status_code == 200 and waited.json() == [done]
    (child,) = wire.client.get(f"/sessions/{parent.id}/children").json()
    assert child["id"] == done["child_session_id"]
    assert child["spawned_by"] == {"parent_run_id": run["root_run_id"], "parent_tool_call_id": ""}
    assert (child["agent_ref"], child["agent_name"]) == ("user:helper", "helper")
    budget = wire.client.get(f"/sessions/{parent.id}/agent-budget").json()
    assert {
        k: budget[k] for k in ("root_session_id", "root_run_id", "tokens_used", "exceeded")
    } == {
        "root_session_id": parent.id,
        "root_run_id": run["root_run_id"],
        "tokens_used": 15,
        "exceeded": False,
    }
    assert wire.client.post(f"{runs}/{run['id']}/cancel").status_code == 204


def test_wire_bad_input_is_refused_and_changes_nothing(wire: Wire) -> None:
    parent = wire.parent()
    runs = f"/sessions/{parent.id}/agents"
    refused = [
        (wire.client.post(runs, json={"task": ""}), 400, "agent_run_failed"),
        (
            wire.client.post(runs, json={"task": "x", "agent_ref": "nobody"}),
            400,
            "agent_run_failed",
        ),
        (
            wire.client.post(runs, json={"task": "x", "context": {"mode": "all"}}),
            400,
            "bad_request",
        ),
        (wire.client.post("/sessions/nope/agents", json={"task": "x"}), 404, "not_found"),
        (wire.client.get(f"{runs}/nope"), 404, "not_found"),
        (wire.client.post(f"{runs}/nope/cancel"), 404, "not_found"),
        (wire.client.post(f"{runs}/wait", json={"ids": ["nope"]}), 404, "not_found"),
        (wire.client.post(f"{runs}/wait", json={"ids": [], "mode": "some"}), 400, "bad_request"),
        (wire.client.get("/sessions/nope/agent-budget"), 404, "not_found"),
    ]
    for response, status, code in refused:
        assert_error(response, status, code)
    assert wire.client.get(runs).json() == []
    assert wire.client.get(f"/sessions/{parent.id}/children").json() == []
    marked = wire.client.patch(f"/sessions/{parent.id}", json={"title": "after the refusals"})
    assert marked.status_code == 200
    replayed = parent.replay(is_title("after the refusals"))
    assert not [f for f in replayed if (f.event or "").startswith("subagent_")]


def test_wire_a_crash_leaves_its_runs_interrupted(wire: Wire) -> None:
    wire.responder.gate("crash")
    parent = wire.parent()
    runs = f"/sessions/{parent.id}/agents"
    run = wire.client.post(runs, json={"task": "HOLD crash", "agent_ref": "helper"}).json()
    wait_until(lambda: len(child_requests(wire.fake, "HOLD crash")) == 1, "a running child", BOUND)
    wire.restart(signal.SIGKILL)
    after = wire.client.get(f"{runs}/{run['id']}").json()
    assert after["status"] == "interrupted"
    assert after["error"] == "kernel restarted before the agent run completed"
    interrupted = wire.again(parent).replay(lambda f: f.event == "subagent_interrupted")[-1]
    assert interrupted.data["payload"] == after
    (child,) = wire.client.get(f"/sessions/{parent.id}/children").json()
    assert child["id"] == after["child_session_id"] and child["phase"] == "idle"
    assert len(child_requests(wire.fake, "HOLD crash")) == 1  # never asked again
