"""Rewind, file review and workspace browsing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from app.http.filemodels import (
    FileReview,
    Resolved,
    ResolveFileReview,
    Rewind,
    Rewound,
    WorkspaceFile,
    WorkspaceFiles,
    WorkspaceListing,
)
from app.kernel import Kernel

# A workspace file may be HTML or SVG: served raw, it must not run as a page of this origin.
RAW_HEADERS = {"Content-Security-Policy": "sandbox", "Cache-Control": "no-store"}


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

    @api.get("/sessions/{session_id}/workspace")
    async def workspace(session_id: str, path: str = "") -> WorkspaceListing:
        """The entries of a directory of the session's workspace (default: its root)."""
        return WorkspaceListing(**await kernel.workspaces.listing(session_id, path))

    @api.get("/sessions/{session_id}/workspace/files")
    async def workspace_files(session_id: str) -> WorkspaceFiles:
        """Every file in the workspace (relative paths; .git skipped; at most 5000)."""
        return WorkspaceFiles(**await kernel.workspaces.files(session_id))

    @api.get(
        "/sessions/{session_id}/workspace/file",
        response_model=WorkspaceFile,
        response_model_exclude_none=True,
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    async def workspace_file(
        session_id: str,
        path: str = Query(description="Relative to the workspace root."),
        media: str = Query("", description="`1` for the raw bytes instead of JSON."),
    ) -> Any:
        """A file as JSON (text up to 1 MiB), or its bytes with `media=1`."""
        if media in ("1", "true"):
            found = await kernel.workspaces.raw(session_id, path)
            return Response(found.data, media_type=found.media_type, headers=RAW_HEADERS)
        return WorkspaceFile(**await kernel.workspaces.text(session_id, path))

    return api
