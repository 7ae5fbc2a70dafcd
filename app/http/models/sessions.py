"""Request bodies of the session routes (create, change, fork)."""

from __future__ import annotations

from typing import Annotated

from app.http.models.common import NonNegative, ReasoningEffort, Strict, one_of

ApprovalMode = Annotated[str, one_of("manual", "auto", "full_access")]


class CreateSession(Strict):
    connection_id: str | None = None
    model: str | None = None
    reasoning_effort: ReasoningEffort | None = None
    project_id: str | None = None
    approval_mode: ApprovalMode | None = None


class UpdateSession(CreateSession):
    title: str | None = None
    pinned: bool | None = None


class ForkSession(Strict):
    title: str | None = None
    through_seq: NonNegative | None = None
