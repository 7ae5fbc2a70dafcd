"""Request bodies of the skill routes (reference §1 "Skills")."""

from __future__ import annotations

from pydantic import StrictBool

from app.http.models import Strict


class SkillEnableRequest(Strict):
    enabled: StrictBool


class SkillPinnedRequest(Strict):
    pinned: StrictBool
