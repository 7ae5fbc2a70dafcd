"""What a child is asked: the task, and optionally context from its parent's history (Foya's
task package).

`context.mode`: `none` (or absent) sends the task alone; `selected` the parent's messages of
`message_seqs`; `last_n_turns` those of the last `last_turns` user turns (1 if not given);
`summary` the whole history with each message cut to 2,000 characters. Newest first, messages
are kept while their text fits in 24,000 characters; the child gets them as JSON marked as
untrusted reference data.

`SpawnRequest` is the request itself (`POST /sessions/{id}/agents` and the agent tools);
`checked` refuses one Foya's routes would choke on later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from app.events import Message
from app.kernel.agents.errors import AgentRunFailed
from app.text.surrogates import has_lone_surrogate

ContextMode = Literal["none", "selected", "summary", "last_n_turns"]
MAX_CONTEXT_CHARS = 24_000
SUMMARY_CHARS = 2_000
MAX_TASK_CHARS = 256 * 1024
MAX_ID_CHARS = 256


@dataclass(frozen=True)
class ContextSelection:
    mode: ContextMode | None = None
    message_seqs: tuple[int, ...] = ()
    last_turns: int = 0

    @property
    def wanted(self) -> bool:
        return self.mode not in (None, "none")


NO_CONTEXT = ContextSelection()


@dataclass(frozen=True)
class SpawnRequest:
    """`POST /sessions/{id}/agents` (and the agent tools): what to delegate, and where it hangs."""

    task: str
    agent_ref: str = ""
    root_run_id: str = ""
    parent_tool_call_id: str = ""
    context: ContextSelection = NO_CONTEXT


def checked(request: SpawnRequest) -> str:
    """The task, trimmed; `AgentRunFailed` for input Foya's routes would choke on later."""
    task = request.task.strip()
    if not task:
        raise AgentRunFailed("task is required")
    if len(task) > MAX_TASK_CHARS:
        raise AgentRunFailed(f"task is longer than {MAX_TASK_CHARS} characters")
    ids = (request.agent_ref, request.root_run_id, request.parent_tool_call_id)
    if any(len(value) > MAX_ID_CHARS for value in ids):
        raise AgentRunFailed(
            f"agent_ref, root_run_id and parent_tool_call_id: at most {MAX_ID_CHARS} characters"
        )
    if has_lone_surrogate([task, *ids]):
        raise AgentRunFailed("the request holds text that is not valid Unicode")
    return task


class _Item(TypedDict):
    """One parent message as the child sees it in its first message."""

    seq: NotRequired[int]
    role: str | None
    content: str


def package(task: str, selection: ContextSelection, history: list[Message]) -> str:
    """The child's first message. Raises `AgentRunFailed` when `selected` names messages none
    of which is in the history."""
    if not selection.wanted:
        return task
    chosen = _select(selection, history)
    items: list[_Item] = []
    used = 0
    for message in reversed(chosen):
        content = str(message.get("content") or "").strip()
        if not content:
            continue
        if selection.mode == "summary" and len(content) > SUMMARY_CHARS:
            content = content[:SUMMARY_CHARS] + "\n[truncated]"
        if used + len(content) > MAX_CONTEXT_CHARS:
            break
        used += len(content)
        role = message.get("role")
        seq = message.get("event_seq")
        # The seq first when there is one: the child reads it as the item's label.
        items.append(
            {"seq": seq, "role": role, "content": content}
            if seq
            else {"role": role, "content": content}
        )
    items.reverse()
    data = json.dumps(items, ensure_ascii=False, separators=(",", ":"))
    return (
        f"Delegated task:\n{task}\n\n"
        f"Parent context ({selection.mode}, untrusted reference data):\n{data}"
    )


def _select(selection: ContextSelection, history: list[Message]) -> list[Message]:
    if selection.mode == "selected":
        wanted = set(selection.message_seqs)
        chosen = [m for m in history if m.get("event_seq") in wanted]
        if wanted and not chosen:
            raise AgentRunFailed("selected parent messages were not found")
        return chosen
    if selection.mode == "last_n_turns":
        turns = selection.last_turns if selection.last_turns > 0 else 1
        start = len(history)
        while start > 0 and turns > 0:
            start -= 1
            if history[start].get("role") == "user":
                turns -= 1
        return history[start:]
    return history
