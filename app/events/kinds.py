"""Event kinds, each bound to the type of its payload.

A `Kind` is its name, a `str`: it compares, hashes, encodes and is stored as the name, so
`event.kind == MESSAGE_END` holds for an event read back from the log as for one just drafted.
For the type checker it also names its payload's type, so that drafting an event
(`app.events.envelope.EventDraft`) with another kind's payload is a type error.

A leaf: it imports nothing of the app but leaves.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from app.events.messages import (
    Checkpoint,
    Message,
    Usage,
)
from app.events.payloads import (
    ApprovalRequest,
    ApprovalResolved,
    BackgroundCommand,
    CompactionFailed,
    CompactionStarted,
    ContextRequestAccepted,
    FileReviewResolved,
    HistoryRewound,
    HookCompleted,
    QueueUpdated,
    Record,
    RequestResolved,
    SessionDeleted,
    SessionForked,
    ToolBegin,
    ToolEnd,
    ToolUpdate,
    TurnCancelRequested,
    TurnComplete,
    TurnStarted,
)

#: The payload type of a kind. Invariant: a `Kind[Message]` is no `Kind[object]`, or any
#: payload would do for it.
P = TypeVar("P")


class Kind(str, Generic[P]):
    """The name of an event kind whose payload is a `P` (the type exists for the checker only:
    at run time a kind is its name)."""

    __slots__ = ()


MESSAGE_END: Kind[Message] = Kind("message_end")
MESSAGE_IMPORTED: Kind[Message] = Kind("message_imported")
#: Deltas are published, never stored: the text (or reasoning) streamed since the last one.
MESSAGE_DELTA: Kind[str] = Kind("message_delta")
REASONING_DELTA: Kind[str] = Kind("reasoning_delta")
USAGE_UPDATED: Kind[Usage] = Kind("usage_updated")
COMPACTION_STARTED: Kind[CompactionStarted] = Kind("compaction_started")
COMPACTION_COMPLETED: Kind[Checkpoint] = Kind("compaction_completed")
COMPACTION_FAILED: Kind[CompactionFailed] = Kind("compaction_failed")
CONTEXT_REQUEST_ACCEPTED: Kind[ContextRequestAccepted] = Kind("context_request_accepted")
HISTORY_REWOUND: Kind[HistoryRewound] = Kind("history_rewound")
FILE_REVIEW_RESOLVED: Kind[FileReviewResolved] = Kind("file_review_resolved")
SESSION_FORKED: Kind[SessionForked] = Kind("session_forked")
#: Payload the session as the session routes answer it (`app.kernel.sessions.Session`).
SESSION_UPDATED: Kind[Record] = Kind("session_updated")
SESSION_DELETED: Kind[SessionDeleted] = Kind("session_deleted")
QUEUE_UPDATED: Kind[QueueUpdated] = Kind("queue_updated")
TURN_STARTED: Kind[TurnStarted] = Kind("turn_started")
TURN_CANCEL_REQUESTED: Kind[TurnCancelRequested] = Kind("turn_cancel_requested")
TURN_COMPLETE: Kind[TurnComplete] = Kind("turn_complete")
TOOL_BEGIN: Kind[ToolBegin] = Kind("tool_begin")
TOOL_UPDATE: Kind[ToolUpdate] = Kind("tool_update")
TOOL_END: Kind[ToolEnd] = Kind("tool_end")
APPROVAL_REQUEST: Kind[ApprovalRequest] = Kind("approval_request")
APPROVAL_RESOLVED: Kind[ApprovalResolved] = Kind("approval_resolved")
#: Payload the text of what went wrong, as the client shows it.
ERROR: Kind[str] = Kind("error")
HOOK_COMPLETED: Kind[HookCompleted] = Kind("hook_completed")
# Sub-agents (app.kernel.agents): on the parent's stream, payload the run's snapshot
# (`AgentRunSnapshot`); the budget ones on the root session's stream, payload the tree's budget.
SUBAGENT_QUEUED: Kind[Record] = Kind("subagent_queued")
SUBAGENT_RUNNING: Kind[Record] = Kind("subagent_running")
SUBAGENT_STARTED: Kind[Record] = Kind("subagent_started")
SUBAGENT_COMPLETED: Kind[Record] = Kind("subagent_completed")
SUBAGENT_FAILED: Kind[Record] = Kind("subagent_failed")
SUBAGENT_CANCELLED: Kind[Record] = Kind("subagent_cancelled")
SUBAGENT_INTERRUPTED: Kind[Record] = Kind("subagent_interrupted")
AGENT_BUDGET_UPDATED: Kind[Record] = Kind("agent_budget_updated")
AGENT_BUDGET_EXCEEDED: Kind[Record] = Kind("agent_budget_exceeded")
BACKGROUND_COMMAND_UPDATED: Kind[BackgroundCommand] = Kind("background_command_updated")
#: A plan workflow changed (app.kernel.workflows); payload the workflow record.
WORKFLOW_UPDATED: Kind[Record] = Kind("workflow_updated")
# Questions and browser actions (app.kernel.interactions): a tool waits for a client; payload
# the request, then `{id, status}`.
QUESTION_REQUESTED: Kind[Record] = Kind("question_requested")
QUESTION_RESOLVED: Kind[RequestResolved] = Kind("question_resolved")
BROWSER_ACTION_REQUESTED: Kind[Record] = Kind("browser_action_requested")
BROWSER_ACTION_RESOLVED: Kind[RequestResolved] = Kind("browser_action_resolved")
#: Beyond Foya: the text generated so far, sent first to a client that joins mid-generation.
MESSAGE_SNAPSHOT: Kind[Message] = Kind("message_snapshot")
