"""What a conversation holds: a message (`message_end`, `message_imported`), its tool calls and
file changes, the context a user's input carries, and what a model request counted and what a
summary covered (`usage_updated`, `compaction_completed`).

TypedDicts: they stay plain JSON in the log and on the wire, and the HTTP layer builds its
schemas from them. A leaf: it imports nothing of the app but leaves.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required

from pydantic import ConfigDict, with_config

# typing_extensions' TypedDict: pydantic (which builds the HTTP schemas from these) needs it
# before Python 3.12.
from typing_extensions import TypedDict

from app.jsontypes import JSONObject

#: A tool card's state on the wire (Foya's `ToolCallView.status`: the complete set).
ToolStatus = Literal["queued", "running", "done", "error"]


class TokenCounts(TypedDict):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int


class Usage(TokenCounts):
    """`usage_updated`, and `GET /sessions/{id}/usage`: one model request's token counts."""

    model: str


class Checkpoint(TypedDict):
    """`compaction_completed`: a summary that stands for the active history through
    `through_seq`; valid while the digest of that history matches."""

    version: int
    id: str
    through_seq: int
    source_digest: str
    summary: str
    phase: str
    estimated_tokens_before: int
    estimated_tokens_after: int
    created_at: str
    projection_kind: str  # Foya's fields: "text"
    level: str  # "segmented" (a first summary) or "session" (a previous one folded in)
    segment_count: int


class ToolCall(TypedDict):
    """A call in an assistant message. Stored with `input` the decoded arguments; the history
    wire carries `input` as JSON text with the call's `status` (app.wire)."""

    id: str
    name: str
    input: Any
    status: NotRequired[ToolStatus]


class FileChange(TypedDict):
    """A tool's change to one file: before and after, as blob hashes."""

    path: str
    before_exists: bool
    before_mode: int | None
    after_mode: int | None
    before_blob: str | None
    after_blob: str | None


class InputContext(TypedDict, total=False):
    """What a user's input carries besides its text: in its message and its queue item."""

    skill_ref: str
    attachments: list[JSONObject]  # committed AttachmentRefs (app.artifacts)
    browser_elements: list[JSONObject]  # trimmed strings (older versions kept more)
    command: str  # the name of the command (`POST …/commands/{name}`) the input came from
    workspace_files: list[str]  # workspace-relative paths of regular files the user picked


def input_context(source: InputContext) -> InputContext:
    """The context fields `source` has, without empty ones."""
    out: InputContext = {}
    if source.get("skill_ref"):
        out["skill_ref"] = source["skill_ref"]
    if source.get("attachments"):
        out["attachments"] = source["attachments"]
    if source.get("browser_elements"):
        out["browser_elements"] = source["browser_elements"]
    if source.get("command"):
        out["command"] = source["command"]
    if source.get("workspace_files"):
        out["workspace_files"] = source["workspace_files"]
    return out


@with_config(ConfigDict(extra="allow"))  # an imported message may carry more: kept as stored
class Message(InputContext, total=False):
    """A `message_end` payload: a message of the conversation. `event_seq` is added when it
    is read back."""

    # user, assistant, system or tool; read back as any string, so that a message stored by
    # another version or imported from elsewhere is still served, never a validation error.
    role: Required[str]
    content: Any
    model_content: Any
    event_seq: int
    created_at: str
    reasoning: str
    tool_calls: list[ToolCall]
    tool_call_id: str
    name: str
    is_error: bool
    diff: str
    file_change: FileChange
    turn_started_at: str
    turn_completed_at: str
    turn_status: str
    turn_reason: str | None
    source_id: str  # an imported message's id in its source (app.imports): keys re-imports
