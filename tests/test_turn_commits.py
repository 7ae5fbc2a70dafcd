"""How many commits a turn costs: a one-step text turn commits its opening facts,
then at most two transactions — the step (usage, accepted boundary, assistant message) and its
close (`turn_complete` with the phase change). Counted on the store's own connection with
SQLite's trace callback, in process, against the fake provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import BOUND, answer, call, sleep, tools
from support.inprocess import InProcess, inprocess_kernel

from app import events as k
from app.errors import InsufficientStorage
from app.events import Event
from app.kernel import Kernel
from app.kernel.emit import topic
from app.kernel.turns.inputs import TurnInput


class Counted:
    """COMMIT statements seen on the store's connection, but for transactions that only save
    the partial-message snapshot: those are timed (every `SNAPSHOT_EVERY` s of streaming, for
    crash recovery), not part of a turn's cost, and a slow machine may take one mid-reply."""

    def __init__(self) -> None:
        self.commits = 0
        self.lock = threading.Lock()
        self.snapshot_only = True

    def traced(self, statement: str) -> None:
        head = statement.strip().upper()
        with self.lock:
            if head.startswith("BEGIN"):
                self.snapshot_only = True
            elif head.startswith("COMMIT"):
                self.commits += 0 if self.snapshot_only else 1
            elif not head.startswith("SELECT") and "STREAM_SNAPSHOTS" not in head:
                self.snapshot_only = False


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, Counted]]:
    with inprocess_kernel(tmp_path_factory.mktemp("commits") / "d") as rig:
        counted = Counted()

        def trace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(counted.traced)

        rig.kernel.store.db.call(trace)
        yield rig, counted


async def _turn(kernel: Kernel, session: str, message: str) -> list[Event]:
    """Submit a turn and collect its stored facts up to the phase change after `turn_complete`."""
    seen: list[Event] = []
    with kernel.broker.subscribe(topic(session)) as sub:
        await kernel.turns.submit(session, TurnInput(message=message))
        while not (len(seen) > 1 and seen[-2].kind == k.TURN_COMPLETE):
            event = await asyncio.wait_for(sub.get(), BOUND)
            if event is None:
                raise AssertionError("the stream ended")
            if event.seq:
                seen.append(event)
    return seen


def _commits_after_the_user_message(
    rig: tuple[InProcess, Counted], session: str, message: str
) -> tuple[int, list[Event]]:
    kernel, counted = rig

    async def measured() -> tuple[int, list[Event]]:
        before = counted.commits
        events = await _turn(kernel.kernel, session, message)
        return counted.commits - before, events

    return kernel.run(measured())


def test_a_one_step_text_turn_commits_twice_after_its_user_message(
    rig: tuple[InProcess, Counted],
) -> None:
    kernel, _ = rig
    session = kernel.run(kernel.kernel.sessions.create({"connection_id": kernel.connection}))
    kernel.fake.push(session["model"], answer("Hello there."))
    commits, events = _commits_after_the_user_message(rig, session["id"], "hi")
    kinds = [e.kind for e in events]
    assert kinds == [
        k.SESSION_UPDATED,  # phase turn ┐ the opening commit
        k.MESSAGE_END,  # user          │
        k.TURN_STARTED,  #              ┘
        k.USAGE_UPDATED,  #             ┐ the step
        k.CONTEXT_REQUEST_ACCEPTED,  #  │
        k.MESSAGE_END,  # assistant     ┘
        k.TURN_COMPLETE,  #             ┐ the close
        k.SESSION_UPDATED,  # phase idle ┘
    ], kinds
    assert commits == 3, f"{commits} commits: the opening one, then at most 2"


def test_a_tool_step_stores_its_calls_with_the_reply(rig: tuple[InProcess, Counted]) -> None:
    kernel, _ = rig
    session = kernel.run(kernel.kernel.sessions.create({"connection_id": kernel.connection}))
    kernel.fake.push(
        session["model"],
        tools(call("c1", "read", {"path": "missing.txt"}), call("c2", "read", {"path": "x"})),
        answer("Nothing there."),
    )
    _, events = _commits_after_the_user_message(rig, session["id"], "read them")
    kinds = [e.kind for e in events]
    step = kinds.index(k.USAGE_UPDATED)
    assert kinds[step : step + 5] == [
        k.USAGE_UPDATED,
        k.CONTEXT_REQUEST_ACCEPTED,
        k.MESSAGE_END,
        k.TOOL_UPDATE,
        k.TOOL_UPDATE,
    ]
    # One transaction: consecutive seqs, nothing of another write in between.
    seqs = [e.seq for e in events[step : step + 5]]
    assert seqs == list(range(seqs[0], seqs[0] + 5))
    assert kinds[-2:] == [k.TURN_COMPLETE, k.SESSION_UPDATED]


def _asked(fake: Any, model: str) -> list[Any]:
    """The streaming requests the fake provider has had for `model`."""
    return [r for r in fake.chats(model) if r.streaming]


@contextlib.contextmanager
def _opening_held(
    rig: InProcess, model: str, seen: list[int], fail: BaseException | None = None
) -> Iterator[None]:
    """Within the block, the turn's opening write waits until the fake has been asked (bounded)
    and appends to `seen` how many requests of `model` came meanwhile; with `fail`, the write
    then raises it instead of writing."""
    store = rig.kernel.store
    original = store.update_session
    before = len(_asked(rig.fake, model))

    async def held(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + BOUND
        while len(_asked(rig.fake, model)) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        seen.append(len(_asked(rig.fake, model)) - before)
        if fail is not None:
            raise fail
        return await original(*args, **kwargs)

    store.update_session = held  # type: ignore[method-assign]
    try:
        yield
    finally:
        del store.update_session


def test_the_first_request_leaves_before_the_opening_commit_and_its_reply_waits(
    rig: tuple[InProcess, Counted],
) -> None:
    kernel, _ = rig
    session = kernel.run(kernel.kernel.sessions.create({"connection_id": kernel.connection}))
    model, sid = session["model"], session["id"]
    kernel.fake.push(model, answer("First."), answer("Second one."))
    seen: list[int] = []

    async def turn(message: str) -> list[Event]:
        everything: list[Event] = []
        with kernel.kernel.broker.subscribe(topic(sid)) as sub:
            with _opening_held(kernel, model, seen):
                await kernel.kernel.turns.submit(sid, TurnInput(message=message))
            while not (everything and everything[-1].kind == k.TURN_COMPLETE):
                event = await asyncio.wait_for(sub.get(), BOUND)
                assert event is not None, "the stream ended"
                everything.append(event)
        return everything

    for n, message in enumerate(["one", "two"], start=1):
        before = len(_asked(kernel.fake, model))
        events = kernel.run(turn(message))
        assert seen[-1] == 1, "the provider was asked before the opening commit"
        kinds = [e.kind for e in events]
        started = kinds.index(k.TURN_STARTED)
        assert kinds.index(k.MESSAGE_DELTA) > started, kinds  # deltas only after the commit
        user = next(e for e in events if e.kind == k.MESSAGE_END)
        assert user.payload["role"] == "user"
        accepted = next(e for e in events if e.kind == k.CONTEXT_REQUEST_ACCEPTED)
        assert accepted.payload["through_seq"] == user.seq  # the message's real seq
        assert len(_asked(kernel.fake, model)) == before + 1
        sent = _asked(kernel.fake, model)[-1].messages
        assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"][: 2 * n - 1]
        assert sent[-1]["content"] == message


def test_a_turn_whose_opening_commit_fails_gives_up_its_early_request(
    rig: tuple[InProcess, Counted],
) -> None:
    kernel, _ = rig
    session = kernel.run(kernel.kernel.sessions.create({"connection_id": kernel.connection}))
    model, sid = session["model"], session["id"]
    kernel.fake.push(model, [sleep(BOUND / 2), *answer("Never shown.")])
    seen: list[int] = []
    with (
        _opening_held(kernel, model, seen, InsufficientStorage("disk full")),
        pytest.raises(InsufficientStorage),
    ):
        kernel.run(kernel.kernel.turns.submit(sid, TurnInput(message="hi")))
    asked = _asked(kernel.fake, model)
    deadline = time.monotonic() + BOUND
    while not asked[-1].disconnected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [1], "the provider was asked before the opening commit"
    assert asked[-1].disconnected, "the early reply was not closed"
    assert not kernel.kernel.turns.running(sid)
    history = kernel.run(kernel.kernel.sessions.history(sid))
    assert history == []
