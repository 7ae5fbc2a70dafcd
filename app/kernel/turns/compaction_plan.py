"""What a compaction covers and when one is due.

A boundary never separates an assistant tool call from its results: the covered part ends
before the call whose results would be cut off, and the last user message stays as the tail.

Budget: the output reserve is a quarter of the window (at most 16K) until a reply was seen,
then twice the last output clamped to 1K-8K; an unknown window counts as 32K. Token estimates
use the last accepted request's real input count as a baseline where one exists
(`context_request_accepted`), plus ~4 characters per token for what was added since.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.events import Message

DEFAULT_WINDOW = 32_000
KEEP_TAIL_USER_MESSAGES = 1
IMAGE_TOKENS = 1_000
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Plan:
    """What a compaction would cover."""

    through_seq: int
    covered: list[Message]
    tail: list[Message]


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A provider-independent estimate: ~4 characters per token of the JSON form, plus a fixed
    cost per image (providers bill images by tiles, not by their bytes)."""
    text = "".join(json.dumps(m, ensure_ascii=False) for m in messages)
    return len(text) // CHARS_PER_TOKEN + text.count('"image_url"') * IMAGE_TOKENS + 1


def output_reserve(window: int, last_output: int | None) -> int:
    if last_output is None:
        return min(window // 4, 16_000)
    return max(1_000, min(2 * last_output, 8_000))


def over_budget(estimate: int, window: int | None, last_output: int | None) -> bool:
    size = window or DEFAULT_WINDOW
    return estimate > size - output_reserve(size, last_output)


def plan(history: list[Message], after_seq: int, *, standalone: bool = False) -> Plan | None:
    """Cover the messages after `after_seq` up to the last user message (kept as the tail).

    A standalone compaction (an idle session, nothing in progress) covers everything when the
    last exchange is all there is, so a one-exchange session can be compacted too; a turn's own
    compaction always keeps its user message. The boundary is moved back so that no tool call
    is separated from its results; None if nothing would be covered.
    """
    pending = [m for m in history if int(m["event_seq"]) > after_seq]
    users = [i for i, m in enumerate(pending) if m.get("role") == "user"]
    if len(users) < KEEP_TAIL_USER_MESSAGES:
        return None
    cut = users[-KEEP_TAIL_USER_MESSAGES]
    if cut == 0 and standalone and len(pending) > 1:
        cut = len(pending)
    # Never end the covered part inside a tool exchange: back up to before the call.
    while cut > 0 and (
        pending[cut - 1].get("role") == "tool" or pending[cut - 1].get("tool_calls")
    ):
        cut -= 1
    if cut == 0:
        return None
    return Plan(int(pending[cut - 1]["event_seq"]), pending[:cut], pending[cut:])


def route_key(row: Mapping[str, Any], connection: Mapping[str, Any]) -> str:
    """Accepted boundaries are kept per (connection, kind, base URL, model)."""
    return "|".join(
        (
            str(row.get("connection_id") or ""),
            "openai",
            str(connection.get("base_url", "")),
            row["model"],
        )
    )


def context_window(connection: Mapping[str, Any], model: str) -> int | None:
    settings = (connection.get("model_settings") or {}).get(model) or {}
    window = settings.get("context_window") or settings.get("max_input_tokens")
    return int(window) if window else None
