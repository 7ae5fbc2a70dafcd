"""Feishu events as the runtime sees them: `im.message.receive_v1` and `card.action.trigger`
payloads (the JSON Feishu sends, `{"schema": "2.0", "header": {...}, "event": {...}}`) turned
into `Inbound` items, or None for what is not for us.

Rules (Foya's, §5.2 and §5.3 of the channels spec, where its SDK applied them):

- only people's messages (`sender_type == "user"`): the bot's own and other apps' are dropped;
- in a group, only a message that @mentions the bot (its `open_id`, from `/bot/v3/info`);
- the bot's mention keys (`@_user_1`) are removed from the text, other people's become
  `@Name`; the text is trimmed. Text and rich-text (`post`) messages carry text; any other
  type (image, file, sticker) arrives with an empty text, for the runtime to decline;
- `user` is the sender's `open_id` (what a QR registration puts in `allowed_users`), else
  their `user_id`; `display_name` is that id in a private chat and the chat id in a group
  (events carry no names); `username` is empty (Feishu has no handles);
- a card action's chat kind is not in its payload: it is the kind last seen in a message of
  that chat, else `group`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from app.kernel.channels.platform import ChatKind, Inbound

MESSAGE_EVENT = "im.message.receive_v1"
CARD_ACTION = "card.action.trigger"
_SPACES = re.compile(r"[ \t]{2,}")  # left where a mention was removed


def event_id(payload: Mapping[str, Any]) -> str:
    header = payload.get("header")
    value = header.get("event_id") if isinstance(header, Mapping) else None
    return value if isinstance(value, str) else ""


def message_inbound(payload: Mapping[str, Any], bot_open_id: str) -> Inbound | None:
    """The message of an `im.message.receive_v1` payload, or None if it is not for us."""
    key, event = event_id(payload), _map(payload.get("event"))
    sender, message = _map(event.get("sender")), _map(event.get("message"))
    if not key or sender.get("sender_type") != "user":
        return None
    ids = _map(sender.get("sender_id"))
    user = _str(ids.get("open_id")) or _str(ids.get("user_id"))
    chat = _str(message.get("chat_id"))
    if not user or not chat:
        return None
    kind: ChatKind = "private" if message.get("chat_type") == "p2p" else "group"
    mentions = [_map(m) for m in message.get("mentions") or [] if isinstance(m, Mapping)]
    ours = {_str(m.get("key")) for m in mentions if _mentions_bot(m, bot_open_id)}
    if kind == "group" and not ours:
        return None
    text = _text(_str(message.get("message_type")), _str(message.get("content")))
    for mention in mentions:
        mark = _str(mention.get("key"))
        if mark:
            text = text.replace(mark, "" if mark in ours else f"@{_str(mention.get('name'))}")
    return Inbound(
        key=key,
        chat=chat,
        chat_kind=kind,
        user=user,
        username="",
        display_name=user if kind == "private" else chat,
        text=_SPACES.sub(" ", text).strip(),
        message=_str(message.get("message_id")) or None,
    )


def card_inbound(payload: Mapping[str, Any], kinds: Mapping[str, ChatKind]) -> Inbound | None:
    """The button press of a `card.action.trigger` payload, or None if it is not ours."""
    key, event = event_id(payload), _map(payload.get("event"))
    value = _map(_map(event.get("action")).get("value"))
    data, context = _str(value.get("data")), _map(event.get("context"))
    chat = _str(context.get("open_chat_id"))
    operator = _map(event.get("operator"))
    user = _str(operator.get("open_id")) or _str(operator.get("user_id"))
    if not key or not data or not chat or not user:
        return None
    kind = kinds.get(chat, "group")
    return Inbound(
        key=key,
        chat=chat,
        chat_kind=kind,
        user=user,
        username="",
        display_name=user if kind == "private" else chat,
        button=data,
        message=_str(context.get("open_message_id")) or None,
    )


def _mentions_bot(mention: Mapping[str, Any], bot_open_id: str) -> bool:
    mentioned = _str(_map(mention.get("id")).get("open_id"))
    return bool(bot_open_id) and mentioned == bot_open_id


def _text(message_type: str, content: str) -> str:
    try:
        body = json.loads(content) if content else {}
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    if message_type == "text":
        return _str(body.get("text"))
    if message_type == "post":
        # A received post is `{"title", "content": [[element, …], …]}`, sometimes wrapped in
        # a locale key (`{"zh_cn": {…}}`).
        if "content" not in body and len(body) == 1:
            body = _map(next(iter(body.values())))
        lines = [_str(body.get("title"))] if body.get("title") else []
        for row in body.get("content") or []:
            if isinstance(row, list):
                lines.append("".join(_element(_map(e)) for e in row))
        return "\n".join(lines)
    return ""


def _element(element: Mapping[str, Any]) -> str:
    tag = element.get("tag")
    if tag in ("text", "a", "md"):
        return _str(element.get("text"))
    if tag == "at":
        return _str(element.get("user_id"))  # the mention key, replaced like a text's
    if tag == "code_block":
        return _str(element.get("text"))
    return ""


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
