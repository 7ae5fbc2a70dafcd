"""Response models of the session artifact routes (uploaded attachments)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel

from app.http.models.common import one_of


class Attachment(BaseModel):
    """AttachmentRef."""

    id: str
    name: str
    kind: Annotated[Literal["image"], one_of("image")]
    media_type: str
    bytes: int
    width: int | None = None
    height: int | None = None
    sha256: str | None = None


class AttachmentCreated(BaseModel):
    attachment: Attachment
