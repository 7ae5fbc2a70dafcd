"""How stored facts read on the wire: the shapes Foya's desktop client reads.

The log keeps facts as the kernel needs them (a call's arguments decoded for the model and for
compaction, who stopped a command, shapes older versions stored). The desktop reads its own
types (`apps/desktop/src/lib/api.ts`, `stores/conversation.ts`): a tool call's `input` is the
JSON text of its arguments and its `status` one of `queued | running | done | error`; optional
fields are absent, never JSON null; `tool_begin` has an `input` and `tool_end` an `is_error`.
Every such rendering lives here, once: `Event.wire` applies `render_payload` to each envelope
and the history route renders messages with `chat_message`, so a message reads the same in
`message_end` and in `GET …/history`, whichever version stored it.

A leaf: it imports nothing of the app, and works on decoded JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict

TOOL_STATUSES = ("queued", "running", "done", "error")
#: A tool card's state on the wire, one of `TOOL_STATUSES`.
Status = Literal["queued", "running", "done", "error"]


class ShownCall(TypedDict):
    """A tool call as the client's `ToolCallView` reads it."""

    id: str
    name: str
    input: str  # the arguments as JSON text
    status: Status


def arguments_text(value: Any) -> str:
    """A tool call's arguments (a decoded JSON object) as the JSON text clients show and
    parse: the one rendering of arguments on the wire (events and history)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def chat_message(message: Mapping[str, Any], results: Mapping[str, bool] | None = None) -> Any:
    """A stored message as the client's `ChatMessage`. `results` maps the tool call ids whose
    result is known to whether it was an error (history knows them; `message_end` of an
    assistant message comes before its tools ran, so its calls are `queued`)."""
    shaped = {k: v for k, v in message.items() if v is not None}
    shaped.setdefault("content", "")  # required: a call-only message may have stored none
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        known = results or {}
        shaped["tool_calls"] = [_call(c, known) for c in calls if isinstance(c, dict)]
    return shaped


def _call(call: Mapping[str, Any], results: Mapping[str, bool]) -> ShownCall:
    found = results.get(str(call.get("id")))
    status: Status = "queued" if found is None else ("error" if found else "done")
    return {
        "id": str(call.get("id") or ""),
        "name": str(call.get("name") or ""),
        "input": arguments_text(call.get("input", {})),
        "status": status,
    }


def _message(payload: Any) -> Any:
    return chat_message(payload) if isinstance(payload, dict) else payload


def _tool_begin(payload: Any) -> Any:
    # Foya's `tool_begin` has no input yet (the arguments are still streaming); the desktop's
    # store reads one: it is the empty text until `tool_update` brings the arguments.
    if isinstance(payload, dict) and "input" not in payload:
        return {**payload, "input": ""}
    return payload


def _tool_update(payload: Any) -> Any:
    # Stored by older versions: `input` an object, status `pending` (Foya's `queued`).
    if not isinstance(payload, dict) or (
        isinstance(payload.get("input", ""), str) and payload.get("status") != "pending"
    ):
        return payload
    out = dict(payload)
    if "input" in out:
        out["input"] = arguments_text(out["input"])
    if out.get("status") == "pending":
        out["status"] = "queued"
    return out


def _tool_end(payload: Any) -> Any:
    # The log (like Foya) leaves `is_error` out when false; the desktop's store reads a boolean.
    if isinstance(payload, dict) and "is_error" not in payload:
        return {**payload, "is_error": False}
    return payload


def _background_command(payload: Any) -> Any:
    # The log keeps who stopped a command, `shutdown` too; Foya's client knows `agent | user`
    # only: a command the kernel's shutdown ended is shown `cancelled`, by no one.
    if isinstance(payload, dict) and payload.get("stopped_by") not in (None, "agent", "user"):
        return {k: v for k, v in payload.items() if k != "stopped_by"}
    return payload


#: Event kinds whose stored payload is not the wire's. Stored facts are never rewritten, so
#: the rendering happens when an envelope is built.
_RENDERINGS: dict[str, Callable[[Any], Any]] = {
    "message_end": _message,
    "message_imported": _message,
    "tool_begin": _tool_begin,
    "tool_update": _tool_update,
    "tool_end": _tool_end,
    "background_command_updated": _background_command,
}


def render_payload(kind: str, payload: Any) -> Any:
    """`payload` of an event of `kind` as clients receive it."""
    rendering = _RENDERINGS.get(kind)
    return payload if rendering is None else rendering(payload)
