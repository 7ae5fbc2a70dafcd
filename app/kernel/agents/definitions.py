"""Agent definitions (Foya's `agentdef`): the roles a child session can be started as, and where
they are found. One definition and its file format: `app.kernel.agents.definition`.

Built in: `explorer`, `researcher` and `worker` (Foya's three, with their tools and instructions;
`worker` is the role of a request that names none). The user's and a project's are Markdown
files with front matter, read from (within a scope a later root wins a name, as skills do):

    <plugin>/agents/*.md  ~/.agents/agents/*.md  ~/.foya/agents/*.md     scope user, ref user:<name>
    <project>/.agents/agents/*.md  <project>/.foya/agents/*.md           ref project:<id>:<name>

`<plugin>` is each enabled plugin's directory (`app.kernel.plugins`): the user's own files win a
name over a plugin's, and a plugin's `agents` directory that resolves outside it is ignored.

Every request reads the files again through a cache keyed by (mtime, size, inode), so a hand
edit shows at once. Where Foya fails the whole listing, here one unreadable file (or a second
file with a name already taken in the same directory) is left out and logged once per change;
a directory that is a link leaving the project is ignored.

A definition runs nothing by itself: instructions, a model and a tool list that only narrows the
child's tools; the child keeps its parent's approval mode. So a project's definitions are not
executable configuration and need no trust (`app.kernel.trust`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from app.kernel.agents.definition import (
    MAX_FILE_BYTES,
    SKILL_TOOLS,
    AgentDefinition,
    Definition,
    Scope,
    parse_definition,
    parse_duration,
)
from app.kernel.projects import Projects
from app.kernel.usercontext.markdown import Malformed
from app.logs import get_logger

__all__ = [
    "BUILTINS",
    "EXPLORER",
    "RESEARCHER",
    "WORKER",
    "AgentDefinition",
    "Definition",
    "Definitions",
    "parse_definition",
    "parse_duration",
]

ROOTS = (".agents", ".foya")
MAX_PER_ROOT = 256
RANK: dict[Scope, int] = {"project": 3, "user": 2, "builtin": 1}


def _builtin(name: str, description: str, tools: tuple[str, ...], body: str) -> Definition:
    return Definition(f"builtin:{name}", name, description, "builtin", body, tools=tools)


_NO_DELEGATION = "Do not modify files, ask the user questions, or delegate to another agent."
EXPLORER = _builtin(
    "explorer",
    "Inspect the codebase and return evidence-backed findings without changing files.",
    ("read", *SKILL_TOOLS),
    "Investigate the delegated codebase question. Read relevant files and return concise "
    "findings with concrete paths and symbols. Do not modify files, run commands, ask the user "
    "questions, or delegate to another agent.",
)
RESEARCHER = _builtin(
    "researcher",
    "Research external sources and return cited findings.",
    ("web_search", "web_fetch", *SKILL_TOOLS),
    "Research the delegated topic using authoritative external sources. Return concise findings "
    "with source URLs, uncertainties, and clear separation between sourced facts and inference. "
    + _NO_DELEGATION,
)
WORKER = _builtin(
    "worker",
    "Complete an implementation task, including code changes and verification.",
    ("read", "bash", "write", "edit", "delete", *SKILL_TOOLS),
    "Complete the delegated implementation task end to end. Inspect relevant code before "
    "editing, keep changes scoped, and run focused verification. Other agents may share the "
    "workspace, so do not revert changes you did not make. Do not ask the user questions or "
    "delegate to another agent.",
)
BUILTINS = (EXPLORER, RESEARCHER, WORKER)


_CacheKey = tuple[int, int, int]


class Definitions:
    """Finds the definitions a session or project may use."""

    def __init__(
        self,
        home: Path,
        projects: Projects,
        plugin_dirs: Callable[[], Sequence[Path]] = tuple,
    ) -> None:
        self.home = home
        self.projects = projects
        self.plugin_dirs = plugin_dirs  # the enabled plugins' directories
        self._cache: dict[str, tuple[_CacheKey, Definition | Malformed]] = {}
        self.log = get_logger("foya.agents")

    def all(self, project_id: str | None = None) -> list[Definition]:
        """Every scope's definitions (a project's too, if given and known), Foya's order:
        project, user, built-in, then by name. Blocking (reads files)."""
        found = list(BUILTINS)
        found += self._scope("user", self.home, None)
        if project_id and self.projects.exists(project_id):
            root = Path(str(self.projects.get(project_id)["path"]))
            found += self._scope("project", root, project_id)
        return sorted(found, key=_order)

    def effective(self, project_id: str | None = None) -> list[Definition]:
        """One definition per name (case-insensitive): a project's over the user's over a
        built-in one. Blocking."""
        best: dict[str, Definition] = {}
        for item in self.all(project_id):
            key = item.name.lower()
            if key not in best or RANK[item.scope] > RANK[best[key].scope]:
                best[key] = item
        return sorted(best.values(), key=_order)

    def find(self, ref_or_name: str, project_id: str | None = None) -> Definition | None:
        """The definition with this exact ref, else the highest-scoped one of this name
        (case-insensitive); None if there is none. Blocking."""
        named: Definition | None = None
        for item in self.all(project_id):
            if item.ref == ref_or_name:
                return item
            if item.name.lower() == ref_or_name.lower() and (
                named is None or RANK[item.scope] > RANK[named.scope]
            ):
                named = item
        return named

    def _scope(self, scope: Scope, base: Path, project_id: str | None) -> list[Definition]:
        """The scope's roots in order, a later root's file winning a name."""
        by_name: dict[str, Definition] = {}
        places = [(base / root / "agents", base) for root in ROOTS]
        if scope == "user":
            places = [*((d / "agents", d) for d in self.plugin_dirs()), *places]
        for place, confine in places:
            if (project_id is not None or confine != base) and not _inside(place, confine):
                continue
            for item in self._root(place, scope, project_id):
                by_name[item.name.lower()] = item
        return list(by_name.values())

    def _root(self, root: Path, scope: Scope, project_id: str | None) -> list[Definition]:
        try:
            with os.scandir(root) as entries:
                names = sorted(
                    e.name
                    for e in entries
                    if e.name.lower().endswith(".md") and e.is_file(follow_symlinks=False)
                )
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            self.log.warning("agent directory cannot be read", path=str(root), error=exc.strerror)
            return []
        found: dict[str, Definition] = {}
        for name in names[:MAX_PER_ROOT]:
            item = self._read(str(root / name), scope, project_id)
            if item is None:
                continue
            if item.name.lower() in found:
                first = found[item.name.lower()].path
                self.log.warning("agent name taken: file left out", path=item.path, by=first)
                continue
            found[item.name.lower()] = item
        return list(found.values())

    def _read(self, path: str, scope: Scope, project_id: str | None) -> Definition | None:
        """The file's definition, parsed again only when the file changed; a file that is
        not one is logged (once per change) and left out."""
        try:
            st = os.stat(path)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            place = f"{scope}:{project_id or ''}:{path}"  # a ref names its scope and project
            hit = self._cache.get(place)
            if hit is not None and hit[0] == key:
                parsed = hit[1]
            else:
                with open(path, "rb") as f:
                    data = f.read(MAX_FILE_BYTES + 1)
                try:
                    parsed = parse_definition(data, scope, project_id, path)
                except Malformed as exc:
                    parsed = exc
                    self.log.warning("agent definition left out", path=path, error=str(exc))
                self._cache[place] = (key, parsed)
        except OSError:
            return None
        return None if isinstance(parsed, Malformed) else parsed


def _order(item: Definition) -> tuple[int, str]:
    return (-RANK[item.scope], item.name.lower())


def _inside(place: Path, base: Path) -> bool:
    """Whether `place` (which may not exist) resolves inside `base`."""
    real = os.path.realpath(place)
    return real == os.path.realpath(base) or real.startswith(os.path.realpath(base) + os.sep)
