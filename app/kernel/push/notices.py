"""What a push message says for a stored fact: an approval or a question waiting, a turn done.

The text is short (a lock screen's, at most `MAX_BODY` characters) and plain: the platform
shows it as text. `tag` is the same as the web client's own notifications (app/ui/static/js/
notify.js), so a browser that gets both shows one; `hash` is the web client's route to open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

MAX_BODY = 200
#: Approval modes in which no approval waits for a person (the guardian or nobody decides).
UNATTENDED = ("auto", "full_access")


@dataclass(frozen=True)
class Notice:
    title: str
    body: str
    tag: str
    hash: str
    urgency: Literal["high", "normal"]

    def payload(self) -> bytes:
        return json.dumps(
            {"title": self.title, "body": self.body[:MAX_BODY], "tag": self.tag, "hash": self.hash},
            ensure_ascii=False,
        ).encode()


TEST = Notice("Foya", "Push notifications work", "test", "#/settings", "normal")


def route(session: str) -> str:
    return f"#/s/{session}"


def approval(name: str, session: str, p: dict[str, Any]) -> Notice:
    resource = f": {p['resource']}" if p.get("resource") else ""
    body = f"{p.get('tool_name') or 'A tool'} wants to {p.get('action') or 'act'}{resource}"
    return Notice(f"{name}: approval needed", body, f"approval-{p['id']}", route(session), "high")


def question(name: str, session: str, p: dict[str, Any]) -> Notice:
    asked = p.get("questions") or [{}]
    text = asked[0].get("question") if isinstance(asked[0], dict) else None
    body = str(text or "The agent asks a question")
    return Notice(f"{name}: question", body, f"question-{p.get('id')}", route(session), "high")


def finished(name: str, session: str, p: dict[str, Any]) -> Notice:
    status = p.get("status") or "completed"
    body = "The reply is ready" if status == "completed" else f"The turn {status}"
    return Notice(name, body, f"turn-{session}", route(session), "normal")
