"""The payload of each kind of fact besides a conversation's messages (`app.events.messages`):
a turn's start and end, tool cards, the queue, approvals, hooks, rewinds and reviews, forks,
background commands. What the kernel stores in the log and sends on the wire.

TypedDicts, so a payload stays plain JSON in the log and on the wire; the HTTP layer reuses them
where a route answers the same shape. A capability that owns its record's shape (a session, a
sub-agent run, a workflow, a question) types it beside its code; its kinds carry a `Record`.

A leaf: it imports nothing of the app but leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypeAlias

# typing_extensions' TypedDict: pydantic (which builds the HTTP schemas from these) needs it
# before Python 3.12.
from typing_extensions import TypedDict

from app.events.messages import InputContext, TokenCounts, ToolStatus

#: The payload of a kind whose record a capability shapes and types itself (a session, a
#: sub-agent run or its tree's budget, a workflow, a question or browser action asked of a
#: client): any JSON object, never a text or a list.
Record: TypeAlias = Mapping[str, object]


class TurnStarted(TypedDict):
    run_id: str
    started_at: str


class TurnCancelRequested(TypedDict):
    run_id: str
    reason: str
    requested_at: str


class TurnComplete(TypedDict):
    run_id: str
    started_at: str
    completed_at: str
    status: Literal["completed", "cancelled", "failed"]
    reason: NotRequired[str]


class ContextRequestAccepted(TypedDict):
    """The accepted boundary of a model request: the history through `through_seq` was sent,
    at this size, and the provider counted these tokens for it."""

    session_id: str
    route: str
    through_seq: int
    usage: TokenCounts
    payload_bytes: int
    checkpoint_id: str | None
    # Estimated tokens of the user's context in the system prompt (rules, memory, skills,
    # AGENTS.md): a later estimate corrects the real count by how much it has changed since.
    context_tokens: NotRequired[int]


class ToolBegin(TypedDict):
    id: str
    name: str
    status: Literal["queued"]


class ToolUpdate(TypedDict):
    """`tool_update`, as Foya sends it: `queued` with the call's arguments once the step is
    recorded, `running` with them when the call starts, `error` with the output when the loop
    guard holds the call back. `input` is the arguments as JSON text
    (`app.wire.arguments_text`), as Foya's tool view parses it. Events stored before this
    shape carry `input` as an object and status `pending`: `app.wire` renders them."""

    id: str
    name: str
    input: NotRequired[str]
    status: ToolStatus
    output: NotRequired[str]
    is_error: NotRequired[bool]


class QueueItem(InputContext):
    """A queued input, in `queue_updated` and the queue routes."""

    id: str
    session_id: str
    text: str
    position: int
    created_at: str
    updated_at: str


class QueueUpdated(TypedDict):
    items: list[QueueItem]


class ApprovalRequest(TypedDict):
    """`approval_request` (Foya's fields). `detail` carries the call's arguments as JSON text
    (what is being approved: the command, the path and content…), `resource` the path or
    address it touches, `execution_session` the session whose tool asks (Foya's: always set)."""

    id: str
    session: str
    execution_session: NotRequired[str]
    tool_name: str
    action: str  # read | write | delete | execute
    detail: str
    scope: Literal["workspace", "outside", "browser", "internet"]
    resource: NotRequired[str]


class ApprovalResolved(TypedDict):
    id: str
    decision: Literal["approved", "approved_for_session", "denied"]


class HookCompleted(TypedDict):
    """One run of a user's hook command (Foya's payload: every key is always there)."""

    id: str
    event_id: str
    name: str
    event: str
    decision: Literal["none", "allow", "deny"]
    halt: bool
    reason: str
    duration_ms: int
    error: str
    input_rewrite: bool


class FileOutcome(TypedDict):
    """What a rewind or undo did to one file."""

    path: str
    action: Literal["restored", "merged", "kept", "force_restored"]


class HistoryRewound(TypedDict):
    target_user_seq: int
    files: NotRequired[list[FileOutcome]]


class FileReviewResolved(TypedDict):
    action: Literal["kept", "undone"]
    through_seq: int
    files: NotRequired[list[FileOutcome]]


class CompactionStarted(TypedDict):
    phase: str  # standalone | pre_turn | mid_turn


class CompactionFailed(TypedDict):
    phase: str
    error: str


class SessionForked(TypedDict):
    source_session_id: str
    through_seq: int
    forked_at: str
    message_count: int


class BackgroundCommand(TypedDict):
    """`background_command_updated`, and the background-command routes: one bash command the
    kernel keeps (Foya's fields; `status` and `completed_at` are ours). Output fields are the
    tails Foya shows, absent when empty; `exit_code` is there once the command ended."""

    command_id: str
    session_id: str
    command: str
    pid: int
    running: bool
    status: Literal["running", "completed", "failed", "cancelled"]
    exit_code: NotRequired[int]
    stdout: NotRequired[str]
    stderr: NotRequired[str]
    started_at: str
    completed_at: NotRequired[str]
    backgrounded_by: NotRequired[str]  # agent | user
    stopped_by: NotRequired[str]  # agent | user | shutdown (stored only: `Event.wire`)


class ToolEnd(TypedDict):
    """`tool_end`: a call's output. `is_error` is left out when false (Foya's too; `app.wire`
    adds it for the desktop), `diff` when the call changed no file."""

    id: str
    name: str
    output: str
    is_error: NotRequired[bool]
    diff: NotRequired[str]


class SessionDeleted(TypedDict):
    """`session_deleted`, the last event of a deleted session's stream (never stored)."""

    id: str


class RequestResolved(TypedDict):
    """`question_resolved` and `browser_action_resolved`: how a request of a client ended."""

    id: str
    status: Literal["answered", "cancelled", "done", "error"]
