"""Request and response models of the wire surface (reference §1). Writes reject unknown fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A request body: unknown fields are a 400 `bad_request`."""

    model_config = ConfigDict(extra="forbid")

    def given(self) -> dict[str, Any]:
        """Only the fields the client sent."""
        return self.model_dump(exclude_unset=True)


class CreateSession(Strict):
    connection_id: str | None = None
    model: str | None = None
    reasoning_effort: str | None = None
    project_id: str | None = None
    approval_mode: str | None = None


class UpdateSession(CreateSession):
    title: str | None = None
    pinned: bool | None = None


class ForkSession(Strict):
    title: str | None = None
    through_seq: int | None = None


class Session(BaseModel):
    id: str
    parent_id: str | None = None
    agent_ref: str | None = None
    agent_name: str | None = None
    agent_digest: str | None = None
    phase: str
    connection_id: str
    model: str
    reasoning_effort: str | None = None
    project_id: str | None = None
    approval_mode: str
    title: str | None = None
    title_is_manual: bool | None = None
    pinned: bool = False
    pinned_at: str | None = None
    created_at: str
    updated_at: str


class Message(BaseModel):
    """A stored message; fields beyond these pass through unchanged."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: Any = ""
    event_seq: int | None = None


class Usage(BaseModel):
    model: str
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cached_tokens: int


class DailyActivity(BaseModel):
    date: str
    message_count: int
    token_count: int


class ModelUsage(BaseModel):
    model: str
    token_count: int
    request_count: int
    share: float


class UsageReport(BaseModel):
    range_days: int
    total_tokens: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    session_count: int
    message_count: int
    active_days: int
    current_streak: int
    most_used_model: str | None = None
    most_used_model_share: float
    activity: list[DailyActivity]
    model_usage: list[ModelUsage]


class CreateProject(Strict):
    path: str
    name: str | None = None


class UpdateProject(Strict):
    name: str | None = None
    pinned: bool | None = None


class Project(BaseModel):
    id: str
    name: str
    path: str
    pinned: bool = False
    pinned_at: str | None = None
    created_at: str
    updated_at: str


class Turn(BaseModel):
    """A user turn. Unknown fields are accepted here, as the reference does."""

    model_config = ConfigDict(extra="allow")

    message: str
    skill_ref: str | None = None
    attachments: list[dict[str, Any]] | None = None
    browser_elements: list[dict[str, Any]] | None = None


class QueueItem(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    session_id: str
    text: str
    position: int
    created_at: str
    updated_at: str


class TurnAccepted(BaseModel):
    run_id: str
    status: str
    queued: QueueItem | None = None


class UpdateQueueItem(Strict):
    message: str | None = None
    position: int | None = None


class Decision(Strict):
    request_id: str | None = None
    decision: str


class ConnectionIn(Strict):
    name: str | None = None
    type: str | None = None
    kind: str | None = None
    auth_kind: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    models: list[str] | None = None
    sort_order: int | None = None
    model_settings: dict[str, dict[str, Any]] | None = None


class Connection(BaseModel):
    id: str
    name: str
    type: str
    kind: str
    auth_kind: str
    base_url: str
    has_api_key: bool
    models: list[str] = []
    sort_order: int = 0
    model_settings: dict[str, dict[str, Any]] = {}


class Models(BaseModel):
    models: list[str]
    context_windows: dict[str, int] | None = None


class ModelChoice(Strict):
    connection_id: str = ""
    model: str = ""


class DefaultModels(Strict):
    language: ModelChoice = ModelChoice()
    fast: ModelChoice = ModelChoice()
    image: ModelChoice = ModelChoice()
    video: ModelChoice = ModelChoice()


class Compacted(BaseModel):
    checkpoint_id: str
    phase: str
    through_seq: int
    estimated_tokens_before: int
    estimated_tokens_after: int
