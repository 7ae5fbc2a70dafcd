"""Request and response models of rewind, file review, artifacts and workspace (reference §1)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, StrictBool

from app.http.models import NonNegative, Strict, one_of


class Rewind(Strict):
    """Empty (or `confirm: false`) previews; a confirm repeats what the preview returned."""

    confirm: StrictBool = False
    expected_head_seq: NonNegative | None = None
    expected_file_state: str | None = None
    force_file_keys: list[str] | None = None


class FilePreview(BaseModel):
    key: str
    path: str
    status: str
    additions: int
    deletions: int
    diff: str
    action: str | None = None


class Rewound(BaseModel):
    status: str
    message: str
    files: list[FilePreview]
    file_state_token: str | None = None
    head_seq: int


class FileReview(BaseModel):
    files: list[FilePreview]
    file_state_token: str
    through_seq: int


class ResolveFileReview(Strict):
    action: Annotated[str, one_of("keep", "undo")]
    expected_through_seq: NonNegative
    expected_file_state: str
    force_file_keys: list[str] | None = None


class Resolved(BaseModel):
    status: str


class Attachment(BaseModel):
    """AttachmentRef."""

    id: str
    name: str
    kind: str
    media_type: str
    bytes: int
    width: int | None = None
    height: int | None = None
    sha256: str | None = None


class AttachmentCreated(BaseModel):
    attachment: Attachment


class WorkspaceEntry(BaseModel):
    name: str
    path: str
    kind: str
    size: int
    modified_at: str


class WorkspaceListing(BaseModel):
    root: str
    path: str
    entries: list[WorkspaceEntry]
    truncated: bool


class WorkspaceFiles(BaseModel):
    root: str
    files: list[str]
    truncated: bool


class WorkspaceFile(BaseModel):
    path: str
    size: int
    media_type: str
    binary: bool
    content: str | None = None
    truncated: bool
