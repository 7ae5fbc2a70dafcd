"""`EventDraft`: a fact to append, whose payload the type checker holds to its kind's type.

One constructor overload per payload type, then a generic one: a draft of a `Kind[Message]`
takes a `Message` (a dict literal is checked against it, key by key), and code that passes a
kind along (`kind: Kind[P], payload: P`) drafts through the generic one. A payload of another
kind's type matches none and is a type error. At run time the constructor only stores its
arguments.

A leaf: it imports nothing of the app but leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar, overload

from app.events.kinds import Kind
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

P = TypeVar("P")
RunId: TypeAlias = "str | None"
Blobs: TypeAlias = "Mapping[str, bytes] | None"

#: A draft's blobs when it has none: shared, and read-only so that sharing is safe.
_NO_BLOBS: Mapping[str, bytes] = MappingProxyType({})


@dataclass(frozen=True, slots=True, init=False)
class EventDraft:
    """An event to append: `payload` is of the type `kind` names (a `Kind[P]` takes a `P`).
    `blobs` are file contents the payload references by SHA-256. Once drafted, only the store
    reads it, as JSON to write."""

    session: str
    kind: str
    payload: object
    run_id: str | None
    blobs: Mapping[str, bytes]

    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[Message],
        payload: Message,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self, session: str, kind: Kind[str], payload: str, run_id: RunId = ..., blobs: Blobs = ...
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[Usage],
        payload: Usage,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[CompactionStarted],
        payload: CompactionStarted,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[Checkpoint],
        payload: Checkpoint,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[CompactionFailed],
        payload: CompactionFailed,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[ContextRequestAccepted],
        payload: ContextRequestAccepted,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[HistoryRewound],
        payload: HistoryRewound,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[FileReviewResolved],
        payload: FileReviewResolved,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[SessionForked],
        payload: SessionForked,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[Record],
        payload: Record,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[SessionDeleted],
        payload: SessionDeleted,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[QueueUpdated],
        payload: QueueUpdated,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[TurnStarted],
        payload: TurnStarted,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[TurnCancelRequested],
        payload: TurnCancelRequested,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[TurnComplete],
        payload: TurnComplete,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[ToolBegin],
        payload: ToolBegin,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[ToolUpdate],
        payload: ToolUpdate,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[ToolEnd],
        payload: ToolEnd,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[ApprovalRequest],
        payload: ApprovalRequest,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[ApprovalResolved],
        payload: ApprovalResolved,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[HookCompleted],
        payload: HookCompleted,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[BackgroundCommand],
        payload: BackgroundCommand,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self,
        session: str,
        kind: Kind[RequestResolved],
        payload: RequestResolved,
        run_id: RunId = ...,
        blobs: Blobs = ...,
    ) -> None: ...
    @overload
    def __init__(
        self, session: str, kind: Kind[P], payload: P, run_id: RunId = ..., blobs: Blobs = ...
    ) -> None: ...

    def __init__(
        self,
        session: str,
        kind: Kind[Any],
        payload: object,
        run_id: str | None = None,
        blobs: Mapping[str, bytes] | None = None,
    ) -> None:
        # Frozen: the fields are set the way dataclasses set them.
        object.__setattr__(self, "session", session)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "run_id", run_id)
        object.__setattr__(self, "blobs", _NO_BLOBS if blobs is None else blobs)
