"""Request bodies of the turn routes (queue items, approval decisions)."""

from __future__ import annotations

from typing import Annotated

from app.http.models.common import Lenient, NonNegative, one_of


class UpdateQueueItem(Lenient):
    message: str | None = None
    position: NonNegative | None = None


class Decision(Lenient):
    request_id: str | None = None
    decision: Annotated[str, one_of("approved", "approved_for_session", "denied")]
