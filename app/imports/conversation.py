"""A session's messages assembled in conversation order, for the agent-CLI transcript parsers.

`Conversation` keeps the kernel's rule that an assistant message that called tools is followed
by one tool message per call, before anything else: each call gets its tool message at once
(content "" until its result arrives), so a call the transcript never answers still has one,
and a result only fills the message already in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.imports.model import (
    ImportedFileChange,
    ImportedImage,
    ImportedMessage,
    ImportedSession,
    ImportReport,
)
from app.jsontypes import JSONObject


def finish(
    source: str,
    title: str | None,
    conversation: Conversation,
    times: list[int],
    cwd: str | None,
    report: ImportReport,
) -> ImportedSession | None:
    """The finished session; None (counted) when it holds no message. `times` are the ns of
    every record read; the first and last bound the session."""
    if not conversation.messages:
        report.skip("session with no messages")
        return None
    if conversation.unanswered():
        report.skip("tool call without a result", conversation.unanswered())
    created = min(times, default=0)
    return ImportedSession(
        source=source,
        title=title,
        created_at_ns=created,
        updated_at_ns=max(times, default=created),
        messages=conversation.messages,
        model=conversation.model,
        cwd=cwd or None,
    )


@dataclass
class _Call:
    name: str
    input: Any
    message: ImportedMessage
    answered: bool = False


class Conversation:
    """A session's messages in conversation order (see the module docstring)."""

    def __init__(self, report: ImportReport) -> None:
        self.messages: list[ImportedMessage] = []
        self.model = ""  # the model of the last assistant message that named one
        self._report = report
        self._calls: dict[str, _Call] = {}
        self._open: ImportedMessage | None = None  # the assistant message calls still join
        self._open_key: object = None

    def user(
        self, source_id: str, created_at: str, content: str, images: list[ImportedImage]
    ) -> None:
        """A user message (nothing when it has neither text nor images)."""
        if not content and not images:
            return
        message = {"role": "user", "content": content, "created_at": created_at}
        self.messages.append(ImportedMessage(message, source_id, images=images))
        self._open = None

    def assistant(
        self,
        source_id: str,
        created_at: str,
        *,
        key: object,
        content: str = "",
        reasoning: str = "",
        calls: Sequence[tuple[str, str, Any]] = (),
        model: str = "",
        model_label: str = "",
    ) -> None:
        """Assistant text, reasoning and tool calls (id, name, input). They join the previous
        assistant message when `key` is not None and equals its key (one model response written
        as several records), else they start a new one."""
        if self._open is None or key is None or key != self._open_key:
            if not (content or reasoning or calls):
                return
            self._open = ImportedMessage(
                {"role": "assistant", "content": "", "created_at": created_at}, source_id
            )
            self._open_key = key
            self.messages.append(self._open)
        message = self._open.message
        _join(message, "content", content)
        _join(message, "reasoning", reasoning)
        if model:
            message.setdefault("model", model)
            self.model = model
        if model_label:
            message.setdefault("model_label", model_label)
        for call_id, name, tool_input in calls:
            self._add_call(self._open, call_id, name, tool_input, created_at)

    def _add_call(
        self, owner: ImportedMessage, call_id: str, name: str, tool_input: Any, created_at: str
    ) -> None:
        if not call_id:
            self._report.skip("tool call without an id")
            return
        if call_id in self._calls:
            self._report.skip("tool call with a repeated id")
            return
        owner.message.setdefault("tool_calls", []).append(
            {"id": call_id, "name": name, "input": tool_input}
        )
        tool = {
            "role": "tool",
            "tool_call_id": call_id,
            "name": name,
            "content": "",
            "created_at": created_at,
        }
        placeholder = ImportedMessage(tool, f"{owner.source_id}#call-{call_id}")
        self.messages.append(placeholder)
        self._calls[call_id] = _Call(name, tool_input, placeholder)

    def call(self, call_id: str) -> tuple[str, Any] | None:
        """(name, input) of a call made earlier in this conversation."""
        found = self._calls.get(call_id)
        return None if found is None else (found.name, found.input)

    def result(
        self,
        call_id: str,
        content: str,
        *,
        created_at: str | None = None,
        is_error: bool = False,
        images: list[ImportedImage] | None = None,
    ) -> bool:
        """Answer a call; False (counted) when no unanswered call has that id."""
        found = self._calls.get(call_id)
        if found is None or found.answered:
            self._report.skip("tool result without a matching call")
            return False
        found.answered = True
        message = found.message.message
        message["content"] = content
        if created_at:
            message["created_at"] = created_at
        if is_error:
            message["is_error"] = True
        found.message.images = images or []
        return True

    def attach_change(self, call_id: str, change: ImportedFileChange) -> None:
        """Record the file a call changed (one per call; further ones are counted)."""
        found = self._calls.get(call_id)
        if found is None:
            self._report.skip("file change without a matching call")
        elif found.message.file_change is not None:
            self._report.skip("further file change of the same tool call")
        else:
            found.message.file_change = change

    def unanswered(self) -> int:
        """How many calls never got a result (their tool messages keep content "")."""
        return sum(not call.answered for call in self._calls.values())


def _join(message: JSONObject, key: str, value: str) -> None:
    if not value:
        return
    previous = message.get(key) or ""
    message[key] = f"{previous}\n\n{value}" if previous else value
