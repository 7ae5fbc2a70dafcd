"""The request body of `PUT /projects/{id}/trust` (`app.kernel.trust`)."""

from __future__ import annotations

from pydantic import Field

from app.http.models import Strict


class TrustBody(Strict):
    """Trust a project's executable files as they are now. With `digest` (the one a client
    showed the user from `GET …/trust`), only if the files still have it: else 409
    `trust_digest_changed` and nothing changes."""

    digest: str | None = Field(None, description="The digest the user reviewed.")
