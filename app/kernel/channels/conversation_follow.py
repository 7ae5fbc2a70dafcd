"""Following a bound chat's session: its live events become the chat's reply and decisions.

A `Follower` subscribes to `session:<id>` before the chat's input is submitted (so the turn's
first event cannot be missed), reads the stored events after the head read before it
subscribed, then the live ones (`app.kernel.streams.SessionStream`: no gap, no duplicate);
when the broker cut it off for being slow, it subscribes again and replays from its cursor.
It keeps up with the stream at once and leaves the pacing to the reply
(`app.kernel.channels.replies`), so it is never the slow subscriber. Every turn of the
session is shown, whichever client started it: the chat is one more view of its session.

Per event: `turn_started` opens a reply (its row is stored first); deltas grow its text,
reasoning and tools set its status line; an assistant `message_end` replaces the text of its
step with the stored one (a lossy delta may have been dropped); `turn_complete` closes the
reply with the final text (stopped or failed turns say so, an `error` is appended).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from app import events as k
from app.broker import Broker
from app.events import Event
from app.kernel.channels.decisions import Decisions
from app.kernel.channels.replies import Reply, Shape, Writer
from app.kernel.channels.texts import Texts
from app.kernel.emit import topic
from app.kernel.sessions import Sessions
from app.kernel.streams import SessionStream
from app.logs import get_logger
from app.store import Store
from app.store.channel_ledger import ReplyRow


def final_text(texts: Texts, said: list[str], done: dict[str, Any], error: str) -> str:
    """A closed turn's reply: what the assistant said, the error, how it ended (spec §4.8)."""
    text = "\n\n".join(s for s in said if s.strip())
    if error:
        text = f"{text}\n\n{error}" if text else error
    status, reason = done.get("status"), done.get("reason")
    if status == "cancelled":
        text = f"{text}\n\n{texts('reply_stopped')}" if text else texts("task_stopped")
    elif status == "failed" and reason == "interrupted":
        text = f"{text}\n\n{texts('reply_interrupted')}" if text else texts("reply_interrupted")
    return text or texts("empty_response")


def content(payload: Any) -> str:
    value = payload.get("content") if isinstance(payload, dict) else None
    return value if isinstance(value, str) else ""


class Follower:
    """The task showing one session in one chat."""

    def __init__(
        self,
        channel_id: str,
        session: str,
        writer: Writer,
        parts: tuple[Store, Broker, Sessions],
        decisions: Decisions,
        texts: Texts,
        max_text: int,
        cursor: int,
    ) -> None:
        """Subscribes at once; `cursor` is the head seq read before (the stream replays what
        was stored after it, so nothing committed meanwhile is missed)."""
        self.cursor = cursor
        self.channel_id = channel_id
        self.session = session
        self.writer = writer
        self.store, self.broker, self.sessions = parts
        self.decisions = decisions
        self.texts = texts
        self.max_text = max_text
        self.reply: Reply | None = None
        self.said: list[str] = []  # the run's finished assistant texts
        self.step = ""  # the text of the step being generated
        self.error = ""
        self.closing: set[asyncio.Task[None]] = set()
        self.log = get_logger("foya.channels")
        self._stack = contextlib.ExitStack()
        self._sub = self._stack.enter_context(self.broker.subscribe(topic(session)))
        self.task: asyncio.Task[None] | None = None

    def start(self, adopt: Reply | None = None, said: list[str] | None = None) -> None:
        """Follow from now on (continuing `adopt`, a reply of a turn still running)."""
        self.reply, self.said = adopt, said or []
        self.task = asyncio.create_task(self._run(), name=f"follow:{self.session}")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self._stack.close()
        if self.closing:
            await asyncio.wait(self.closing, timeout=5.0)

    async def _run(self) -> None:
        try:
            cursor = self.cursor
            while True:
                stream = SessionStream(self.store, self.session, self._sub, cursor)
                while (event := await stream.next()) is not None:
                    await self._on(event)
                cursor = stream.cursor
                if not self._sub.cut_off:
                    return  # the session was deleted, or the broker closed
                self._stack.close()
                self._stack = contextlib.ExitStack()
                self._sub = self._stack.enter_context(self.broker.subscribe(topic(self.session)))
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("channel follower failed", session=self.session)
        finally:
            self._stack.close()

    async def _on(self, event: Event) -> None:
        kind, payload = event.kind, event.payload
        if kind == k.TURN_STARTED:
            await self._open(event)
            return
        handler = _SYNC.get(kind)
        if handler is not None:
            handler(self, payload)
        elif kind == k.APPROVAL_REQUEST:
            await self._approval(payload)
        elif kind == k.QUESTION_REQUESTED:
            self._status("waiting_answer")
            await self.decisions.ask_questions(self.session, self.writer, payload)
        elif kind in (k.APPROVAL_RESOLVED, k.QUESTION_RESOLVED):
            outcome = payload.get("decision") or payload.get("status") or ""
            await self.decisions.resolved(str(payload["id"]), str(outcome))
        elif kind == k.TURN_COMPLETE:
            self._close(payload)

    async def _open(self, event: Event) -> None:
        """A turn started: its reply's row is stored before anything of it is sent."""
        chat, run = self.writer.chat, str(event.run_id)
        row = ReplyRow(self.channel_id, chat, self.session, run, event.seq, (), "streaming")
        await self.store.put_reply(row)
        self.reply = Reply(self.writer, self.store, row, self.max_text, Shape())
        self.said, self.step, self.error = [], "", ""

    def _keep(self, task: asyncio.Task[None]) -> None:
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    def _text(self) -> str:
        return "\n\n".join(s for s in [*self.said, self.step] if s.strip())

    def _status(self, key: str, **fields: str) -> None:
        if self.reply is not None:
            self.reply.update(status=self.texts(key, **fields))

    def _delta(self, payload: Any) -> None:
        if self.reply is not None and isinstance(payload, str):
            self.step += payload
            self.reply.update(text=self._text(), status="")

    def _ended(self, payload: Any) -> None:
        if self.reply is None or not isinstance(payload, dict):
            return
        if payload.get("role") == "assistant":
            said = content(payload)
            if said.strip():
                self.said.append(said)
            self.step = ""
            self.reply.update(text=self._text())

    def _tool(self, payload: Any) -> None:
        if isinstance(payload, dict) and payload.get("name"):
            self._status("running_tool", tool=str(payload["name"]))

    async def _approval(self, payload: dict[str, Any]) -> None:
        row = await self.sessions.row(self.session)
        if row.get("approval_mode") != "manual":
            return  # decided by the guardian (auto), not by a person
        self._status("waiting_approval")
        await self.decisions.ask_approval(self.session, self.writer, payload)

    def _close(self, payload: dict[str, Any]) -> None:
        if self.reply is None:
            return
        said = [*self.said, self.step] if self.step.strip() else self.said
        self._keep(self.reply.close(final_text(self.texts, said, payload, self.error)))
        self.reply = None

    def _err(self, payload: Any) -> None:
        self.error = str(payload)


_SYNC: dict[str, Callable[[Follower, Any], None]] = {
    k.MESSAGE_DELTA: Follower._delta,
    k.REASONING_DELTA: lambda f, _: f._status("thinking"),
    k.MESSAGE_END: Follower._ended,
    k.TOOL_BEGIN: Follower._tool,
    k.ERROR: Follower._err,
}
