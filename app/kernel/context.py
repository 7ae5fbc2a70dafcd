"""The model's input: the session's active messages in OpenAI Chat Completions form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = (
    "You are Foya, a careful software agent working for one person. Your working directory is "
    "{cwd}. Use the tools to inspect and change files and to run commands; explain briefly what "
    "you did. Some tool calls need the user's approval and may be denied: then adapt."
)


def summary_message(summary: str) -> dict[str, Any]:
    """A compaction checkpoint as the model sees it."""
    return {
        "role": "user",
        "content": "Summary of the earlier conversation (compacted):\n\n" + summary,
    }


def system_message(cwd: Path) -> dict[str, Any]:
    return {"role": "system", "content": SYSTEM_PROMPT.format(cwd=cwd)}


def to_openai(message: dict[str, Any]) -> dict[str, Any] | None:
    """One stored Message as a Chat Completions message (None for roles the model never sees)."""
    role = message.get("role")
    content = message.get("model_content") or message.get("content") or ""
    if role == "user":
        return {"role": "user", "content": content}
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": content or None}
        calls = message.get("tool_calls") or []
        if calls:
            out["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c.get("input", {}))},
                }
                for c in calls
            ]
        return out
    if role == "tool":
        return {"role": "tool", "tool_call_id": message.get("tool_call_id", ""), "content": content}
    return None


def build(
    cwd: Path, history: list[dict[str, Any]], checkpoint: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """System prompt, the checkpoint's summary (if any) in place of the messages it covers, then
    the active messages after it, with unanswered tool calls closed.

    A turn cancelled mid-tool leaves an assistant message whose calls have no result; providers
    reject that, so such calls get a synthetic "cancelled" result here.
    """
    messages = [system_message(cwd)]
    if checkpoint is not None:
        messages.append(summary_message(str(checkpoint["summary"])))
        history = [m for m in history if int(m["event_seq"]) > int(checkpoint["through_seq"])]
    answered = {m.get("tool_call_id") for m in history if m.get("role") == "tool"}
    for message in history:
        converted = to_openai(message)
        if converted is None:
            continue
        messages.append(converted)
        for call in converted.get("tool_calls", ()):
            if call["id"] not in answered:
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": "[not run: cancelled]"}
                )
    return messages
