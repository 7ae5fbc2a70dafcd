"""Request bodies of the skill routes (reference §1 "Skills")."""

from __future__ import annotations

from pydantic import StrictBool

from app.http.models import Lenient


class SkillEnableRequest(Lenient):
    enabled: StrictBool


class SkillPinnedRequest(Lenient):
    pinned: StrictBool
