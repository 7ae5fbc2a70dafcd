"""The history a client reads (`GET /sessions/{id}/history`): stored messages in the shape of
Foya's desktop `ChatMessage[]`, rendered by `app.wire` (the same rendering `message_end`
gets), with each call's `status` from its result when the result is in the history.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from app.events import Message
from app.kernel.api import servable
from app.wire import chat_message


def chat_messages(messages: Iterable[Message]) -> list[Message]:
    """`messages` (oldest first) as the client reads them."""
    listed = list(messages)
    results: dict[str, bool] = {}  # tool_call_id → the result was an error
    for message in listed:
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            results[message["tool_call_id"]] = bool(message.get("is_error"))
    # A stored record of a wrong shape is served without its bad fields, never a 500.
    return [cast(Message, chat_message(servable(m), results)) for m in listed]
