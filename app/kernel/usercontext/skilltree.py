"""Where skills lie on disk, and what a found `SKILL.md` becomes: a skill, or a rejected file.

A root is searched for `SKILL.md` (any case) at most `MAX_DEPTH` directories down; a directory
holding one is a skill package, and its subdirectories are its resources, not more skills (Foya
searches them too). A symbolic link to a directory counts as a package when the target holds a
`SKILL.md` (as in Foya). A root yields at most `MAX_SKILLS_PER_ROOT` files, in name order.

A skill's ref is `global:<name>` or `project:<id>:<name>`, `<name>` lower-cased. A file that
is not loaded becomes a `RejectedSkill` with an error diagnostic (a project's keeps the ref it
would have had, as Foya reports it); the scan goes on with the others.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from app.kernel.usercontext.skillfile import SkillFile
from app.kernel.usercontext.skillmodels import (
    Diagnostic,
    Manifest,
    RejectedSkill,
    Skill,
    SkillScope,
)

MAX_DEPTH = 4
MAX_SKILLS_PER_ROOT = 256

Found = tuple[Skill, SkillFile]


@dataclass
class Scan:
    """What one scan found, rejected and has to say about it."""

    found: list[Found] = field(default_factory=list)  # every scope's skills (the inventory)
    rejected: list[RejectedSkill] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def skill_files(root: Path, scan: Scan) -> list[tuple[str, str | None]]:
    """The SKILL.md files below `root` (at most `MAX_SKILLS_PER_ROOT`, in name order), each
    with its real path when no symbolic link was followed to it (else None: resolve it)."""
    out: list[tuple[str, str | None]] = []

    def visit(directory: str, real: str, depth: int) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except FileNotFoundError:
            return
        except OSError as exc:
            scan.diagnostics.append(_diagnostic(directory, "read_failed", str(exc.strerror)))
            return
        main = next((e for e in entries if e.name.lower() == "skill.md" and e.is_file()), None)
        if main is not None:
            out.append((main.path, None if main.is_symlink() else os.path.join(real, main.name)))
            if depth > 0:  # a package: what is below it is its resources
                return
        for entry in entries:
            if len(out) >= MAX_SKILLS_PER_ROOT:
                return
            if entry.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH:
                    visit(entry.path, os.path.join(real, entry.name), depth + 1)
            elif entry.is_symlink() and entry.is_dir():
                linked = os.path.join(entry.path, "SKILL.md")
                if os.path.isfile(linked):
                    out.append((linked, None))

    if root.is_dir():
        visit(str(root), os.path.realpath(root), 0)
    return out


def inside(path: str, directory: str) -> bool:
    """Whether real path `path` is `directory` or below it."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def skill_ref(scope: SkillScope, project_id: str | None, name: str) -> str:
    """The ref of skill `name` in its scope."""
    key = name.strip().lower()
    return f"global:{key}" if scope == "global" else f"project:{project_id}:{key}"


def make_skill(
    parsed: SkillFile, name: str, scope: SkillScope, project_id: str | None, main: str
) -> Skill:
    """The skill a parsed `SKILL.md` at `main` stands for, its parse warnings as diagnostics."""
    ref = skill_ref(scope, project_id, name)
    manifest = Manifest(**{**parsed.manifest, "name": name})
    diagnostics = [
        Diagnostic(
            ref=ref,
            name=name,
            path=main,
            code=code,
            severity="warning",
            message=message,
            field=field,
        )
        for code, message, field in parsed.warnings
    ]
    return Skill(
        ref=ref,
        name=name,
        description=manifest.description or "",
        scope=scope,
        path=main,
        root=os.path.dirname(main),
        main_path=main,
        manifest=manifest,
        enabled=True,
        pinned=False,
        allowed_tools=manifest.allowed_tools,
        required_tools=manifest.required_tools,
        required_capabilities=manifest.required_capabilities,
        content_hash=parsed.content_hash,
        diagnostics=diagnostics or None,
    )


def reject(
    scan: Scan,
    scope: SkillScope,
    project_id: str | None,
    name: str,
    path: str,
    code: str,
    message: str,
) -> None:
    """Report a SKILL.md that is not loaded (a project's with the ref it would have, as Foya
    does)."""
    ref = skill_ref(scope, project_id, name) if scope == "project" else None
    diagnostic = _diagnostic(path, code, message, name=name, ref=ref)
    rejected = RejectedSkill(ref=ref, name=name, path=path, scope=scope, diagnostics=[diagnostic])
    scan.rejected.append(rejected)
    scan.diagnostics.append(diagnostic)


def _diagnostic(
    path: str, code: str, message: str, name: str | None = None, ref: str | None = None
) -> Diagnostic:
    return Diagnostic(ref=ref, name=name, path=path, code=code, severity="error", message=message)
