"""`foya rules` and `memory`: thin clients of the context routes (`/rules`, `/memories`), as
`app.ops.commands` are of the session routes; `foya skills` is in app.ops.skill_commands and
shares the helpers here.

Foya's CLI has `rules list|add|edit|delete`, `memory status|enable|disable|show|set|clear` and
`skills list|enable|disable`, each taking `--project ID` for a project's scope (else global), and
prints indented JSON. Here each prints plain text, or with `--json` the kernel's JSON as it came
(one document a line); `show` and `edit-path` are ours. Errors as `app.ops.commands` prints them:
an id that names nothing is one line and exit 1.

`edit-path` prints the file (or directory) a user edits by hand, in the layout of
`app.kernel.usercontext.files` under the kernel's `~/.foya`. On a Unix socket the kernel runs on
this machine and is taken to share this HOME, so the path is absolute; with `--url` the kernel is
elsewhere and the path starts with `~/` (its user's home there). A project's directory comes from
`GET /projects`, a skill's SKILL.md from its `path`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path, PurePath, PurePosixPath

from app.jsontypes import JSONObject
from app.ops.commands import Command, Console
from app.ops.rest import FAILED, OK, Rest, Target

Item = JSONObject


def _scope(project: str | None) -> dict[str, str]:
    """The `scope` (and `project_id`) query of `--project`."""
    return {"scope": "global"} if project is None else {"scope": "project", "project_id": project}


def _of(project: str | None) -> str:
    return "global" if project is None else f"project {project}"


# ---------------------------------------------------------------------------------------- files


def foya_home(target: Target) -> PurePath:
    """The kernel's `~/.foya`: this HOME's on a Unix socket, `~/.foya` as such with --url."""
    return Path.home() / ".foya" if target.url is None else PurePosixPath("~/.foya")


def project_memory_file(foya: PurePath, project_path: str) -> PurePath:
    """A project's memory file, named after its directory as the kernel names it
    (`ContextFiles.memory_file`; a test holds the two equal)."""
    parts = [p.replace(":", "_") for p in PurePosixPath(posixpath.normpath(project_path)).parts[1:]]
    return foya / "memory" / "projects" / PurePosixPath(*(parts or ["_root"])) / "project_memory.md"


def project_path(rest: Rest, con: Console, project: str) -> str | None:
    """The directory of `project` (GET /projects), or None, said, when there is no such one."""
    for p in rest.call("GET", "/projects"):
        if p.get("id") == project:
            return str(p["path"])
    con.note(f"project {project} not found")
    return None


# ---------------------------------------------------------------------------------------- text


def fields(con: Console, item: Item, names: Sequence[str]) -> None:
    """`name: value` lines of the fields `item` has, values aligned."""
    shown = [(n, item[n]) for n in names if item.get(n) not in (None, "", [])]
    width = max(len(n) for n, _ in shown) + 1 if shown else 0
    for name, value in shown:
        text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        con.line(f"{name + ':':<{width}} {text}")


def _errors(con: Console, kind: str, items: Sequence[Item]) -> None:
    """Why an item's file could not be read as written (the kernel serves the rest)."""
    for item in items:
        if item.get("error"):
            con.note(f"{kind} {item.get('id')}: {item['error']}")


# ---------------------------------------------------------------------------------------- rules


def rules_list(project: str | None) -> Command:
    """`GET /rules`: the rules of a scope, oldest change first."""

    def command(rest: Rest, con: Console) -> int:
        rules = rest.call("GET", "/rules", **_scope(project))
        if con.as_json:
            con.data(rules)
        elif not rules:
            con.note(f"no {_of(project)} rules")
        else:
            rows = [("ID", "TRIGGER", "NAME", "PATH")]
            rows += [(str(r["id"]), str(r["trigger"]), str(r["name"]), r.get("path") or "")
                     for r in rules]  # fmt: skip
            con.table(rows)
            _errors(con, "rule", rules)
        return OK

    return command


def _find_rule(rest: Rest, rule_id: str, project: str | None) -> tuple[Item, str | None] | None:
    """The rule `rule_id` and its project id: in `project`, else global or in any project."""
    scopes: list[str | None] = [project]
    if project is None:
        scopes += [str(p["id"]) for p in rest.call("GET", "/projects")]
    for scope in scopes:
        for rule in rest.call("GET", "/rules", **_scope(scope)):
            if rule.get("id") == rule_id:
                return rule, scope
    return None


def rules_show(rule_id: str, project: str | None) -> Command:
    """One rule: its fields, then its content."""

    def command(rest: Rest, con: Console) -> int:
        found = _find_rule(rest, rule_id, project)
        if found is None:
            con.note(f"rule {rule_id} not found")
            return FAILED
        rule = found[0]
        if con.as_json:
            con.data(rule)
            return OK
        names = ("id", "name", "description", "trigger", "globs", "scope", "project_id", "path")
        fields(con, rule, (*names, "updated_at"))
        con.line()
        con.line(str(rule["content"]))
        _errors(con, "rule", [rule])
        return OK

    return command


def rules_add(project: str | None, content: str) -> Command:
    """`POST /rules` with content only: the kernel names it and makes it `always`."""

    def command(rest: Rest, con: Console) -> int:
        rule = rest.call("POST", "/rules", {**_scope(project), "content": content})
        if con.as_json:
            con.data(rule)
        else:
            con.line(f"added rule {rule['id']} ({_of(project)})")
        return OK

    return command


def rules_edit(rule_id: str, content: str) -> Command:
    """`PATCH /rules/{id}` with content only: name, trigger and globs keep their values."""

    def command(rest: Rest, con: Console) -> int:
        rule = rest.call("PATCH", f"/rules/{rule_id}", {"content": content})
        if con.as_json:
            con.data(rule)
        else:
            con.line(f"updated rule {rule_id}")
        return OK

    return command


def rules_delete(rule_id: str) -> Command:
    def command(rest: Rest, con: Console) -> int:
        rest.call("DELETE", f"/rules/{rule_id}")
        con.line(f"deleted rule {rule_id}")
        return OK

    return command


def rules_edit_path(rule_id: str | None, project: str | None) -> Command:
    """The global rules file, a project's rules directory, or the file of rule `rule_id`."""

    def command(rest: Rest, con: Console) -> int:
        scope, rel = project, None
        if rule_id is not None:
            found = _find_rule(rest, rule_id, project)
            if found is None:
                con.note(f"rule {rule_id} not found")
                return FAILED
            scope, rel = found[1], found[0].get("path")
        if scope is None:
            con.line(str(foya_home(rest.target) / "rules" / "user_rules.md"))
            return OK
        root = project_path(rest, con, scope)
        if root is None:
            return FAILED
        rules = PurePath(root) / ".foya" / "rules"
        con.line(str(rules / rel) if rel else f"{rules}/")
        return OK

    return command


# --------------------------------------------------------------------------------------- memory


def _memory(rest: Rest, project: str | None) -> Item | None:
    """The memory document of a scope, if it has one."""
    found = rest.call("GET", "/memories", **_scope(project))
    return found[0] if found else None


def memory_show(project: str | None) -> Command:
    """The memory document of a scope, as its content."""

    def command(rest: Rest, con: Console) -> int:
        found = rest.call("GET", "/memories", **_scope(project))
        if con.as_json:
            con.data(found)
        elif not found:
            con.note(f"no {_of(project)} memory")
        else:
            con.line(str(found[0]["content"]))
            _errors(con, "memory", found)
        return OK

    return command


def memory_settings(enabled: bool | None) -> Command:
    """`GET /settings/memory`, or `PUT` it to `enabled`."""

    def command(rest: Rest, con: Console) -> int:
        if enabled is None:
            settings = rest.call("GET", "/settings/memory")
        else:
            settings = rest.call("PUT", "/settings/memory", {"enabled": enabled})
        if con.as_json:
            con.data(settings)
        else:
            con.line(f"memory: {'enabled' if settings['enabled'] else 'disabled'}")
        return OK

    return command


def memory_set(project: str | None, content: str) -> Command:
    """Replace a scope's memory with `content` (`PATCH`, or `POST` when it has none)."""

    def command(rest: Rest, con: Console) -> int:
        memory = _memory(rest, project)
        if memory is None:
            memory = rest.call("POST", "/memories", {**_scope(project), "content": content})
        else:
            memory = rest.call("PATCH", f"/memories/{memory['id']}", {"content": content})
        if con.as_json:
            con.data(memory)
        else:
            con.line(f"set {_of(project)} memory")
        return OK

    return command


def memory_clear(project: str | None) -> Command:
    def command(rest: Rest, con: Console) -> int:
        memory = _memory(rest, project)
        if memory is None:
            con.note(f"no {_of(project)} memory to clear")
            return OK
        rest.call("DELETE", f"/memories/{memory['id']}")
        con.line(f"cleared {_of(project)} memory")
        return OK

    return command


def memory_edit_path(project: str | None) -> Command:
    """`user_profile.md`, or the project's memory file."""

    def command(rest: Rest, con: Console) -> int:
        home = foya_home(rest.target)
        if project is None:
            con.line(str(home / "memory" / "user_profile.md"))
            return OK
        root = project_path(rest, con, project)
        if root is None:
            return FAILED
        con.line(str(project_memory_file(home, root)))
        return OK

    return command
