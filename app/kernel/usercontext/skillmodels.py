"""Skills as served (Foya's `skill.Skill`, `ScanResult`, …) and their errors.

Fields Foya omits when empty are None here, and the routes leave None out.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from app.errors import BadRequest, NotFound
from app.jsontypes import JSONObject

SkillScope = Literal["global", "project"]


class InvalidSkillRef(BadRequest):
    """A ref or resource path that is empty or could read as a path."""


class SkillNotFound(NotFound):
    """No skill of that ref."""

    code = "skill_not_found"


class Manifest(BaseModel):
    """The SKILL.md front matter Foya reads (its YAML names, `-` as `_`)."""

    name: str | None = None
    description: str | None = None
    allowed_tools: list[str] | None = None
    required_tools: list[str] | None = None
    required_capabilities: list[str] | None = None
    license: str | None = None
    compatibility: str | None = None
    metadata: JSONObject | None = None
    category: str | None = None


class Resource(BaseModel):
    """A file of a skill's package besides its SKILL.md (path relative to the package)."""

    path: str
    size: int | None = None
    media_type: str | None = None


class ResourceContent(BaseModel):
    skill_ref: str
    path: str
    media_type: str | None = None
    content: str


class Diagnostic(BaseModel):
    """Something wrong with a skill: `severity` `warning` (it loads) or `error` (it does not)."""

    ref: str | None = None
    name: str | None = None
    path: str | None = None
    code: str
    severity: str
    message: str
    field: str | None = None


class Skill(BaseModel):
    """One discovered skill. `path` and `main_path` are its SKILL.md, `root` its package."""

    ref: str
    name: str
    description: str
    scope: SkillScope
    path: str | None = None
    root: str | None = None
    main_path: str | None = None
    manifest: Manifest
    enabled: bool
    pinned: bool
    allowed_tools: list[str] | None = None
    required_tools: list[str] | None = None
    required_capabilities: list[str] | None = None
    resources: list[Resource] | None = None
    content_hash: str | None = None
    diagnostics: list[Diagnostic] | None = None


class RejectedSkill(BaseModel):
    """A SKILL.md that is not loaded, and why."""

    ref: str | None = None
    name: str | None = None
    path: str | None = None
    scope: SkillScope
    diagnostics: list[Diagnostic]


class ScanResult(BaseModel):
    """`…/skills/inspect`: the winning skills, every scope's skills, and what was rejected."""

    skills: list[Skill]
    inventory: list[Skill]
    rejected: list[RejectedSkill] | None = None
    diagnostics: list[Diagnostic] | None = None
