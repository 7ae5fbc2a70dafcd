"""Event kinds, the payloads of a turn's facts, and the event envelope shared by the store, the
kernel, the broker and SSE.

Wire envelope (reference §2): `{seq, kind, session, run_id?, time, payload?}`. `seq` is the global
`events` rowid; deltas are never stored and carry seq 0. Payloads are JSON objects; those of the
turn core are typed here once (TypedDicts: they stay plain JSON in the log and on the wire) and
the HTTP layer reuses them where a route answers the same shape.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Required

from pydantic import ConfigDict, with_config

# typing_extensions' TypedDict: pydantic (which builds the HTTP schemas from these) needs it
# before Python 3.12.
from typing_extensions import TypedDict

from app.wire import render_payload

MESSAGE_END = "message_end"
MESSAGE_IMPORTED = "message_imported"
MESSAGE_DELTA = "message_delta"
REASONING_DELTA = "reasoning_delta"
USAGE_UPDATED = "usage_updated"
COMPACTION_STARTED = "compaction_started"
COMPACTION_COMPLETED = "compaction_completed"
COMPACTION_FAILED = "compaction_failed"
CONTEXT_REQUEST_ACCEPTED = "context_request_accepted"
HISTORY_REWOUND = "history_rewound"
FILE_REVIEW_RESOLVED = "file_review_resolved"
SESSION_FORKED = "session_forked"
SESSION_UPDATED = "session_updated"
SESSION_DELETED = "session_deleted"
QUEUE_UPDATED = "queue_updated"
TURN_STARTED = "turn_started"
TURN_CANCEL_REQUESTED = "turn_cancel_requested"
TURN_COMPLETE = "turn_complete"
TOOL_BEGIN = "tool_begin"
TOOL_UPDATE = "tool_update"
TOOL_END = "tool_end"
APPROVAL_REQUEST = "approval_request"
APPROVAL_RESOLVED = "approval_resolved"
ERROR = "error"
HOOK_COMPLETED = "hook_completed"
# Sub-agents (app.kernel.agents): on the parent's stream, payload the run's snapshot; the
# budget ones on the root session's stream, payload the tree's budget.
SUBAGENT_QUEUED = "subagent_queued"
SUBAGENT_RUNNING = "subagent_running"
SUBAGENT_STARTED = "subagent_started"
SUBAGENT_COMPLETED = "subagent_completed"
SUBAGENT_FAILED = "subagent_failed"
SUBAGENT_CANCELLED = "subagent_cancelled"
SUBAGENT_INTERRUPTED = "subagent_interrupted"
AGENT_BUDGET_UPDATED = "agent_budget_updated"
AGENT_BUDGET_EXCEEDED = "agent_budget_exceeded"
BACKGROUND_COMMAND_UPDATED = "background_command_updated"
#: A plan workflow changed (app.kernel.workflows); payload the workflow record.
WORKFLOW_UPDATED = "workflow_updated"
# Questions and browser actions (app.kernel.interactions): a tool waits for a client; payload
# the request, then `{id, status}`.
QUESTION_REQUESTED = "question_requested"
QUESTION_RESOLVED = "question_resolved"
BROWSER_ACTION_REQUESTED = "browser_action_requested"
BROWSER_ACTION_RESOLVED = "browser_action_resolved"
#: Beyond Foya: the text generated so far, sent first to a client that joins mid-generation.
MESSAGE_SNAPSHOT = "message_snapshot"


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
    `through_seq` (seed 001 "Checkpoint"); valid while the digest of that history matches."""

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
    """A tool's change to one file: before and after, as blob hashes (reference §1)."""

    path: str
    before_exists: bool
    before_mode: int | None
    after_mode: int | None
    before_blob: str | None
    after_blob: str | None


class InputContext(TypedDict, total=False):
    """What a user's input carries besides its text: in its message and its queue item."""

    skill_ref: str
    attachments: list[dict[str, Any]]  # committed AttachmentRefs (app.artifacts)
    browser_elements: list[dict[str, Any]]  # trimmed strings (older versions kept more)
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
    """A `message_end` payload: a message of the conversation (reference §1 "Message fields").
    `event_seq` is added when it is read back."""

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
    """The accepted boundary of a model request (seed 001 "Accepted Boundary")."""

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


#: A tool card's state on the wire (Foya's `ToolCallView.status`: the complete set).
ToolStatus = Literal["queued", "running", "done", "error"]


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
    """A queued input (reference §1 "Queue item fields"), in `queue_updated` and the queue
    routes."""

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


#: Compact JSON (no spaces; text as is, not \u-escaped): the one encoding of stored payloads
#: and of wire envelopes. One encoder for all: `json.dumps` with these options builds a new
#: encoder on every call (~0.6 µs of a ~1.5 µs envelope).
compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def iso_time(ns: int) -> str:
    """RFC 3339 UTC with microseconds (truncated), as the wire `time` field."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return f"{_iso_second(seconds)}.{rest // 1000:06d}Z"


@functools.lru_cache(maxsize=8)
def _iso_second(seconds: int) -> str:
    # Every event of a delta stream stamps its time: formatting a datetime costs ~1.4 µs, a
    # cached second and the microseconds ~0.3 µs.
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True, slots=True)
class Event:
    """A fact, stored (seq > 0) or a transient delta (seq 0)."""

    seq: int
    kind: str
    session: str
    run_id: str | None
    time_ns: int
    payload: Any = None
    _json: str | None = field(default=None, init=False, repr=False, compare=False)

    def json(self) -> str:
        """The envelope as JSON, encoded once however many subscribers send it."""
        if self._json is None:
            encoded = compact_json(self.wire())
            object.__setattr__(self, "_json", encoded)  # a cache, not state: frozen otherwise
        assert self._json is not None
        return self._json

    def wire(self) -> dict[str, Any]:
        """The JSON envelope clients receive."""
        out: dict[str, Any] = {"seq": self.seq, "kind": self.kind, "session": self.session}
        if self.run_id:
            out["run_id"] = self.run_id
        out["time"] = iso_time(self.time_ns)
        if self.payload is not None:
            out["payload"] = render_payload(self.kind, self.payload)
        return out


@dataclass(frozen=True, slots=True)
class EventDraft:
    """An event to append. `blobs` are file contents the payload references by SHA-256."""

    session: str
    kind: str
    payload: Any = None
    run_id: str | None = None
    blobs: Mapping[str, bytes] = field(default_factory=dict)
