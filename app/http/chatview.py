"""The history a client reads (`GET /sessions/{id}/history`): stored messages in the shape of
Foya's desktop `ChatMessage[]`.

Stored messages keep what the kernel needs (a call's arguments decoded, for the model and for
compaction); the client's tool view reads a call's `input` as the JSON text of its arguments
and a card `status` (`queued | running | done | error`). Both are rendered here, once, from
the stored facts, so messages stored by any version read the same. A field a message holds as
JSON null (an old `turn_reason`) is left out: the client's optional fields are strings; a
missing `content` is served empty (the client requires it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from app.events import Message, ToolCall, ToolStatus, arguments_text


def chat_messages(messages: Iterable[Message]) -> list[Message]:
    """`messages` (oldest first) as the client reads them."""
    listed = list(messages)
    results: dict[str, bool] = {}  # tool_call_id → the result was an error
    for message in listed:
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            results[message["tool_call_id"]] = bool(message.get("is_error"))
    return [_chat_message(m, results) for m in listed]


def _chat_message(message: Message, results: dict[str, bool]) -> Message:
    shaped = cast(Message, {k: v for k, v in message.items() if v is not None})
    shaped.setdefault("content", "")  # required: a call-only message may have stored none
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        shaped["tool_calls"] = [_call(c, results) for c in calls if isinstance(c, dict)]
    return shaped


def _call(call: ToolCall | dict[str, Any], results: dict[str, bool]) -> ToolCall:
    found = results.get(str(call.get("id")))
    status: ToolStatus = "queued" if found is None else ("error" if found else "done")
    return {
        "id": str(call.get("id") or ""),
        "name": str(call.get("name") or ""),
        "input": arguments_text(call.get("input", {})),
        "status": status,
    }
