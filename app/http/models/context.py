"""Request bodies of the rule, memory and memory-settings routes.

`scope` and `trigger` are plain strings documented with their values: the kernel checks them and
answers 400 `invalid_context_item`, as Foya does, rather than a generic validation error.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StrictBool

from app.http.models.common import Strict, one_of

ContextScope = Annotated[str, one_of("global", "project")]
RuleTrigger = Annotated[str, one_of("always", "glob", "manual", "model_decision")]


class CreateRule(Strict):
    scope: ContextScope
    project_id: str | None = None
    content: str
    name: str | None = None
    description: str | None = None
    trigger: RuleTrigger | None = None
    globs: list[str] | None = None
    path: str | None = None


class UpdateRule(Strict):
    """Fields not sent keep their value."""

    content: str | None = None
    name: str | None = None
    description: str | None = None
    trigger: RuleTrigger | None = None
    globs: list[str] | None = None
    path: str | None = None


class CreateMemory(Strict):
    scope: ContextScope
    project_id: str | None = None
    content: str


class UpdateMemory(Strict):
    content: str


class MemorySettingsBody(Strict):
    enabled: StrictBool
