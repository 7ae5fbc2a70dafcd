"""`foya skills`: a thin client of the skill routes (`/skills`), in Foya's wire
shape: each skill has `ref` (`global:<name>`, `project:<id>:<name>`, `builtin:<name>`), `name`,
`description`, `scope`, `enabled`, `pinned`, and the SKILL.md it was read from (`main_path`, or
`path`) unless it is built in. Printing, errors and `edit-path` as in app.ops.context_commands.

Foya's `PATCH /skills/{ref}` records any ref; `enable` and `disable` look the skill up first, so
a mistyped ref is refused (exit 1) instead of silently remembered.
"""

from __future__ import annotations

from pathlib import PurePath

from app.ops.commands import Command, Console
from app.ops.context_commands import Item, fields, foya_home, project_path
from app.ops.rest import FAILED, OK, Rest


def _skills(rest: Rest, project: str | None) -> list[Item]:
    """Every skill (`?all=true`: each scope's, disabled ones too), a project's with `project`."""
    path = "/skills" if project is None else f"/projects/{project}/skills"
    found: list[Item] = rest.call("GET", path, all="true")
    return found


def _find_skill(rest: Rest, ref: str, project: str | None) -> Item | None:
    """The skill `ref` (a project's ref names its project), else the first one named `ref`:
    the list puts project before global before built-in, the order in which names win."""
    if ref.startswith("project:") and ref.count(":") >= 2:
        project = ref.split(":", 2)[1]
    skills = _skills(rest, project)
    by_ref = [s for s in skills if s.get("ref") == ref]
    by_name = [s for s in skills if str(s.get("name", "")).lower() == ref.lower()]
    found = by_ref or by_name
    return found[0] if found else None


def _state(skill: Item) -> str:
    return ("enabled" if skill.get("enabled") else "disabled") + (
        ", pinned" if skill.get("pinned") else ""
    )


SHOWN = ("ref", "name", "scope", "state", "description", "path", "allowed_tools",
         "required_tools", "required_capabilities")  # fmt: skip


def _skill_file(skill: Item) -> str | None:
    """The skill's SKILL.md (`main_path`, Foya's newer name, else `path`); None if built in."""
    found = skill.get("main_path") or skill.get("path")
    return str(found) if found else None


def skills_list(project: str | None) -> Command:
    """`GET /skills?all=true` (or a project's): a table of refs, scopes and states."""

    def command(rest: Rest, con: Console) -> int:
        skills = _skills(rest, project)
        if con.as_json:
            con.data(skills)
        elif not skills:
            con.note("no skills" + ("" if project is None else f" for project {project}"))
        else:
            rows = [("REF", "SCOPE", "STATE", "DESCRIPTION")]
            for s in skills:
                about = (str(s.get("description") or "").splitlines() or [""])[0]
                rows.append((str(s["ref"]), str(s.get("scope")), _state(s), about))
            con.table(rows)
        return OK

    return command


def skills_show(ref: str, project: str | None) -> Command:
    """One skill's fields, then what the kernel found wrong with its file (on stderr)."""

    def command(rest: Rest, con: Console) -> int:
        skill = _find_skill(rest, ref, project)
        if skill is None:
            con.note(f"skill {ref} not found")
            return FAILED
        if con.as_json:
            con.data(skill)
            return OK
        shown = {**skill, "state": _state(skill), "path": _skill_file(skill)}
        fields(con, shown, SHOWN)
        for d in skill.get("diagnostics") or ():
            con.note(f"skill {skill['ref']}: {d.get('severity')}: {d.get('message')}")
        return OK

    return command


def skills_enable(ref: str, project: str | None, enabled: bool) -> Command:
    """`PATCH /skills/{ref} {enabled}` for a skill that exists (Foya records any ref)."""

    def command(rest: Rest, con: Console) -> int:
        skill = _find_skill(rest, ref, project)
        if skill is None:
            con.note(f"skill {ref} not found")
            return FAILED
        rest.call("PATCH", f"/skills/{skill['ref']}", {"enabled": enabled})
        con.line(f"{'enabled' if enabled else 'disabled'} skill {skill['ref']}")
        return OK

    return command


def skills_edit_path(ref: str | None, project: str | None) -> Command:
    """A skill's SKILL.md, or the directory new skills go in (global, or a project's)."""

    def command(rest: Rest, con: Console) -> int:
        if ref is not None:
            skill = _find_skill(rest, ref, project)
            if skill is None:
                con.note(f"skill {ref} not found")
                return FAILED
            path = _skill_file(skill)
            if path is None:
                con.note(f"skill {skill['ref']} is built in: it has no file")
                return FAILED
            con.line(path)
            return OK
        if project is None:
            con.line(f"{foya_home(rest.target) / 'skills'}/")
            return OK
        root = project_path(rest, con, project)
        if root is None:
            return FAILED
        con.line(f"{PurePath(root) / '.foya' / 'skills'}/")
        return OK

    return command
