"""Request and response models of a session's workspace routes (browse, read, create, rename,
delete)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.http.models.common import Strict


class SessionWorkspace(BaseModel):
    """The directory backing a session's files."""

    kind: Literal["project", "managed"] = Field(
        description="`project`: the session's project directory; `managed`: its own workspace."
    )
    name: str = Field(description="The project's name, or `Workspace`.")
    path: str = Field(description="The workspace's absolute path on the kernel's machine.")
    project_id: str | None = None


class WorkspaceEntry(BaseModel):
    """A directory or file of the workspace tree."""

    path: str = Field(description="Relative to the workspace root, with `/`.")
    name: str
    is_dir: bool


class DirectoryEntry(BaseModel):
    name: str
    path: str
    kind: Literal["dir", "file", "other"]
    size: int
    modified_at: str


class WorkspaceListing(BaseModel):
    root: str
    path: str
    entries: list[DirectoryEntry]
    truncated: bool


class CreateWorkspaceEntry(Strict):
    """A new empty file or directory (Go decodes it with `DisallowUnknownFields`)."""

    path: str = Field("", description="Relative to the workspace root; its parent must exist.")
    kind: Literal["file", "directory"]


class RenameWorkspaceEntry(Strict):
    """A new name for an entry, within its directory."""

    path: str = Field("", description="The entry, relative to the workspace root.")
    new_name: str = Field("", description="One name, without `/`.")
