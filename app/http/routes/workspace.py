"""A session's workspace: what backs its files, and browsing, reading, creating, renaming and
deleting entries in it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response

from app.http.models.workspace import (
    CreateWorkspaceEntry,
    RenameWorkspaceEntry,
    SessionWorkspace,
    WorkspaceEntry,
    WorkspaceListing,
)
from app.kernel.api import Kernel

# A workspace file may be HTML or SVG: served raw, it must not run as a page of this origin.
RAW_HEADERS = {"Content-Security-Policy": "sandbox", "Cache-Control": "no-store"}


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel` (tagged `files`, as the file routes they sit beside)."""
    api = APIRouter(tags=["files"])
    _browse(api, kernel)
    _edit(api, kernel)
    return api


def _browse(api: APIRouter, kernel: Kernel) -> None:
    """What backs the workspace, its tree, a file's content, a directory's entries."""

    @api.get("/sessions/{session_id}/workspace", response_model_exclude_none=True)
    async def workspace(session_id: str) -> SessionWorkspace:
        """What backs the session's files: its project's directory, or its managed workspace."""
        return SessionWorkspace(**await kernel.workspaces.info(session_id))

    @api.get("/sessions/{session_id}/workspace/files")
    async def workspace_files(session_id: str) -> list[WorkspaceEntry]:
        """Every directory and file, depth first, each directory sorted by name (links, `.git`,
        `node_modules` and build output left out; at most 10,000)."""
        return [WorkspaceEntry(**e) for e in await kernel.workspaces.tree(session_id)]

    @api.get(
        "/sessions/{session_id}/workspace/file",
        response_model=str,
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    async def workspace_file(
        session_id: str,
        path: str = Query(description="Relative to the workspace root."),
        media: str = Query("", description="`1` for the raw bytes instead of JSON."),
    ) -> Any:
        """A UTF-8 file's text as a JSON string (up to 2 MiB), or its bytes with `media=1`."""
        if media in ("1", "true"):
            found = await kernel.workspaces.raw(session_id, path)
            return Response(found.data, media_type=found.media_type, headers=RAW_HEADERS)
        return await kernel.workspaces.text(session_id, path)

    @api.get("/sessions/{session_id}/workspace/entries")
    async def workspace_entries(
        session_id: str,
        path: str = Query("", description="A directory, relative to the root (default: it)."),
    ) -> WorkspaceListing:
        """The entries of one directory, directories first, with sizes and times."""
        return WorkspaceListing(**await kernel.workspaces.listing(session_id, path))


def _edit(api: APIRouter, kernel: Kernel) -> None:
    """Create, rename and delete entries; where an entry is on disk."""

    @api.post("/sessions/{session_id}/workspace/entries", status_code=201)
    async def create_workspace_entry(session_id: str, body: CreateWorkspaceEntry) -> str:
        """Create an empty file or a directory; answers its relative path."""
        return await kernel.workspaces.create(session_id, body.path, body.kind == "directory")

    @api.patch("/sessions/{session_id}/workspace/entries")
    async def rename_workspace_entry(session_id: str, body: RenameWorkspaceEntry) -> str:
        """Rename an entry within its directory; answers its new relative path."""
        return await kernel.workspaces.rename(session_id, body.path, body.new_name)

    @api.delete("/sessions/{session_id}/workspace/entries", status_code=204)
    async def delete_workspace_entry(
        session_id: str, path: str = Query("", description="Relative to the workspace root.")
    ) -> Response:
        """Delete an entry; a directory goes with everything in it."""
        await kernel.workspaces.delete(session_id, path)
        return Response(status_code=204)

    @api.get("/sessions/{session_id}/workspace/path")
    async def resolve_workspace_path(
        session_id: str, path: str = Query("", description="Empty for the workspace itself.")
    ) -> str:
        """Where an entry is on the kernel's disk (absolute path)."""
        return await kernel.workspaces.resolve(session_id, path)
