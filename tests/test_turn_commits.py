"""How many commits a turn costs (issue 13): a one-step text turn commits its opening facts,
then at most two transactions — the step (usage, accepted boundary, assistant message) and its
close (`turn_complete` with the phase change). Counted on the store's own connection with
SQLite's trace callback, in process, against the fake provider.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fake_provider import API_KEY, BOUND, FakeProvider, answer, call, tools

from app import events as k
from app.events import Event
from app.kernel import Kernel
from app.kernel.emit import topic
from app.metrics import Metrics
from app.settings import Settings


class Counted:
    """A started in-process kernel whose store connection reports each COMMIT."""

    def __init__(self, kernel: Kernel, loop: asyncio.AbstractEventLoop, fake: FakeProvider) -> None:
        self.kernel, self.loop, self.fake = kernel, loop, fake
        self.connection = ""
        self.commits = 0
        self.lock = threading.Lock()

    def traced(self, statement: str) -> None:
        if statement.strip().upper().startswith("COMMIT"):
            with self.lock:
                self.commits += 1

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(BOUND)


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Counted]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with FakeProvider.running() as fake:
        kernel = Kernel(Settings(data_dir=tmp_path_factory.mktemp("commits") / "d"), Metrics())
        rig = Counted(kernel, loop, fake)
        rig.run(kernel.start())
        try:
            body = {"name": "fake", "base_url": fake.base_url, "api_key": API_KEY}
            rig.connection = rig.run(kernel.connections.create(body))["id"]

            def trace(conn: sqlite3.Connection) -> None:
                conn.set_trace_callback(rig.traced)

            kernel.store.db.call(trace)
            yield rig
        finally:
            rig.run(kernel.begin_shutdown())
            rig.run(kernel.close())
            loop.call_soon_threadsafe(loop.stop)
            thread.join(BOUND)
            loop.close()


async def _turn(kernel: Kernel, session: str, message: str) -> list[Event]:
    """Submit a turn and collect its stored facts up to the phase change after `turn_complete`."""
    seen: list[Event] = []
    with kernel.broker.subscribe(topic(session)) as sub:
        await kernel.turns.submit(session, {"message": message})
        while not (len(seen) > 1 and seen[-2].kind == k.TURN_COMPLETE):
            event = await asyncio.wait_for(sub.get(), BOUND)
            if event is None:
                raise AssertionError("the stream ended")
            if event.seq:
                seen.append(event)
    return seen


def _commits_after_the_user_message(rig: Counted, session: str, message: str) -> tuple[int, Any]:
    async def measured() -> tuple[int, list[Event]]:
        before = rig.commits
        events = await _turn(rig.kernel, session, message)
        return rig.commits - before, events

    result: tuple[int, list[Event]] = rig.run(measured())
    return result


def test_a_one_step_text_turn_commits_twice_after_its_user_message(counted: Counted) -> None:
    session = counted.run(counted.kernel.sessions.create({"connection_id": counted.connection}))
    sid = session["id"]
    counted.fake.push(session["model"], answer("Hello there."))
    commits, events = _commits_after_the_user_message(counted, sid, "hi")
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


def test_a_tool_step_stores_its_calls_with_the_reply(counted: Counted) -> None:
    session = counted.run(counted.kernel.sessions.create({"connection_id": counted.connection}))
    counted.fake.push(
        session["model"],
        tools(call("c1", "read", {"path": "missing.txt"}), call("c2", "read", {"path": "x"})),
        answer("Nothing there."),
    )
    _, events = _commits_after_the_user_message(counted, session["id"], "read them")
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
