"""Request bodies of the skill routes."""

from __future__ import annotations

from pydantic import StrictBool

from app.http.models.common import Lenient


class SkillEnableRequest(Lenient):
    enabled: StrictBool


class SkillPinnedRequest(Lenient):
    pinned: StrictBool
