"""A Telegram update → an `Inbound`: which messages are for the bot, and their text cleaned.

Private chats are always addressed. In a group a message is for the bot only when it is a
command (`/cmd`, or `/cmd@ourbot`; `/cmd@otherbot` is not) or when it mentions `@ourbot`
anywhere; a button press on one of our messages always is. The text (or a media message's
caption) loses every `@ourbot` mention and the `@ourbot` of its command; a message without
either (a photo, a sticker) in a private chat comes with an empty text, so the runtime can say
that only text is understood. Edits, channel posts and the rest are never requested.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from app.kernel.channels.platform import ChatKind, Inbound

if TYPE_CHECKING:
    from telegram import Chat, Update, User

_GROUPS = ("group", "supergroup")
_COMMAND = re.compile(r"(/[^\s@]+)@(\S+)")  # `/cmd@target` opening a text


def to_inbound(update: Update, username: str) -> Inbound | None:
    """The item `update` is for the runtime, or None (not addressed to us, or not handled)."""
    key = str(update.update_id)
    query = update.callback_query
    if query is not None:
        if query.message is None or query.data is None:
            return None  # a press under an inline-mode message, or a game: not ours
        chat = query.message.chat
        return Inbound(
            key=key,
            chat=str(chat.id),
            chat_kind=_kind(chat),
            button=query.data,
            message=str(query.message.message_id),
            **_sender(query.from_user),
        )
    message = update.message
    if message is None or not message.message_id or not message.chat.id:
        return None
    if message.from_user is not None and message.from_user.is_bot:
        return None  # another bot in a group: never a person talking to us
    kind = _kind(message.chat)
    text = message.text or message.caption or ""
    if kind == "group" and not addressed(message.text or "", username):
        return None
    return Inbound(
        key=key,
        chat=str(message.chat.id),
        chat_kind=kind,
        text=clean(text, username),
        message=str(message.message_id),
        **_sender(message.from_user),
    )


def addressed(text: str, username: str) -> bool:
    """A group message is for the bot: a command (not another bot's) or a mention of it."""
    if text.startswith("/"):
        command = text.split(maxsplit=1)[0]
        _, at, target = command.partition("@")
        return not at or target.lower() == username.lower()
    return bool(username) and _mention(username).search(text) is not None


def clean(text: str, username: str) -> str:
    """`text` without the bot's mentions and without the `@bot` of a leading command."""
    if not username:
        return text.strip()
    command = _COMMAND.match(text)
    if command and command.group(2).lower() == username.lower():
        text = command.group(1) + text[command.end() :]
    return _mention(username).sub("", text).strip()


def _mention(username: str) -> re.Pattern[str]:
    # Case-insensitive and whole-name only: `@foya_bot2` is someone else. A space after the
    # mention goes with it ("hi @bot there" → "hi there").
    return re.compile(rf"@{re.escape(username)}(?![A-Za-z0-9_]) ?", re.IGNORECASE)


def _kind(chat: Chat) -> ChatKind:
    return "group" if chat.type in _GROUPS else "private"


def _sender(user: User | None) -> dict[str, str]:
    if user is None:  # an anonymous group admin, or a message sent on behalf of a channel
        return {"user": "", "username": "", "display_name": ""}
    handle = user.username or ""
    display = user.full_name.strip() or (f"@{handle}" if handle else str(user.id))
    return {"user": str(user.id), "username": handle, "display_name": display}
