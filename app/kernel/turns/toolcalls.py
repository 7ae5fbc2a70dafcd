"""A step's tool calls as the turn core handles them: the call the model streamed (`PartialCall`,
gathered delta by delta), the call parsed from it (`ParsedCall`), how a tool is offered to the
model (`exposure`, `schema`), and how a call's events leave (`Emit`).

A tool's `exposure` (Foya's; absent means `direct`) decides whether the model is offered it:
`direct` always, `hidden` never, `deferred` once `tool_search` activated it for the session.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import NotRequired, TypedDict

from app.jsontypes import JSONObject
from app.kernel.ids import new_id
from app.tools import Tool

#: Store and publish one event of the call's turn: `(kind, payload, blobs=…, journal=…)`.
Emit = Callable[..., Awaitable[None]]


class PartialCall(TypedDict):
    """A tool call while its deltas stream in: the argument text arrives in pieces."""

    id: str | None
    name: str | None
    args: list[str]
    begun: bool  # its `tool_begin` is out


class ParsedCall(TypedDict):
    """A tool call as the step runs it; `invalid` when its arguments were not a JSON object
    (it is answered with an error result, never run)."""

    id: str
    name: str
    input: JSONObject
    invalid: NotRequired[bool]


def exposure(tool: Tool) -> str:
    """`direct`, `deferred` or `hidden` (a tool that does not say is `direct`)."""
    return str(getattr(tool, "exposure", "direct"))


def schema(tool: Tool) -> JSONObject:
    """The tool as a Chat Completions function definition (what the provider is sent)."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def parsed(call: PartialCall) -> ParsedCall:
    """The streamed call, its arguments decoded (a call without an id gets one)."""
    raw = "".join(call["args"]) or "{}"
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return {"id": call["id"] or new_id(), "name": call["name"] or "", "input": value}
    return {"id": call["id"] or new_id(), "name": call["name"] or "", "input": {}, "invalid": True}
