"""Workspaces: the directory a session's tools run in — its
project's, or the session's managed workspace under the data dir — described, browsed and
changed by hand, confined to it.

Modules: `paths` (the path rules and the exception map), `reads` (listing, tree, text, bytes),
`entries` (create, rename, delete, resolve). `Workspaces` finds a session's workspace and runs
the blocking work off the event loop.

Why a change made here is not journaled as a file change: file review and rewind are about the
agent's changes, and Foya records only those (its workspace routes write nothing to its log),
so a user's create, rename or delete never shows up in `GET …/file-review` and is never undone
by a rewind. It is an edit made beside the agent, like one in an editor: an agent's later
`write` of the same file is recorded with the user's file as its before-image, so it stays
reviewable and its undo gives the user's file back; an agent change the user deleted or
renamed since is `modified`, never silently recreated. Each change is a single atomic call
(`entries`), so there is nothing half-done for a crash journal to repair.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from app.files import ProtectedPaths
from app.kernel.sessions import Sessions
from app.kernel.workspace import entries, reads
from app.kernel.workspace.paths import (
    BinaryFile,
    FileTooLarge,
    InvalidWorkspacePath,
    WorkspaceEntryExists,
    WorkspaceFileNotFound,
)
from app.kernel.workspace.reads import Listing, RawFile, TreeEntry, existing_file

__all__ = [
    "BinaryFile",
    "FileTooLarge",
    "InvalidWorkspacePath",
    "Listing",
    "RawFile",
    "SessionWorkspace",
    "TreeEntry",
    "WorkspaceEntryExists",
    "WorkspaceFileNotFound",
    "Workspaces",
    "existing_file",
]

MANAGED_NAME = "Workspace"  # Foya's name for a session's own workspace


class SessionWorkspace(TypedDict):
    """What backs a session's files: its project (`project_id`) or its managed workspace."""

    kind: Literal["project", "managed"]
    name: str
    path: str
    project_id: NotRequired[str]


class Workspaces:
    """The routes' entry: finds a session's workspace, then works off the event loop."""

    def __init__(self, sessions: Sessions, protected: ProtectedPaths | None = None) -> None:
        self.sessions = sessions
        self.protected = protected or ProtectedPaths()

    async def info(self, session: str) -> SessionWorkspace:
        """The session's workspace: its project's directory and name, or its own."""
        row = await self.sessions.row(session)
        project_id = row.get("project_id")
        if project_id and self.sessions.projects.exists(project_id):
            project = self.sessions.projects.get(project_id)
            return {
                "kind": "project",
                "name": project["name"],
                "path": project["path"],
                "project_id": project["id"],
            }
        return {"kind": "managed", "name": MANAGED_NAME, "path": str(self.sessions.workspace(row))}

    async def _root(self, session: str) -> Path:
        return self.sessions.workspace(await self.sessions.row(session))

    async def listing(self, session: str, path: str = "") -> Listing:
        return await asyncio.to_thread(
            reads.listing, await self._root(session), path, self.protected
        )

    async def tree(self, session: str) -> list[TreeEntry]:
        return await asyncio.to_thread(reads.tree, await self._root(session), self.protected)

    async def text(self, session: str, path: str) -> str:
        return await asyncio.to_thread(reads.text, await self._root(session), path, self.protected)

    async def raw(self, session: str, path: str) -> RawFile:
        return await asyncio.to_thread(reads.raw, await self._root(session), path, self.protected)

    async def create(self, session: str, path: str, directory: bool) -> str:
        """Create an empty file or a directory; its path relative to the workspace."""
        root = await self._root(session)
        return await asyncio.to_thread(entries.create, root, path, directory, self.protected)

    async def rename(self, session: str, path: str, new_name: str) -> str:
        """Rename an entry within its directory; its new relative path."""
        root = await self._root(session)
        return await asyncio.to_thread(entries.rename, root, path, new_name, self.protected)

    async def delete(self, session: str, path: str) -> None:
        """Delete an entry (a directory with its contents)."""
        root = await self._root(session)
        await asyncio.to_thread(entries.delete, root, path, self.protected)

    async def resolve(self, session: str, path: str) -> str:
        """The absolute path of an entry (of the workspace for an empty path)."""
        root = await self._root(session)
        return await asyncio.to_thread(entries.resolve, root, path, self.protected)
