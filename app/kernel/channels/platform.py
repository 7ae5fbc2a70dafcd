"""What the channel runtime needs of a chat platform (Telegram, Feishu): the one contract
between `app.kernel.channels` (who may talk, which session, turns, approvals) and each
platform's package (its protocol, its library, its formatting).

A platform delivers `Inbound` items and keeps its own cursor: `ack(item)` is called only once
the item is recorded (the same transaction that makes it a turn input), and only then may the
platform acknowledge it upstream (Telegram: the next `getUpdates` offset). An item delivered
again after a crash carries the same `key`, by which the runtime knows it was seen.

Everything a platform sends is plain text from the runtime, with buttons where a decision is
asked; the platform escapes, formats and splits it for its own rules, and rate-limits its
edits. Every method may raise `PlatformError`; a `retry_after` says when the platform asked
to be called again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

ChatKind = Literal["private", "group"]


class PlatformError(Exception):
    """The platform refused or could not be reached. `retry_after`: seconds it asked to wait
    (a 429), or None. `permanent`: retrying the same call cannot succeed (a bad token, a
    message too old to edit). Its text never holds a secret (URLs are redacted)."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent


@dataclass(frozen=True)
class Inbound:
    """One thing a person did in a chat: a message, or a press of one of our buttons.

    `key` identifies it across redeliveries (Telegram: the update id; Feishu: the event id).
    `chat` is the platform's chat id as text; `user` the sender's id as text, `username` their
    handle if they have one. `text` is the message with the bot's mention removed (commands
    keep their `/name`, without an `@bot` suffix). `button` is the data of a pressed button
    (then `text` is empty), `message` the platform id of the message it belongs to.
    """

    key: str
    chat: str
    chat_kind: ChatKind
    user: str
    username: str
    display_name: str
    text: str = ""
    button: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Button:
    """A button under a message: `label` shown, `data` returned as `Inbound.button` (at most
    64 bytes: Telegram's limit for callback data)."""

    label: str
    data: str


@dataclass(frozen=True)
class Outbound:
    """A message as the runtime means it: plain text (the platform escapes it) and, optionally,
    one row of buttons. `status` is a short line shown above the text (what the agent is
    doing: thinking, running a tool), or empty."""

    text: str
    buttons: Sequence[Button] = field(default_factory=tuple)
    status: str = ""


class Platform(Protocol):
    """One running bot of a channel, on one platform."""

    #: How often one message may be edited, in seconds (Telegram: about one edit a second).
    edit_interval: float
    #: The longest text one message may carry, in characters; a longer reply is split.
    max_text: int

    async def start(self) -> None:
        """Connect (check the credentials: a bad token raises a permanent `PlatformError`)."""

    def inbound(self) -> AsyncIterator[Inbound]:
        """Items as they arrive, forever; reconnecting is the platform's job (it raises
        `PlatformError` only when it gives up, e.g. credentials revoked)."""

    async def ack(self, item: Inbound) -> None:
        """`item` is recorded: it may be acknowledged upstream and is not delivered again."""

    async def send(self, chat: str, message: Outbound) -> list[str]:
        """Send `message` to `chat` (split if longer than `max_text`); the ids of the messages
        sent, in order (the buttons go with the last one)."""

    async def edit(self, chat: str, message_id: str, message: Outbound) -> None:
        """Replace the text (and buttons) of a message we sent. The runtime never calls it
        more often than `edit_interval` for one chat; an unchanged text is not an error."""

    async def answer_button(self, item: Inbound, notice: str) -> None:
        """Acknowledge a button press (Telegram: answerCallbackQuery), with a short notice."""

    async def close(self) -> None:
        """Stop receiving and release connections; idempotent."""
