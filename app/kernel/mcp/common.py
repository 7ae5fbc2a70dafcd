"""What the MCP package shares without importing the SDK (its import costs ~0.3 s, paid only
once a server is configured or an MCP route is used)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The most characters of text one MCP answer puts in front of the model (a tool's result, a
#: resource, a prompt, a listing): what is longer is cut, with `cut_mark` saying so.
MAX_OUTPUT = 200_000
_TAGS = frozenset({"role", "type"})
_MAX_TAG = 64


class NotConnected(Exception):
    """The server is not connected (yet, or any more)."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect (and answer a ping), for one call, between two pings."""

    connect: float
    call: float
    ping_interval: float


def cut_mark(limit: int = MAX_OUTPUT) -> str:
    """What ends a text cut at `limit` characters."""
    return f"\n[output cut at {limit} characters]"


def capped(text: str, limit: int = MAX_OUTPUT) -> str:
    """`text`, or its first `limit` characters and `cut_mark` when it is longer."""
    return text if len(text) <= limit else text[:limit] + cut_mark(limit)


def capped_value(value: Any, limit: int = MAX_OUTPUT) -> Any:
    """A JSON-like answer (a resource read, a prompt, a listing) whose strings, in document
    order, hold at most `limit` characters between them: the string that crosses the limit is
    cut with `cut_mark`, later ones are emptied (but for short `role`s and `type`s). A `blob`
    (base64) is kept whole or emptied, as a cut one would not decode. The shape stays what the
    client and the model expect."""
    room = limit

    def walk(item: Any, key: str = "") -> Any:
        nonlocal room
        if isinstance(item, str):
            if key in _TAGS and len(item) <= _MAX_TAG:
                return item  # `role`, `type`: the shape's own words, kept so it stays valid
            if len(item) <= room:
                room -= len(item)
                return item
            kept = "" if key == "blob" or room == 0 else item[:room] + cut_mark(limit)
            room = 0
            return kept
        if isinstance(item, dict):
            return {k: walk(v, k) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value)
