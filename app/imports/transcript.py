"""A session as a readable Markdown transcript (exported beside its facts).

Each message is a heading with its role and time; reasoning is a quote, tool calls and their
results are fenced blocks (the fence grows past any backticks in the text, so nothing a tool
printed can end it early), attachments and file changes are listed by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from app.jsontypes import JSONObject

_ROLES = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}
_TICKS = re.compile(r"`{3,}")


def render(meta: Mapping[str, object], history: Iterable[JSONObject]) -> str:
    """The Markdown transcript of one session."""
    title = meta.get("title") or "Untitled session"
    out = [f"# {_line(str(title))}", "", f"Session `{meta.get('id')}`"]
    if meta.get("model"):
        out[-1] += f" · model `{meta['model']}`"
    out.append("")
    for message in history:
        out.extend(_message(message))
    return "\n".join(out).rstrip() + "\n"


def _message(message: JSONObject) -> list[str]:
    role = str(message.get("role", ""))
    head = f"## {_ROLES.get(role, role.title() or 'Message')}"
    if role == "tool" and message.get("name"):
        head += f" · {message['name']}"
    if message.get("created_at"):
        head += f" · {message['created_at']}"
    out = [head, ""]
    if message.get("reasoning"):
        out.extend("> " + line for line in str(message["reasoning"]).splitlines())
        out.append("")
    content = _text(message.get("content"))
    if content:
        if role == "tool":
            out.extend([_fence(content, "text"), ""])
        else:
            out.extend([content, ""])
    # Stored records are rendered as far as they can be: a field of the wrong type is left out.
    for call in _dicts(message.get("tool_calls")):
        args = json.dumps(call.get("input"), ensure_ascii=False, indent=2, default=str)
        out.extend([f"Calls `{call.get('name')}`:", "", _fence(args, "json"), ""])
    for ref in _dicts(message.get("attachments")):
        out.extend([f"Attachment: {ref.get('name') or ref.get('id')}", ""])
    change = message.get("file_change")
    if isinstance(change, dict):
        out.extend([f"Changed file: `{change.get('path')}`", ""])
    if message.get("is_error"):
        out.extend(["(the tool reported an error)", ""])
    return out


def _dicts(value: Any) -> list[JSONObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):  # content parts: keep their text
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict)).strip()
    return ""


def _fence(text: str, info: str) -> str:
    longest = max((len(m) for m in _TICKS.findall(text)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _line(text: str) -> str:
    return " ".join(text.split())
