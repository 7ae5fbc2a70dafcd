"""The Agent Plugins 1.0.0 package format Foya reads, and what a package brings.

    <plugin>/plugin.json        the manifest: `$schema` (required, exactly MANIFEST_SCHEMA),
                                `name` (required: 1-64 of a-z 0-9 . -, starting and ending with a
                                letter or digit, no `--` or `..`), `version`, `description`,
                                `author` {name, email, url}, `homepage`, `repository`, `license`,
                                `keywords`, `extensions` {namespace: object}
    <plugin>/skills/<dir>/SKILL.md    skills (Foya counts one per directory)
    <plugin>/mcp.json           {"$schema": MCP_SCHEMA, "mcpServers": {name: server}}
    <plugin>/commands/**/*.md   commands, as in ~/.foya/commands (ours; Foya lists them as an
    <plugin>/agents/*.md        agent definitions, as in ~/.foya/agents    unsupported component)

Unknown manifest fields are ignored with a warning; anything else wrong is an error diagnostic
and makes the plugin invalid. `mcp.json` is read by `mcpspec`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import ValidationError

from app.kernel.plugins.models import Diagnostic, Manifest, Problem
from app.kernel.plugins.tree import read_limited, resolved_inside

MANIFEST_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MAX_MANIFEST_BYTES = 64 * 1024
MAX_COMMAND_DIRS = 3
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?")
_TEXT_FIELDS = ("$schema", "name", "version", "description", "homepage", "repository", "license")
_FIELDS = (*_TEXT_FIELDS, "author", "keywords", "extensions")


def valid_name(value: str) -> bool:
    """Whether `value` is a plugin (or marketplace) name of Agent Plugins 1.0."""
    return (
        1 <= len(value) <= 64
        and "--" not in value
        and ".." not in value
        and _NAME.fullmatch(value) is not None
    )


def diagnostic(
    component: str, path: Path, code: str, message: str, *, error: bool = True
) -> Diagnostic:
    severity = "error" if error else "warning"
    return Diagnostic(
        component=component, path=str(path), code=code, severity=severity, message=message
    )


def load_manifest(root: Path) -> tuple[Manifest | None, list[Diagnostic]]:
    """The manifest of the package at `root` and what is wrong with it."""
    path = root / "plugin.json"

    def fail(code: str, message: str) -> tuple[None, list[Diagnostic]]:
        return None, [diagnostic("manifest", path, code, message)]

    try:
        raw = json.loads(read_limited(path, MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        return fail("manifest_unreadable", "plugin.json is missing")
    except Problem as exc:
        return fail("manifest_unreadable", exc.message)
    except ValueError as exc:
        return fail("manifest_invalid", f"plugin.json is not valid JSON: {exc}")
    if not isinstance(raw, dict):
        return fail("manifest_invalid", "plugin.json must contain an object")
    found: list[Diagnostic] = []

    def problem(code: str, message: str, *, error: bool = True) -> None:
        found.append(diagnostic("manifest", path, code, message, error=error))

    for key in sorted(set(raw) - set(_FIELDS)):
        problem("unknown_field", f"unknown field ignored: {key}", error=False)
        del raw[key]
    for key in _TEXT_FIELDS:
        if key in raw and not isinstance(raw[key], str):
            problem("invalid_field", f"{key} must be a string")
    keywords = raw.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        problem("invalid_keywords", "keywords must be an array of strings")
    extensions = raw.pop("extensions", {})
    if not isinstance(extensions, dict):
        problem("invalid_extensions", "non-object extensions field ignored", error=False)
    else:
        for namespace, value in sorted(extensions.items()):
            if not isinstance(value, dict):
                problem("invalid_extension", f"extension must be an object: {namespace}")
    author = raw.get("author", {})
    if not isinstance(author, dict):
        problem("invalid_author", "author must be an object")
    else:
        for key, value in sorted(author.items()):
            if key not in ("name", "email", "url"):
                problem("invalid_author", f"unknown author field: {key}")
            elif not isinstance(value, str):
                problem("invalid_author", f"author.{key} must be a string")
    if raw.get("$schema") != MANIFEST_SCHEMA:
        problem("unsupported_schema", f"$schema must be {MANIFEST_SCHEMA}")
    name = raw.get("name")
    if not isinstance(name, str) or not valid_name(name):
        problem("invalid_name", f"name {str(name)[:80]!r} is not a valid plugin name")
    if any(d.severity == "error" for d in found):
        return None, found
    try:
        return Manifest.model_validate(raw), found
    except ValidationError as exc:
        return None, [*found, diagnostic("manifest", path, "manifest_invalid", str(exc))]


def count_skills(root: Path) -> tuple[int, list[Diagnostic]]:
    """The skill packages of `skills/` (a directory holding SKILL.md), as Foya counts them."""
    place = root / "skills"
    count, found = 0, list[Diagnostic]()
    if not _component_dir(root, place, "skills", found):
        return 0, found
    for entry in sorted(os.scandir(place), key=lambda e: e.name):
        main = Path(entry.path) / "SKILL.md"
        if entry.is_dir() and main.is_file():
            if resolved_inside(main, root):
                count += 1
            else:
                message = "skill skipped because SKILL.md resolves outside the plugin root"
                found.append(diagnostic("skills", main, "skill_path_escape", message, error=False))
    return count, found


def count_files(root: Path, component: str, depth: int) -> tuple[int, list[Diagnostic]]:
    """The `.md` files of `commands/` or `agents/`, at most `depth` directories down."""
    place = root / component
    found: list[Diagnostic] = []
    if not _component_dir(root, place, component, found):
        return 0, found
    count = 0
    for dirpath, dirnames, filenames in os.walk(place):
        if len(Path(dirpath).relative_to(place).parts) >= depth:
            dirnames.clear()
        count += sum(1 for n in filenames if n.lower().endswith(".md"))
    return count, found


def _component_dir(root: Path, place: Path, component: str, found: list[Diagnostic]) -> bool:
    """Whether `place` is a real directory of the package (absent: False, silently)."""
    if not place.exists() and not place.is_symlink():
        return False
    if place.is_symlink() or not place.is_dir() or not resolved_inside(place, root):
        message = f"{component} must be a directory inside the plugin root"
        found.append(diagnostic(component, place, f"invalid_{component}_root", message))
        return False
    return True
