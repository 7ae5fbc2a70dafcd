"""The conversation runtime: one channel's bot, given its `Platform` (the channel package's map).

Its parts (`inbound`, `texts`, `replies`, `decisions`, `conversation_*`) are in the package's map.

Each inbound item, one at a time, in order:

1. Already recorded (`channel_inbound`, by channel and `item.key`): only acked.
2. A button press: resolved through the kernel (`decisions`), recorded, acked.
3. Unbound chat and not `/bind`: a sender not allowed gets one refusal naming their user id
   (rate limited); nothing starts. `/bind CODE` bypasses the allow-list.
4. A command (`/new`, `/stop`, `/status`, `/bind`, `/help`) is answered, recorded, acked.
5. Text: into the chat's session (an allowed unbound chat gets a new one first, like `/new`),
   through `Turns.submit` with a `Receipt`, so the item is recorded in the very commit that
   makes it the turn's input (or the queue's): exactly once across crashes. Acked after it.

Anything but a turn is recorded after it was done: a crash in between may answer a command
twice, never run a turn twice. The failpoints `channel.received` (before the submit) and
`channel.recorded` (after it, before the ack) let the crash tests cut there.

Entry point: `run_channel(channel, platform, parts)`, run by the channel's runner as a task
after `platform.start()`; it returns only when cancelled (then it closes what it started) and
raises the `PlatformError` with which `platform.inbound()` gave up.
"""

from __future__ import annotations

import asyncio
import contextlib

from app.errors import FoyaError
from app.failpoints import failpoint
from app.jsontypes import JSONObject
from app.kernel.channels.conversation_follow import Follower
from app.kernel.channels.conversation_parts import ConversationParts
from app.kernel.channels.conversation_recovery import Unfinished, finish_open, restored
from app.kernel.channels.decisions import Decisions
from app.kernel.channels.inbound import ChannelSettings, Command, Refusals, allowed, command
from app.kernel.channels.platform import Inbound, Outbound, Platform
from app.kernel.channels.replies import Pace, Writer
from app.kernel.channels.texts import Texts
from app.kernel.sessions import SessionNotFound
from app.kernel.turns.inputs import TurnInput
from app.logs import get_logger
from app.store.channel_ledger import AlreadyRecorded, Receipt


async def run_channel(
    channel: ChannelSettings, platform: Platform, parts: ConversationParts
) -> None:
    """Run `channel`'s conversations on `platform` until cancelled."""
    conversation = Conversation(channel, platform, parts)
    try:
        await conversation.run()
    finally:
        await conversation.close()


class Conversation:
    """One channel's chats: their items, sessions, followers and replies."""

    def __init__(self, channel: ChannelSettings, platform: Platform, parts: ConversationParts):
        self.channel = channel
        self.platform = platform
        self.parts = parts
        self.texts = Texts(channel.locale)
        self.refusals = Refusals()
        self.decisions = Decisions(platform, parts.approvals, parts.questions, self.texts)
        self.paces: dict[str, Pace] = {}
        self.followers: dict[str, Follower] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self.log = get_logger("foya.channels")

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.recover()
        async for item in self.platform.inbound():
            await self.handle(item)

    async def close(self) -> None:
        for follower in list(self.followers.values()):
            await follower.stop()
        self.followers.clear()
        if self._stopping:
            await asyncio.wait(self._stopping)

    async def recover(self) -> None:
        """Finish the replies a crash cut; follow again those of turns still running, and the
        sessions whose queued messages a start put back."""
        parts, max_text = self.parts, self.platform.max_text
        args = (self.channel.id, parts.store, self.writer, self.texts, max_text)
        for unfinished in await finish_open(*args, parts.turns.running):
            row = unfinished.reply.row
            await self._follower(row.chat, row.session_id, unfinished)
        for chat, session, seq in await restored(self.channel.id, parts.store, parts.queues):
            await self._follower(chat, session, cursor=seq)

    async def handle(self, item: Inbound) -> None:
        """Handle one item (see the module's docstring); never raises but a cancel."""
        store = self.parts.store
        if await store.inbound_seen(self.channel.id, item.key):
            self._count("duplicate", "in", "acked")
            await self.platform.ack(item)
            return
        try:
            recorded = await self._handle(item)
        except Exception as exc:
            # Recorded anyway: an item that fails every time must not hold up the chat.
            self.log.exception("channel item failed", channel=self.channel.id)
            self._count("text" if item.button is None else "button", "in", "failed")
            error = exc.message if isinstance(exc, FoyaError) else type(exc).__name__
            await self.say(item.chat, self.texts("request_failed", error=error))
            recorded = False
        if not recorded:
            with contextlib.suppress(AlreadyRecorded):
                await store.record_inbound(Receipt(self.channel.id, item.key, outcome="handled"))
        await self.platform.ack(item)

    async def _handle(self, item: Inbound) -> bool:
        """Act on `item`; True if the turn's commit recorded it."""
        if item.button is not None:
            self._count("button", "in", await self.decisions.press(item))
            return False
        found = command(item.text)
        session = await self._bound(item.chat)
        pairing = found is not None and found.name == "bind"
        if session is None and not pairing and not allowed(self.channel, item):
            self._count("text" if found is None else "command", "in", "refused")
            if self.refusals.due(item.user):
                await self.say(item.chat, self.texts("stranger", user=item.user))
            return False
        if found is not None:
            self._count("command", "in", found.name)
            await self._command(item, found, session)
            return False
        if not item.text.strip():
            self._count("text", "in", "unsupported")
            await self.say(item.chat, self.texts("unsupported_message"))
            return False
        return await self._turn(item, session)

    # -- turns ---------------------------------------------------------------------------------

    async def _turn(self, item: Inbound, session: str | None) -> bool:
        if session is None:
            session = await self._new_session(item)
        await self._follower(item.chat, session)  # subscribed before the turn's first fact
        failpoint("channel.received")
        receipt = Receipt(self.channel.id, item.key, session, "turn")
        try:
            accepted = await self.parts.turns.submit(
                session, TurnInput(message=item.text.strip()), receipt=receipt
            )
        except AlreadyRecorded:
            self._count("text", "in", "duplicate")
            return True
        except FoyaError as exc:
            self._count("text", "in", "failed")
            await self.say(item.chat, self.texts("request_failed", error=exc.message))
            return False
        failpoint("channel.recorded")
        self._count("text", "in", accepted["status"])
        if accepted["status"] == "queued":
            await self.say(item.chat, self.texts("queued"))
        return True

    async def _bound(self, chat: str) -> str | None:
        """The chat's session, if it is bound to one that still exists."""
        session = await self.parts.bindings.session_of(self.channel.id, chat)
        if session is None:
            return None
        try:
            await self.parts.sessions.row(session)
        except SessionNotFound:
            await self.parts.bindings.unbind_session(session)
            return None
        return session

    async def _new_session(self, item: Inbound) -> str:
        """A new session with the channel's settings, bound to the item's chat."""
        ch = self.channel
        fields: JSONObject = {}
        for name in ("connection_id", "model", "project_id", "approval_mode"):
            value = getattr(ch, name)
            if value:
                fields[name] = value
        created = await self.parts.sessions.create(fields)
        session = str(created["id"])
        await self._bind(item, session)
        return session

    async def _bind(self, item: Inbound, session: str) -> None:
        await self.parts.bindings.bind(
            self.channel.id, item.chat, session, item.display_name, kind=item.chat_kind
        )
        await self._follower(item.chat, session)

    # -- commands ------------------------------------------------------------------------------

    async def _command(self, item: Inbound, found: Command, session: str | None) -> None:
        say, t = self.say, self.texts
        if found.name == "help":
            await say(item.chat, t("help"))
        elif found.name == "bind":
            await self._pair(item, found.code)
        elif found.name == "new":
            try:
                await self._new_session(item)
            except FoyaError as exc:
                await say(item.chat, t("request_failed", error=exc.message))
                return
            await say(item.chat, t("new_chat"))
        elif session is None:
            await say(item.chat, t("conversation_unbound"))
        elif found.name == "stop":
            await self.parts.turns.cancel(session)
            await say(item.chat, t("task_stopped"))
        else:
            await say(item.chat, await self._status(session))

    async def _pair(self, item: Inbound, code: str) -> None:
        if not code:
            await self.say(item.chat, self.texts("pairing_usage"))
            return
        try:
            session = self.parts.pairings.consume(code, self.channel.id, item.chat)
            await self.parts.sessions.row(session)
        except FoyaError:
            await self.say(item.chat, self.texts("pairing_failed"))
            return
        await self._bind(item, session)
        await self.say(item.chat, self.texts("pairing_complete"))

    async def _status(self, session: str) -> str:
        t, parts = self.texts, self.parts
        row = await parts.sessions.get(session)
        state = t("state_running") if parts.turns.running(session) else t("state_idle")
        return t(
            "status",
            title=row.get("title") or t("untitled"),
            model=row.get("model") or "-",
            state=state,
            queued=len(parts.queues.items(session)),
        )

    # -- chats ---------------------------------------------------------------------------------

    def writer(self, chat: str) -> Writer:
        pace = self.paces.get(chat)
        if pace is None:
            pace = self.paces[chat] = Pace(self.platform.edit_interval)
        return Writer(self.platform, chat, pace, self._counted)

    async def say(self, chat: str, text: str) -> None:
        await self.writer(chat).send(Outbound(text), "notice")

    async def _follower(
        self, chat: str, session: str, adopt: Unfinished | None = None, cursor: int | None = None
    ) -> Follower:
        """The chat's follower of `session` (replacing one of another session), continuing
        `adopt` if given, replaying what was stored after `cursor` if given."""
        current = self.followers.get(chat)
        if current is not None and current.session == session:
            return current
        if current is not None:
            task = asyncio.create_task(current.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        parts = (self.parts.store, self.parts.broker, self.parts.sessions)
        if cursor is None:
            cursor = await self.parts.store.head_seq()  # before subscribing: see `Follower`
        follower = Follower(
            self.channel.id,
            session,
            self.writer(chat),
            parts,
            self.decisions,
            self.texts,
            self.platform.max_text,
            cursor,
        )
        self.followers[chat] = follower
        if adopt is None:
            follower.start()
        else:
            follower.start(adopt.reply, adopt.said)
        return follower

    def _count(self, kind: str, direction: str, outcome: str) -> None:
        self.parts.metrics.channel_messages.labels(
            kind=kind, direction=direction, outcome=outcome
        ).inc()

    def _counted(self, kind: str, outcome: str) -> None:
        self._count(kind, "out", outcome)
