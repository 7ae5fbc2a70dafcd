"""Background memory maintenance (app.kernel.usercontext.keeper).

A real kernel runs in process (its own HOME, so `~/.foya/memory` is the test's) against the fake
provider, which serves both the sessions' model and the `fast` default model the keeper asks.
Turns go through the kernel; passes are run with `run_pass()` (the kernel's own background task
is stopped right after start so it cannot take a scripted answer first), except where the
background task itself is under test. Non-streaming answers may be held by `wait(gate)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import stat
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support.fake_provider import (
    API_KEY,
    BOUND,
    FakeProvider,
    Recorded,
    answer,
    call,
    http_error,
    reply,
    tools,
    wait,
)
from support.helpers import wait_until

from app import events as k
from app.events import EventDraft, Message
from app.kernel import Kernel
from app.kernel.emit import topic
from app.kernel.turns.inputs import TurnInput
from app.kernel.usercontext.items import MAX_MEMORY_CHARS
from app.kernel.usercontext.keeper import FILE, MemoryKeeper
from app.metrics import Metrics
from app.settings import Settings

T = TypeVar("T")
FAST = "fast-memory-model"
CHAT = "chat-model"


@dataclass
class Rig:
    """A started kernel on a loop of its own, with a connection to the fake."""

    kernel: Kernel
    loop: asyncio.AbstractEventLoop
    fake: FakeProvider
    connection: str

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.background(coro).result(BOUND)

    def background(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    @property
    def keeper(self) -> MemoryKeeper:
        return self.kernel.memory_keeper

    @property
    def watermark(self) -> Path:
        return self.kernel.settings.data_dir / FILE

    def session(self, title: str, **fields: Any) -> str:
        fields.setdefault("connection_id", self.connection)
        created = self.run(self.kernel.sessions.create({"model": CHAT, **fields}))
        # A manual title: no background title request, and the excerpts' heading.
        self.run(self.kernel.sessions.update(created["id"], {"title": title}))
        return str(created["id"])

    def turn(self, session: str, message: str, *scripts: Any) -> dict[str, Any]:
        """Push the scripts, run a turn to its end; its `turn_complete` payload."""
        self.fake.push(CHAT, *scripts)
        return self.run(_turn(self.kernel, session, message))

    def use_fast(self, connection: str | None = None) -> None:
        chosen = {"connection_id": connection or self.connection, "model": FAST}
        self.run(self.kernel.connections.set_defaults({"fast": chosen}))

    def memory(self, project_id: str | None = None) -> str | None:
        scope = "global" if project_id is None else "project"
        found = self.run(self.kernel.user_context.memories(scope, project_id))
        return found[0].content if found else None

    def memory_events(self) -> list[tuple[str, str]]:
        return [
            (e.kind, e.payload["memory"]["scope"])
            for e in self.kernel.context_journal.events_after(0)
            if e.kind in ("memory_created", "memory_updated")
        ]

    def through_seq(self) -> int:
        return int(json.loads(self.watermark.read_text())["through_seq"])

    def last_message_seq(self, session: str) -> int:
        return int(self.run(self.kernel.store.history(session))[-1]["event_seq"])


async def _turn(kernel: Kernel, session: str, message: str) -> dict[str, Any]:
    with kernel.broker.subscribe(topic(session)) as sub:
        await kernel.turns.submit(session, TurnInput(message=message))
        while True:
            event = await asyncio.wait_for(sub.get(), BOUND)
            assert event is not None, "the stream ended"
            if event.kind == k.TURN_COMPLETE:
                return dict(event.payload)


@contextlib.contextmanager
def running(data_dir: Path, fake: FakeProvider, *, interval: float | None = None) -> Iterator[Rig]:
    """A kernel on `data_dir`. With `interval`, its keeper is one with that minimum interval
    and its background task keeps running; without, the task is stopped after start."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    kernel = Kernel(Settings(data_dir=data_dir), Metrics())
    if interval is not None:
        kernel.memory_keeper = MemoryKeeper(
            data_dir,
            kernel.store,
            kernel.connections,
            kernel.providers,
            kernel.user_context,
            min_interval=interval,
        )
    rig = Rig(kernel, loop, fake, "")
    try:
        rig.run(kernel.start())
        if interval is None:
            rig.run(kernel.memory_keeper.stop())
        known = kernel.connections.all()
        body = {"name": "fake", "base_url": fake.base_url, "api_key": API_KEY}
        rig.connection = known[0]["id"] if known else rig.run(kernel.connections.create(body))["id"]
        yield rig
    finally:
        rig.run(kernel.begin_shutdown())
        rig.run(kernel.close())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(BOUND)
        loop.close()


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as held:
        yield held


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own HOME: its `~/.foya/memory` is nobody else's."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


def text_of(request: Recorded) -> str:
    return "\n".join(str(m.get("content")) for m in request.messages)


def fast_calls(fake: FakeProvider) -> list[Recorded]:
    return fake.chats(FAST, streaming=False)


# -------------------------------------------------------------------------------------- a pass


def test_a_pass_condenses_each_scope_into_its_memory_and_moves_the_watermark(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    workdir = tmp_path / "widget"
    workdir.mkdir()
    with running(tmp_path / "data", fake) as rig:
        project = rig.run(rig.kernel.projects.create(str(workdir), "Widget"))["id"]
        solo = rig.session("Editor talk")
        widget = rig.session("Build talk", project_id=project)
        rig.turn(solo, "Please remember: I prefer tabs over spaces.", answer("Noted, tabs."))
        done = rig.turn(
            widget,
            "Remember that this project builds with uv.",
            tools(call("c1", "read", {"path": "secret-notes.txt"})),
            answer("Right, it builds with uv."),
        )
        assert done["status"] == "completed"
        rig.use_fast()
        fake.push_completion(FAST, reply("- Prefers tabs over spaces."))
        fake.push_completion(FAST, reply("```markdown\n- Builds with uv.\n```"))

        result = rig.run(rig.keeper.run_pass())

        assert result.status == "done"
        assert result.through_seq == rig.last_message_seq(widget)
        first, second = fast_calls(fake)
        assert "I prefer tabs over spaces." in text_of(first)
        assert "Assistant: Noted, tabs." in text_of(first)
        assert "## Conversation: Editor talk" in text_of(first)
        assert "<current_memory>\n(empty)\n</current_memory>" in text_of(first)
        assert "builds with uv" not in text_of(first)
        assert "builds with uv" in text_of(second) and '"Widget"' in text_of(second)
        assert "prefer tabs" not in text_of(second)
        for request in (first, second):  # tool calls and results are not conversation text
            assert "secret-notes" not in text_of(request)
        assert rig.memory() == "- Prefers tabs over spaces."
        assert rig.memory(project) == "- Builds with uv."
        assert rig.memory_events() == [("memory_created", "global"), ("memory_created", "project")]
        assert (home / ".foya" / "memory" / "user_profile.md").exists()
        assert rig.through_seq() == result.through_seq
        assert stat.S_IMODE(rig.watermark.stat().st_mode) == 0o600

        again = rig.run(rig.keeper.run_pass())
        assert again.status == "idle"
        assert again.through_seq == result.through_seq
        assert len(fast_calls(fake)) == 2


def test_forks_and_sub_agents_add_nothing_to_read(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake) as rig:
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: I use fish as my shell.", answer("fish, noted."))
        rig.use_fast()
        fake.push_completion(FAST, reply("- Uses the fish shell."))
        assert rig.run(rig.keeper.run_pass()).status == "done"

        rig.run(rig.kernel.fork_session(chat, "Prefs (copy)", None))  # imported copies
        child = {
            "id": "sub-agent-1",
            "parent_id": chat,
            "phase": "idle",
            "model": CHAT,
            "created_at_ns": time.time_ns(),
            "updated_at_ns": time.time_ns(),
        }
        rig.run(rig.kernel.store.create_session(child))
        note: Message = {"role": "user", "content": "Sub-agent task: list the files."}
        rig.run(rig.kernel.facts.emit(EventDraft("sub-agent-1", k.MESSAGE_END, note)))

        assert rig.run(rig.keeper.run_pass()).status == "idle"
        assert len(fast_calls(fake)) == 1


def test_a_restart_resumes_from_the_watermark(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    data = tmp_path / "data"
    with running(data, fake) as rig:
        chat = rig.session("Style")
        rig.turn(chat, "Turn one: I like short answers.", answer("Short it is."))
        rig.use_fast()
        fake.push_completion(FAST, reply("- Likes short answers."))
        assert rig.run(rig.keeper.run_pass()).status == "done"
        before = rig.through_seq()

    with running(data, fake) as rig:
        rig.turn(chat, "Turn two: remember we deploy on Fridays.", answer("Fridays, noted."))
        fake.push_completion(FAST, reply("- Likes short answers.\n- Deploys on Fridays."))
        result = rig.run(rig.keeper.run_pass())

        assert result.status == "done" and result.through_seq > before
        sent = text_of(fast_calls(fake)[-1])
        assert "Turn two" in sent and "Fridays, noted." in sent
        assert "Turn one" not in sent and "Short it is." not in sent
        assert "<current_memory>\n- Likes short answers.\n</current_memory>" in sent
        assert rig.memory() == "- Likes short answers.\n- Deploys on Fridays."
        assert rig.memory_events() == [("memory_created", "global"), ("memory_updated", "global")]
        assert rig.through_seq() == result.through_seq


def test_nothing_is_sent_without_a_fast_model_or_while_memory_is_disabled(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake) as rig:
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: I never use semicolons.", answer("Got it."))

        assert rig.run(rig.keeper.run_pass()).status == "no_model"
        rig.use_fast()
        rig.run(rig.kernel.user_context.update_memory_settings(False))
        assert rig.run(rig.keeper.run_pass()).status == "disabled"
        assert fast_calls(fake) == []
        assert not rig.watermark.exists()

        rig.run(rig.kernel.user_context.update_memory_settings(True))
        fake.push_completion(FAST, reply("- Never uses semicolons."))
        assert rig.run(rig.keeper.run_pass()).status == "done"
        assert "I never use semicolons." in text_of(fast_calls(fake)[0])  # kept, not dropped


def test_a_provider_failure_keeps_the_watermark_and_the_next_pass_retries(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake) as rig:
        chat = rig.session("Prefs")
        rig.use_fast()
        rig.turn(chat, "First: I use Vim.", answer("Vim, fine."))
        fake.push_completion(FAST, reply("- Uses Vim."))
        assert rig.run(rig.keeper.run_pass()).status == "done"
        saved = rig.watermark.read_bytes()

        rig.turn(chat, "Second: I work in UTC.", answer("UTC, fine."))
        fake.push_completion(FAST, http_error(500, "overloaded"))
        failed = rig.run(rig.keeper.run_pass())

        assert failed.status == "failed"
        assert rig.watermark.read_bytes() == saved
        assert rig.memory() == "- Uses Vim."
        assert rig.memory_events() == [("memory_created", "global")]

        fake.push_completion(FAST, reply("- Uses Vim.\n- Works in UTC."))
        retried = rig.run(rig.keeper.run_pass())
        assert retried.status == "done"
        assert "Second: I work in UTC." in text_of(fast_calls(fake)[-1])
        assert rig.through_seq() == rig.last_message_seq(chat)
        assert rig.memory() == "- Uses Vim.\n- Works in UTC."


def test_an_unreadable_watermark_counts_as_zero(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    data = tmp_path / "data"
    (data / "memory").mkdir(parents=True)
    (data / FILE).write_text('{"through_seq": "lots"')
    with running(data, fake) as rig:
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: dark theme everywhere.", answer("Dark it is."))
        rig.use_fast()
        fake.push_completion(FAST, reply("- Dark theme everywhere."))

        assert rig.run(rig.keeper.run_pass()).status == "done"
        assert "dark theme everywhere" in text_of(fast_calls(fake)[0])
        assert rig.through_seq() == rig.last_message_seq(chat)


def test_no_change_and_overlong_answers_leave_memory_alone(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake) as rig:
        chat = rig.session("Chit-chat")
        rig.use_fast()
        rig.turn(chat, "How are you?", answer("Fine."))
        fake.push_completion(FAST, reply("NO_CHANGE"))
        assert rig.run(rig.keeper.run_pass()).status == "done"

        rig.turn(chat, "Tell me a story.", answer("Once upon a time."))
        fake.push_completion(FAST, reply("x" * (MAX_MEMORY_CHARS + 1)))
        assert rig.run(rig.keeper.run_pass()).status == "done"

        assert rig.memory() is None
        assert rig.memory_events() == []
        assert rig.through_seq() == rig.last_message_seq(chat)


# ------------------------------------------------------------------------- concurrency and turns


def test_a_hand_edit_made_while_the_model_answers_is_kept(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake) as rig:
        memory = rig.run(rig.kernel.user_context.create_memory("global", None, "- Original."))
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: I prefer pytest.", answer("pytest it is."))
        rig.use_fast()
        gate = fake.gate()
        fake.push_completion(FAST, [wait(gate), *reply("- Original.\n- Prefers pytest.")])

        running_pass = rig.background(rig.keeper.run_pass())
        fake.wait_chats(FAST, 1)
        rig.run(rig.kernel.user_context.update_memory(memory.id, "- Edited by hand."))
        gate.set()

        assert running_pass.result(BOUND).status == "failed"
        assert rig.memory() == "- Edited by hand."
        assert not rig.watermark.exists()


def test_passes_run_one_at_a_time(tmp_path: Path, home: Path, fake: FakeProvider) -> None:
    with running(tmp_path / "data", fake) as rig:
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: two spaces after a period.", answer("Noted."))
        rig.use_fast()
        gate = fake.gate()
        fake.push_completion(FAST, [wait(gate), *reply("- Two spaces after a period.")])

        first = rig.background(rig.keeper.run_pass())
        fake.wait_chats(FAST, 1)
        second = rig.background(rig.keeper.run_pass())
        gate.set()

        assert first.result(BOUND).status == "done"
        assert second.result(BOUND).status == "idle"
        assert len(fast_calls(fake)) == 1


def test_a_slow_pass_never_delays_a_turn_and_stops_with_the_kernel(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake, interval=0) as rig:
        body = {"name": "fast", "base_url": fake.base_url, "api_key": API_KEY}
        fast = rig.run(rig.kernel.connections.create(body))["id"]
        rig.use_fast(fast)
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: I review on Mondays.", answer("Mondays."))
        gate = fake.gate()  # never opened while the kernel runs
        fake.push_completion(FAST, [wait(gate), *reply("- Reviews on Mondays.")])

        rig.loop.call_soon_threadsafe(rig.keeper.wake)
        (held,) = fake.wait_chats(FAST, 1)
        done = rig.turn(chat, "And on Fridays?", answer("Fridays too."))

        assert done["status"] == "completed"
        assert not held.done  # the pass is still waiting for the fast model
        assert not rig.watermark.exists()
    # The kernel stopped while the gate was still shut: shutdown cancelled the pass, which
    # would otherwise have finished (and written both files) once the fake gave up waiting.
    assert not gate.is_set()
    assert not (tmp_path / "data" / FILE).exists()
    assert not (home / ".foya" / "memory" / "user_profile.md").exists()


def test_the_background_task_runs_a_pass_when_woken(
    tmp_path: Path, home: Path, fake: FakeProvider
) -> None:
    with running(tmp_path / "data", fake, interval=0) as rig:
        rig.use_fast()
        chat = rig.session("Prefs")
        rig.turn(chat, "Remember: I write commit messages in English.", answer("English."))
        fake.push_completion(FAST, reply("- Writes commit messages in English."))

        rig.loop.call_soon_threadsafe(rig.keeper.wake)
        wait_until(lambda: rig.watermark.exists(), "the watermark to be written", BOUND)

        assert rig.through_seq() == rig.last_message_seq(chat)
        assert rig.memory() == "- Writes commit messages in English."
        assert rig.memory_events() == [("memory_created", "global")]
