"""A turn's reply in a chat: one message sent at the turn's first sign of life, edited as the
text grows, split over more messages when it outgrows one, and always ending with the final
text.

- Pacing (`Pace`): every write to one chat (send or edit) waits until `edit_interval` has
  passed since the last one, or longer when the platform said `retry_after`. Writes are not
  queued: each one renders the reply as it is by then, so text arriving meanwhile is
  coalesced into the next edit and a slow platform never builds a backlog.
- Shape: the text is the turn's assistant messages joined by a blank line (so it only grows),
  cut into chunks of `max_text - STATUS_ROOM` characters (plain slicing: a full chunk never
  changes again); the last message carries the `status` line (thinking, running a tool).
- Durability: the reply's row (`app.store.channel_ledger`) is written before its first message
  is sent and again with each message's id, and marked `done` after the final edit. A restart
  finishes each row not done (`app.kernel.channels.conversation_recovery`) by editing the
  messages it names, so a reply is never sent twice. The one window left: a crash after the
  platform took a message and before its id was stored; that message is then sent once more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from app.failpoints import failpoint
from app.kernel.channels.platform import Outbound, Platform, PlatformError
from app.logs import get_logger
from app.store import Store
from app.store.channel_ledger import ReplyRow

STATUS_ROOM = 80  # what a status line may take of a message (it is cut to fit)
ATTEMPTS = 5
BACKOFF = 1.0

Counted = Callable[[str, str], None]  # (kind, outcome) of an outbound write


def chunks(text: str, size: int) -> list[str]:
    """`text` cut into pieces of `size` characters (at least one piece)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class Pace:
    """When the next write to one chat may go out (monotonic seconds)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._next = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        """Wait for this chat's turn, then take it."""
        delay = self._next - self.clock()
        if delay > 0:
            await asyncio.sleep(delay)
        self._next = self.clock() + self.interval

    def hold(self, seconds: float) -> None:
        """The platform asked for `seconds` of quiet."""
        self._next = max(self._next, self.clock() + seconds)


class Writer:
    """Paced, retried writes to one chat."""

    def __init__(self, platform: Platform, chat: str, pace: Pace, counted: Counted) -> None:
        self.platform = platform
        self.chat = chat
        self.pace = pace
        self.counted = counted
        self.log = get_logger("foya.channels")

    async def send(self, message: Outbound, kind: str = "reply") -> list[str]:
        """Send `message`; the ids (empty if the platform kept refusing)."""
        ids = await self._retried(lambda: self.platform.send(self.chat, message), kind, "sent")
        return ids or []

    async def edit(self, message_id: str, message: Outbound, kind: str = "reply") -> bool:
        """Edit a message; False if it could not be."""
        done = await self._retried(lambda: self._edit(message_id, message), kind, "edited")
        return done is not None

    async def _edit(self, message_id: str, message: Outbound) -> list[str]:
        await self.platform.edit(self.chat, message_id, message)
        return [message_id]

    async def _retried(
        self, write: Callable[[], Awaitable[list[str]]], kind: str, outcome: str
    ) -> list[str] | None:
        async with self.pace.lock:
            for _ in range(ATTEMPTS):
                await self.pace.wait()
                try:
                    result = await write()
                except PlatformError as exc:
                    if exc.permanent:
                        break
                    self.pace.hold(exc.retry_after if exc.retry_after else BACKOFF)
                    continue
                self.counted(kind, outcome)
                return result
        self.counted(kind, "failed")
        self.log.warning("channel write failed", chat=self.chat, kind=kind)
        return None


@dataclass
class Shape:
    """What the reply shows: its text so far and its status line."""

    text: str = ""
    status: str = ""
    done: bool = False


class Reply:
    """One turn's reply in one chat; `update` it, `close` it with the final text."""

    def __init__(
        self, writer: Writer, store: Store, row: ReplyRow, max_text: int, shape: Shape
    ) -> None:
        self.writer = writer
        self.store = store
        self.row = row
        self.size = max(1, max_text - STATUS_ROOM)
        self.shape = shape
        self.shown: list[Outbound] = []  # what each message of `row` holds, as far as known
        self._dirty = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def update(self, text: str | None = None, status: str | None = None) -> None:
        """The reply's text or status changed: it is shown at the chat's next turn."""
        if self.shape.done:
            return
        if text is not None:
            self.shape.text = text
        if status is not None:
            self.shape.status = status[: STATUS_ROOM - 2]
        self._dirty.set()
        if self.task is None:
            self.task = asyncio.create_task(self._pump(), name=f"reply:{self.row.run_id}")

    def close(self, final: str) -> asyncio.Task[None]:
        """End the reply with `final` (shown however many writes it takes); the task that
        shows it."""
        self.shape = Shape(final, "", done=True)
        self._dirty.set()
        if self.task is None:
            self.task = asyncio.create_task(self._pump(), name=f"reply:{self.row.run_id}")
        return self.task

    async def _pump(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            shape = replace(self.shape)
            await self.show(shape)
            if shape.done and not self._dirty.is_set():
                self.row = replace(self.row, state="done")
                await self.store.put_reply(self.row)
                return

    async def show(self, shape: Shape) -> None:
        """Bring the chat's messages to `shape`: edit those that differ, send those missing."""
        pieces = chunks(shape.text, self.size)
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            out = Outbound(piece, status=shape.status if last else "")
            if not out.text and not out.status:
                continue  # nothing to show yet
            ids = self.row.message_ids
            if index < len(ids):
                if index < len(self.shown) and self.shown[index] == out:
                    continue
                if await self.writer.edit(ids[index], out):
                    self._showing(index, out)
                continue
            sent = await self.writer.send(out)
            if not sent:
                return  # the platform refuses: the next change (or the final text) tries again
            self.row = replace(self.row, message_ids=(*ids, *sent))
            await self.store.put_reply(self.row)
            failpoint("channel.reply_sent")  # crash tests: a reply cut after a message went out
            self._showing(index, out)

    def _showing(self, index: int, out: Outbound) -> None:
        while len(self.shown) <= index:
            self.shown.append(Outbound("\0"))  # unknown: edited at the next change
        self.shown[index] = out
