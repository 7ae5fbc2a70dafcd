"""Rewind and file review: going back to before a user message, and keeping or undoing the
agent's file changes. The workspace routes are in `app.http.routes.workspace`."""

from __future__ import annotations

from fastapi import APIRouter

from app.http.models.files import FileReview, Resolved, ResolveFileReview, Rewind, Rewound
from app.kernel.api import Kernel


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["files"])

    @api.post("/sessions/{session_id}/turns/{message_seq}/rewind", response_model_exclude_none=True)
    async def rewind(session_id: str, message_seq: int, body: Rewind | None = None) -> Rewound:
        """Preview (empty body) or confirm going back to before user message `message_seq`,
        restoring the files the agent changed since."""
        body = body or Rewind()
        return Rewound(
            **await kernel.rewinds.rewind(
                session_id,
                message_seq,
                confirm=body.confirm,
                expected_head_seq=body.expected_head_seq,
                expected_file_state=body.expected_file_state,
                force_file_keys=body.force_file_keys,
            )
        )

    @api.get("/sessions/{session_id}/file-review", response_model_exclude_none=True)
    async def file_review(session_id: str) -> FileReview:
        """File changes not reviewed yet, one entry per path."""
        return FileReview(**await kernel.reviews.pending(session_id))

    @api.post("/sessions/{session_id}/file-review")
    async def resolve_file_review(session_id: str, body: ResolveFileReview) -> Resolved:
        """Keep or undo every pending change through `expected_through_seq`."""
        return Resolved(
            **await kernel.reviews.resolve(
                session_id,
                body.action,
                body.expected_through_seq,
                body.expected_file_state,
                body.force_file_keys,
            )
        )

    return api
