"""Rules and memories as the API serves them, their limits and their errors.

Errors (rendered by `app.http.errors`):

- `InvalidContextItem` 400 `invalid_context_item`: bad scope, missing `project_id`, empty or too
  long content, bad rule configuration, or a `path` that would leave `<project>/.foya/rules`
- `ContextItemNotFound` 404 `not_found`: no rule or memory with that id
  (an unknown project is `app.kernel.projects.ProjectNotFound`, 404 `not_found`, as in Foya)
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel

from app.errors import BadRequest, NotFound

Scope = Literal["global", "project"]
SCOPES = ("global", "project")
TRIGGERS = ("always", "glob", "manual", "model_decision")
MAX_RULE_CHARS = 6000
MAX_MEMORY_CHARS = 2000
MAX_RULE_DIRS = 3  # rule files nest at most three directories below `.foya/rules`
MAX_NAME_BYTES = 200  # below NAME_MAX (255) with room for `.md` and app.files' temp names


class InvalidContextItem(BadRequest):
    code = "invalid_context_item"


class ContextItemNotFound(NotFound):
    """No rule or memory with that id."""


class Rule(BaseModel):
    """One rule. `error` says why its file or block could not be read (the rest still loads)."""

    id: str
    name: str
    description: str | None = None
    trigger: str
    globs: list[str] | None = None
    path: str | None = None
    scope: Scope
    project_id: str | None = None
    content: str
    created_at: str
    updated_at: str
    error: str | None = None


class Memory(BaseModel):
    """The one memory document of a scope."""

    id: str
    scope: Scope
    project_id: str | None = None
    content: str
    created_at: str
    updated_at: str
    error: str | None = None


class MemorySettings(BaseModel):
    enabled: bool


def stable_id(source: str) -> str:
    """The id of an item whose file names none: the same file always gets the same id."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def clean_content(content: str, limit: int) -> str:
    """`content` trimmed, its line ends (`\r\n`, a lone `\r`) `\n`, as its file reads back;
    empty or longer than `limit` characters is refused."""
    cleaned = content.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not cleaned:
        raise InvalidContextItem("content is required")
    if len(cleaned) > limit:
        raise InvalidContextItem(f"content is too large: maximum is {limit} characters")
    return cleaned


def rule_path(value: str) -> str:
    """A rule `path` relative to `.foya/rules`, `.md` appended; anything that could leave that
    directory (absolute, `..`, NUL, backslash) or nests deeper than three directories is refused."""
    text = value.strip()
    if "\0" in text or "\\" in text or text.startswith("/") or text.startswith("~"):
        raise InvalidContextItem("path: must be relative to .foya/rules, without NUL or '\\'")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise InvalidContextItem("path: must name a file inside .foya/rules, without '..'")
    if any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        raise InvalidContextItem(f"path: a name is longer than {MAX_NAME_BYTES} bytes")
    if len(parts) - 1 > MAX_RULE_DIRS:
        raise InvalidContextItem(f"path: at most {MAX_RULE_DIRS} directories deep")
    if not parts[-1].lower().endswith(".md"):
        parts[-1] += ".md"
    return "/".join(parts)


def default_rule_path(name: str, rule_id: str) -> str:
    """`<slug of name>.md`, or `rule-<id prefix>.md` when the name has no usable characters."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9_-]+", "-", name.strip().lower())).strip("-_")
    return (slug or f"rule-{rule_id[:8]}") + ".md"


def apply_defaults(rule: Rule) -> Rule:
    """Fill name, path and trigger the way Foya does, and check the trigger's needs."""
    if not rule.name:
        stem = rule.path.rsplit("/", 1)[-1].rsplit(".", 1)[0] if rule.path else ""
        rule.name = stem or f"rule-{rule.id[:8]}"
    if rule.scope == "project" and not rule.path:
        rule.path = default_rule_path(rule.name, rule.id)
    in_subdir = rule.scope == "project" and rule.path is not None and "/" in rule.path
    if not rule.trigger:
        rule.trigger = "glob" if in_subdir else "always"
    if rule.trigger not in TRIGGERS:
        raise InvalidContextItem(f"trigger: must be one of {', '.join(TRIGGERS)}")
    if rule.trigger == "model_decision" and not rule.description:
        raise InvalidContextItem("trigger model_decision requires a description")
    if rule.globs is not None and any(not g.strip() for g in rule.globs):
        raise InvalidContextItem("globs: a glob cannot be empty")
    if rule.trigger == "glob" and not rule.globs:
        if not in_subdir or rule.path is None:
            raise InvalidContextItem("trigger glob requires globs")
        rule.globs = [rule.path.rsplit("/", 1)[0] + "/**"]
    return rule
