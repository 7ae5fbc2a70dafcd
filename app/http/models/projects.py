"""Request bodies of the project routes (create, change, trust)."""

from __future__ import annotations

from pydantic import Field

from app.http.models.common import Lenient, Strict


class CreateProject(Lenient):
    path: str
    name: str | None = None


class UpdateProject(Strict):
    name: str | None = None
    pinned: bool | None = None


class TrustBody(Strict):
    """Trust a project's executable files as they are now. With `digest` (the one a client
    showed the user from `GET …/trust`), only if the files still have it: else 409
    `trust_digest_changed` and nothing changes."""

    digest: str | None = Field(None, description="The digest the user reviewed.")
