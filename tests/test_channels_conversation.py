"""The channel conversation runtime (app.kernel.channels.conversation) against a real kernel.

The kernel runs in process (real SQLite in a temp dir, the fake OpenAI-compatible provider on
loopback); the platform is a test double of our own contract (`Platform`), recording what the
runtime sends, edits, acks and answers. Crash tests are in test_channels_conversation_crash.py.
"""

# ruff: noqa: RUF001  (the zh-CN texts use full-width punctuation)

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.fake_provider import Script, answer, call, finish, reply, sleep, text, tools, wait
from support.inprocess import InProcess, inprocess_kernel

from app.kernel.channels.bindings import Bindings
from app.kernel.channels.conversation import run_channel
from app.kernel.channels.conversation_parts import ConversationParts
from app.kernel.channels.pairings import Pairings
from app.kernel.channels.platform import Inbound, Outbound, PlatformError
from app.kernel.channels.records import ChannelConfig
from app.kernel.turns.inputs import TurnInput
from app.store.channel_ledger import ReplyRow

DEADLINE = 20.0
_models = itertools.count(1)
_keys = itertools.count(1000)


@dataclass
class Write:
    op: str  # send | edit
    chat: str
    message_id: str
    message: Outbound
    at: float


@dataclass
class FakePlatform:
    """Our contract, in memory: items are pushed by the test; every write is recorded."""

    edit_interval: float = 0.2
    max_text: int = 4000
    items: asyncio.Queue[Inbound] = field(default_factory=asyncio.Queue)
    writes: list[Write] = field(default_factory=list)
    messages: dict[str, Outbound] = field(default_factory=dict)
    acked: list[str] = field(default_factory=list)
    answers: list[tuple[str, str]] = field(default_factory=list)
    refuse_edits: int = 0  # the next edits answer a 429 with retry_after
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    async def start(self) -> None:
        return None

    async def inbound(self) -> AsyncIterator[Inbound]:
        while True:
            yield await self.items.get()

    async def ack(self, item: Inbound) -> None:
        self.acked.append(item.key)

    async def send(self, chat: str, message: Outbound) -> list[str]:
        message_id = f"m{next(self._ids)}"
        self.messages[message_id] = message
        self.writes.append(Write("send", chat, message_id, message, time.monotonic()))
        return [message_id]

    async def edit(self, chat: str, message_id: str, message: Outbound) -> None:
        if self.refuse_edits:
            self.refuse_edits -= 1
            raise PlatformError("Too Many Requests", retry_after=0.3)
        self.messages[message_id] = message
        self.writes.append(Write("edit", chat, message_id, message, time.monotonic()))

    async def answer_button(self, item: Inbound, notice: str) -> None:
        self.answers.append((item.key, notice))

    async def close(self) -> None:
        return None

    def sent(self, chat: str) -> list[str]:
        """The current text of each message sent to `chat`, in order."""
        ids = [w.message_id for w in self.writes if w.op == "send" and w.chat == chat]
        return [self.messages[i].text for i in ids]


@dataclass
class Bot:
    """A channel's runtime on the test's kernel."""

    rig: InProcess
    platform: FakePlatform
    channel: ChannelConfig
    pairings: Pairings
    task: asyncio.Task[None] | None = None

    def push(self, chat: str = "100", text: str = "", user: str = "42", **extra: Any) -> Inbound:
        item = Inbound(
            key=str(extra.pop("key", next(_keys))),
            chat=chat,
            chat_kind="private",
            user=user,
            username=extra.pop("username", "alice"),
            display_name="Alice",
            text=text,
            **extra,
        )
        self.rig.loop.call_soon_threadsafe(self.platform.items.put_nowait, item)
        return item

    def until(self, what: str, check: Callable[[], Any]) -> Any:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            found = check()  # reads of lists the loop appends to: safe under the GIL
            if found:
                return found
            time.sleep(0.02)
        raise AssertionError(
            f"timed out waiting for {what}: {self.platform.writes} {self.platform.answers}"
        )

    def session_of(self, chat: str = "100") -> str | None:
        return self.rig.run(Bindings(self.rig.kernel.store).session_of(self.channel.id, chat))


def parts(rig: InProcess, pairings: Pairings) -> ConversationParts:
    kernel = rig.kernel
    return ConversationParts(
        store=kernel.store,
        broker=kernel.broker,
        sessions=kernel.sessions,
        turns=kernel.turns,
        queues=kernel.queues,
        approvals=kernel.approvals,
        questions=kernel.questions,
        bindings=Bindings(kernel.store),
        pairings=pairings,
        metrics=kernel.metrics,
    )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_kernel(tmp_path_factory.mktemp("channels") / "d") as rig:
        yield rig


@contextlib.contextmanager
def running(rig: InProcess, **settings: Any) -> Iterator[Bot]:
    """A channel of its own (its own model on the fake provider) running on `rig`."""
    model = f"chan-{next(_models)}"
    config = ChannelConfig(
        id=f"telegram-{next(_models):016x}",
        kind="telegram",
        name="bot",
        locale=settings.pop("locale", "en-US"),
        enabled=True,
        connection_id=rig.connection,
        model=model,
        allowed_users=settings.pop("allowed_users", ("42",)),
        **settings,
    )
    platform = FakePlatform()
    pairings = Pairings(lambda: __import__("datetime").datetime.now().astimezone())
    bot = Bot(rig, platform, config, pairings)

    async def start() -> None:
        bot.task = asyncio.create_task(run_channel(config, platform, parts(rig, pairings)))

    rig.run(start())
    try:
        yield bot
    finally:

        async def stop() -> None:
            assert bot.task is not None
            bot.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await bot.task

        rig.run(stop())


def titled(bot: Bot) -> None:
    """The title request of a new session gets an answer (it is not a chat turn)."""
    bot.rig.fake.push_completion(bot.channel.model, reply("Chat"))


def history(bot: Bot, session: str) -> list[dict[str, Any]]:
    return [dict(m) for m in bot.rig.run(bot.rig.kernel.sessions.history(session))]


# -- a message becomes a turn, its reply streams ---------------------------------------------------


def test_message_runs_a_turn_and_its_reply_streams_paced(rig: InProcess) -> None:
    with running(rig) as bot:
        titled(bot)
        words = [text(w) for w in ("Hello", " there", ",", " friend", ".")]
        script: Script = [words[0], sleep(0.3), words[1], sleep(0.3), *words[2:], finish()]
        rig.fake.push(bot.channel.model, script)
        item = bot.push(text="hi")
        bot.until("the final text", lambda: bot.platform.sent("100") == ["Hello there, friend."])
        session = bot.session_of()
        assert session is not None
        assert [m["content"] for m in history(bot, session)] == ["hi", "Hello there, friend."]
        assert item.key in bot.platform.acked
        writes = [w for w in bot.platform.writes if w.chat == "100"]
        assert writes[0].op == "send" and all(w.op == "edit" for w in writes[1:])
        assert len(writes) >= 2  # streamed: the first delta, then edits as the text grew
        gaps = [b.at - a.at for a, b in itertools.pairwise(writes)]
        assert min(gaps) >= bot.platform.edit_interval * 0.9


def test_long_reply_continues_in_new_messages_and_obeys_retry_after(rig: InProcess) -> None:
    with running(rig) as bot:
        bot.platform.max_text = 120  # chunks of 40 characters (80 are kept for the status)
        bot.platform.refuse_edits = 1
        titled(bot)
        long = " ".join(f"word{i:02d}" for i in range(20))  # 139 characters
        rig.fake.push(bot.channel.model, answer(long))
        bot.push(text="tell me a lot")
        bot.until("the whole text", lambda: "".join(bot.platform.sent("100")) == long)
        assert all(len(t) <= 40 for t in bot.platform.sent("100"))
        assert len(bot.platform.sent("100")) == 4


def test_redelivered_item_runs_no_second_turn(rig: InProcess) -> None:
    with running(rig) as bot:
        titled(bot)
        rig.fake.push(bot.channel.model, answer("Once."))
        first = bot.push(text="only once", key="dup-1")
        bot.until("the reply", lambda: bot.platform.sent("100") == ["Once."])
        bot.push(text="only once", key="dup-1")  # the platform delivers it again
        bot.until("the second ack", lambda: bot.platform.acked.count(first.key) == 2)
        session = bot.session_of()
        assert session is not None
        assert [m["content"] for m in history(bot, session)] == ["only once", "Once."]
        assert len(rig.fake.chats(bot.channel.model, streaming=True)) == 1


# -- who may talk ----------------------------------------------------------------------------------


def test_stranger_is_refused_once_and_nothing_starts(rig: InProcess) -> None:
    with running(rig) as bot:
        for n in range(3):
            bot.push(chat="200", text=f"let me in {n}", user="666", username="mallory")
        bot.until("three acks", lambda: len(bot.platform.acked) == 3)
        assert bot.platform.sent("200") == [
            "You are not allowed to use this bot. Ask its owner to add your user id 666 "
            "to the channel's allowed users."
        ]
        assert bot.session_of("200") is None
        assert rig.fake.chats(bot.channel.model) == []


def test_username_and_chat_allow_lists(rig: InProcess) -> None:
    with running(rig, allowed_users=("@Bob",), allowed_chats=("-300",)) as bot:
        bot.push(chat="300", text="/help", user="7", username="bob")
        bot.push(chat="-300", text="/help", user="8", username="carol")
        bot.until("two answers", lambda: bot.platform.sent("300") and bot.platform.sent("-300"))
        assert bot.platform.sent("300")[0].startswith("Send a message to talk to Foya.")


def test_bind_pairs_a_stranger_with_a_session(rig: InProcess) -> None:
    with running(rig) as bot:
        session = rig.run(rig.kernel.sessions.create({"connection_id": rig.connection}))
        pairing = bot.pairings.create(bot.channel.id, session["id"])
        bot.push(chat="400", text="/bind", user="999")
        bot.push(chat="400", text="/bind WRONGCODE", user="999")
        bot.push(chat="400", text=f"/BIND {pairing.code.lower()}", user="999")
        bot.until("three answers", lambda: len(bot.platform.sent("400")) == 3)
        assert bot.platform.sent("400") == [
            "Use /bind CODE to connect this chat.",
            "That pairing code is invalid or expired.",
            "This chat is now connected to Foya.",
        ]
        assert bot.session_of("400") == session["id"]


# -- commands --------------------------------------------------------------------------------------


def test_new_status_and_stop(rig: InProcess) -> None:
    with running(rig, locale="zh-CN") as bot:
        bot.push(text="/status")
        bot.until("unbound", lambda: bot.platform.sent("100"))
        assert bot.platform.sent("100")[0].startswith("当前聊天尚未连接。")
        bot.push(text="/new")
        bot.until("new chat", lambda: len(bot.platform.sent("100")) == 2)
        assert bot.platform.sent("100")[1] == "已开启新会话。"
        session = bot.session_of()
        assert session is not None
        row = rig.run(rig.kernel.sessions.row(session))
        assert row["connection_id"] == rig.connection and row["model"] == bot.channel.model
        assert row["approval_mode"] == "auto"
        titled(bot)
        gate = rig.fake.gate()
        rig.fake.push(bot.channel.model, [text("Working"), sleep(0.1), wait(gate), finish()])
        bot.push(text="a long task")
        bot.until("the turn", lambda: rig.kernel.turns.running(session))
        bot.push(text="/status")
        bot.until(
            "status", lambda: any("状态：正在执行任务" in t for t in bot.platform.sent("100"))
        )
        bot.push(text="/stop")
        bot.until("stopped", lambda: "已停止当前任务。" in bot.platform.sent("100"))
        gate.set()
        bot.until("idle", lambda: not rig.kernel.turns.running(session))
        bot.until(
            "reply closed", lambda: any("（已停止。）" in t for t in bot.platform.sent("100"))
        )


def test_message_while_busy_is_queued_recorded_and_run_after(rig: InProcess) -> None:
    with running(rig) as bot:
        titled(bot)
        gate = rig.fake.gate()
        rig.fake.push(bot.channel.model, [text("First"), wait(gate), finish()], answer("Second."))
        bot.push(text="one")
        bot.until("the turn", lambda: (s := bot.session_of()) and rig.kernel.turns.running(s))
        queued = bot.push(text="two")
        bot.until("queued", lambda: "Queued behind the running task." in bot.platform.sent("100"))
        assert queued.key in bot.platform.acked  # recorded with the queue's fact, then acked
        seen = rig.run(rig.kernel.store.inbound_seen(bot.channel.id, queued.key))
        assert seen
        gate.set()
        bot.until("both replies", lambda: "Second." in bot.platform.sent("100"))
        session = bot.session_of()
        assert session is not None
        users = [m["content"] for m in history(bot, session) if m["role"] == "user"]
        assert users == ["one", "two"]


# -- decisions -------------------------------------------------------------------------------------


def _bound_manual_session(bot: Bot, chat: str) -> str:
    rig = bot.rig
    fields = {"connection_id": rig.connection, "model": bot.channel.model}
    session = rig.run(rig.kernel.sessions.create({**fields, "approval_mode": "manual"}))
    rig.run(rig.kernel.sessions.update(session["id"], {"title": "x"}))  # no title request
    pairing = bot.pairings.create(bot.channel.id, session["id"])
    bot.push(chat=chat, text=f"/bind {pairing.code}")
    bot.until("bound", lambda: bot.session_of(chat) == session["id"])
    return str(session["id"])


def _approval_message(bot: Bot, chat: str) -> Write:
    def found() -> Write | None:
        return next((w for w in bot.platform.writes if w.chat == chat and w.message.buttons), None)

    write: Write = bot.until("the approval buttons", found)
    return write


def test_approval_by_button_and_first_answer_wins(rig: InProcess) -> None:
    with running(rig) as bot:
        _bound_manual_session(bot, "500")
        command = {"command": "echo approved-by-chat"}
        rig.fake.push(bot.channel.model, tools(call("c1", "bash", command)), answer("Ran it."))
        bot.push(chat="500", text="run it")
        asked = _approval_message(bot, "500")
        assert [b.label for b in asked.message.buttons] == [
            "Approve",
            "Approve for session",
            "Deny",
        ]
        yes = asked.message.buttons[0].data
        first = bot.push(chat="500", button=yes, message=asked.message_id)
        late = bot.push(chat="500", button=asked.message.buttons[2].data, message=asked.message_id)
        bot.until("final", lambda: "Ran it." in bot.platform.sent("500"))
        assert (first.key, "decided") in bot.platform.answers
        assert (late.key, "already decided") in bot.platform.answers
        outcome = bot.platform.messages[asked.message_id]
        assert outcome.text.endswith("Approved.") and not outcome.buttons


def test_approval_decided_elsewhere_replaces_the_buttons(rig: InProcess) -> None:
    with running(rig) as bot:
        session = _bound_manual_session(bot, "600")
        rig.fake.push(bot.channel.model, tools(call("c1", "bash", {"command": "rm -rf x"})))
        rig.fake.push(bot.channel.model, answer("Not run."))
        bot.push(chat="600", text="delete x")
        asked = _approval_message(bot, "600")
        request = asked.message.buttons[0].data.split(":")[1]
        rig.kernel.approvals.decide(session, request, "denied")  # the desktop decides
        bot.until(
            "outcome", lambda: bot.platform.messages[asked.message_id].text.endswith("Denied.")
        )
        assert not bot.platform.messages[asked.message_id].buttons
        late = bot.push(chat="600", button=asked.message.buttons[0].data)
        bot.until("late answer", lambda: (late.key, "already decided") in bot.platform.answers)


def test_question_options_become_buttons(rig: InProcess) -> None:
    with running(rig) as bot:
        _bound_manual_session(bot, "700")
        question = {
            "id": "size",
            "question": "Which size?",
            "options": [{"label": "S"}, {"label": "L"}],
        }
        ask = call("ask1", "ask_user", {"questions": [question]})
        rig.fake.push(bot.channel.model, tools(ask), answer("L it is."))
        bot.push(chat="700", text="pick")
        asked = _approval_message(bot, "700")
        assert [b.label for b in asked.message.buttons] == ["S", "L"]
        bot.push(chat="700", button=asked.message.buttons[1].data)
        bot.until("final", lambda: "L it is." in bot.platform.sent("700"))
        tool = [m for m in history(bot, bot.session_of("700") or "") if m["role"] == "tool"]
        assert '"value":"L"' in tool[0]["content"]


# -- recovery --------------------------------------------------------------------------------------


def test_an_unfinished_reply_of_a_completed_turn_is_finished_not_resent(rig: InProcess) -> None:
    model = f"chan-{next(_models)}"
    fields = {"connection_id": rig.connection, "model": model}
    session = str(rig.run(rig.kernel.sessions.create(fields))["id"])
    rig.run(rig.kernel.sessions.update(session, {"title": "x"}))  # no title request
    rig.fake.push(model, answer("The whole answer."))

    async def turn() -> int:
        head = await rig.kernel.store.head_seq()
        await rig.kernel.turns.submit(session, TurnInput(message="q"))
        while rig.kernel.turns.running(session):
            await asyncio.sleep(0.01)
        return head

    head = rig.run(turn())
    events = rig.run(rig.kernel.store.events_after(head, 100, session))
    started = next(e for e in events if e.kind == "turn_started")
    with running(rig) as bot:
        pass  # only to learn a channel id and platform shape
    bot.platform.messages["m-old"] = Outbound("The who")
    row = ReplyRow(
        bot.channel.id, "800", session, str(started.run_id), started.seq, ("m-old",), "streaming"
    )
    rig.run(rig.kernel.store.put_reply(row))
    platform = FakePlatform()
    platform.messages["m-old"] = Outbound("The who")
    pairings = Pairings(lambda: __import__("datetime").datetime.now().astimezone())

    async def start() -> asyncio.Task[None]:
        return asyncio.create_task(run_channel(bot.channel, platform, parts(rig, pairings)))

    task = rig.run(start())
    try:
        bot2 = Bot(rig, platform, bot.channel, pairings)
        bot2.until("the edit", lambda: platform.messages["m-old"].text == "The whole answer.")
        assert [w.op for w in platform.writes] == ["edit"]
        assert rig.run(rig.kernel.store.open_replies(bot.channel.id)) == []
    finally:
        rig.loop.call_soon_threadsafe(task.cancel)
