"""A Chat Completions event stream's bytes as stream items: text, reasoning and tool-call
deltas, the usage and, at the end, the finish reason.

The bytes are decoded here, not by the SDK: its own iterator builds a pydantic model per chunk,
measured at ~300 µs per chunk (20x the JSON decode), which capped a turn at ~3k deltas/s
(bench/turns.py). An `error` chunk in the middle of the stream raises `MidStreamError` with the
provider's own text, for the provider to report as a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from app.jsontypes import JSONObject
from app.providers.base import (
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    Usage,
)


def usage_of(raw: JSONObject | None) -> Usage:
    """The token counts of a Chat Completions `usage` object (zeros when there is none)."""
    if not raw:
        return Usage()
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    inp = raw.get("prompt_tokens") or 0
    out = raw.get("completion_tokens") or 0
    return Usage(inp, out, raw.get("total_tokens") or inp + out, cached)


class MidStreamError(ProviderError):
    """An error chunk in the middle of a stream; `detail` is the provider's own text."""

    def __init__(self, detail: Any) -> None:
        super().__init__("bad_response", "the provider reported an error mid-stream")
        self.detail = detail


#: The longest line a stream may hold unfinished. A chunk is one token's delta (or one tool
#: call's arguments so far): far below this; a provider that never ends its line is refused
#: instead of growing the buffer without bound.
MAX_LINE = 8 * 1024 * 1024


class LineTooLong(ValueError):
    """A line of the stream passed `MAX_LINE` bytes without ending."""


class StreamDecoder:
    """A Chat Completions event stream's bytes, fed as they arrive, as stream items.

    Each `data:` line is one JSON chunk (the format's providers never split one over several
    lines). Bytes are split on line ends directly: httpx's text and line iterators cost more
    per delta than the rest of the kernel's delta path. `done` once `data: [DONE]` is read;
    `finish` is the last finish reason seen.
    """

    def __init__(self) -> None:
        self.rest = b""
        self.done = False
        self.finish = "stop"

    def feed(self, chunk: bytes) -> Iterator[StreamItem]:
        """The items completed by `chunk`, each as soon as it is decoded (a malformed line
        raises after the items before it)."""
        buffer = self.rest + chunk
        if b"\r" in buffer:  # CRLF or CR line ends (a CR last here may add one blank line)
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, self.rest = buffer.split(b"\n")
        yield from self._decode(lines)
        if len(self.rest) > MAX_LINE:
            raise LineTooLong(f"a stream line passed {MAX_LINE} bytes without ending")

    def flush(self) -> Iterator[StreamItem]:
        """The items of a last line that ended with the body instead of a line end."""
        last, self.rest = self.rest, b""
        return self._decode([last])

    def _decode(self, lines: list[bytes]) -> Iterator[StreamItem]:
        for line in lines:
            if self.done or not line.startswith(b"data:"):
                continue  # blank separators, comments, event names, anything after [DONE]
            data = line[5:].strip()
            if data == b"[DONE]":
                self.done = True
                continue
            chunk = json.loads(data)
            if chunk.get("error"):
                raise MidStreamError(chunk["error"])
            if chunk.get("usage"):
                yield usage_of(chunk["usage"])
            for choice in chunk.get("choices") or ():
                yield from _delta_items(choice.get("delta") or {})
                self.finish = choice.get("finish_reason") or self.finish


def _delta_items(delta: JSONObject) -> list[StreamItem]:
    items: list[StreamItem] = []
    if delta.get("reasoning_content"):
        items.append(ReasoningDelta(str(delta["reasoning_content"])))
    if delta.get("content"):
        items.append(TextDelta(delta["content"]))
    for call in delta.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            ToolCallDelta(
                index=int(call.get("index", 0)),
                id=call.get("id"),
                name=function.get("name"),
                arguments=function.get("arguments") or "",
            )
        )
    return items
