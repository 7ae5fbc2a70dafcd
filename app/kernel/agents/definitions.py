"""Agent definitions (Foya's `agentdef`): the roles a child session can be started as.

Built in: `explorer`, `researcher` and `worker` (Foya's three, with their tools and instructions;
`worker` is the role of a request that names none). The user's and a project's are Markdown
files with front matter, read from (within a scope a later root wins a name, as skills do):

    <plugin>/agents/*.md  ~/.agents/agents/*.md  ~/.foya/agents/*.md     scope user, ref user:<name>
    <project>/.agents/agents/*.md  <project>/.foya/agents/*.md           ref project:<id>:<name>

`<plugin>` is each enabled plugin's directory (`app.kernel.plugins`): the user's own files win a
name over a plugin's, and a plugin's `agents` directory that resolves outside it is ignored.

Front matter (the YAML subset the skills' reader understands): `name` (1-64 of `A-Za-z0-9_-`,
starting with a letter or digit), `description` (required), `model`, `tools` (a list, or one
string split on commas and spaces as Claude Code writes it), `max_turns` (≥ 0), `timeout` (a Go
duration such as `90s` or `1h30m`); the body is the agent's instructions (required). Tools that
drive agents (`agent`, `spawn_agent`, …) are dropped, so a child can never start children.

Every request reads the files again through a cache keyed by (mtime, size, inode), so a hand
edit shows at once. Where Foya fails the whole listing, here one unreadable file (or a second
file with a name already taken in the same directory) is left out and logged once per change;
a directory that is a link leaving the project is ignored; a zero or negative `timeout` is
refused (Foya's child would time out at once).

A definition runs nothing by itself: instructions, a model and a tool list that only narrows the
child's tools; the child keeps its parent's approval mode. So a project's definitions are not
executable configuration and need no trust (`app.kernel.trust`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from app.kernel.projects import Projects
from app.kernel.usercontext.markdown import Malformed
from app.kernel.usercontext.skillfile import yaml_front_matter
from app.logs import get_logger

Scope = Literal["builtin", "user", "project"]
ROOTS = (".agents", ".foya")
MAX_FILE_BYTES = 256 * 1024
MAX_PER_ROOT = 256
RANK: dict[Scope, int] = {"project": 3, "user": 2, "builtin": 1}
CONTROL_TOOLS = frozenset(
    {
        "agent",
        "agent_search",
        "spawn_agent",
        "wait_agents",
        "read_agent_output",
        "cancel_agent",
        "list_agents",
    }
)
SKILL_TOOLS = ("skill_search", "skill_load", "skill_read_resource")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


class AgentDefinition(TypedDict):
    """A definition as `GET /agents` shows it (Foya's fields; empty ones left out)."""

    ref: str
    name: str
    description: str
    scope: Scope
    path: NotRequired[str]
    model: NotRequired[str]
    tools: NotRequired[list[str]]
    max_turns: NotRequired[int]
    timeout: NotRequired[str]
    digest: str


@dataclass(frozen=True)
class Definition:
    """One role, with the instructions (`body`) the child session gets."""

    ref: str
    name: str
    description: str
    scope: Scope
    body: str
    path: str = ""
    model: str = ""
    tools: tuple[str, ...] = ()
    max_turns: int = 0
    timeout: str = ""

    @property
    def digest(self) -> str:
        """Foya's digest: what the child is told and may use, not where the file is."""
        parts = (self.name, self.description, self.model, "\0".join(self.tools), self.body)
        return hashlib.sha256("\x01".join(parts).encode()).hexdigest()

    @property
    def timeout_seconds(self) -> float | None:
        return parse_duration(self.timeout) if self.timeout else None

    def wire(self) -> AgentDefinition:
        out: AgentDefinition = {
            "ref": self.ref,
            "name": self.name,
            "description": self.description,
            "scope": self.scope,
            "digest": self.digest,
        }
        if self.path:
            out["path"] = self.path
        if self.model:
            out["model"] = self.model
        if self.tools:
            out["tools"] = list(self.tools)
        if self.max_turns:
            out["max_turns"] = self.max_turns
        if self.timeout:
            out["timeout"] = self.timeout
        return out


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


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (`300ms`, `1.5h`, `1h30m`, `-2s`, `0`); `Malformed` if not one."""
    rest, sign = text, 1.0
    if rest[:1] in ("+", "-"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    total, at = 0.0, 0
    while rest and at < len(rest):
        part = _DURATION_PART.match(rest, at)
        if part is None:
            break
        total += float(part.group(1)) * _UNITS[part.group(2)]
        at = part.end()
    if not rest or at < len(rest):
        raise Malformed(f'invalid timeout: time: invalid duration "{text}"')
    return sign * total


def parse_definition(data: bytes, scope: Scope, project_id: str | None, path: str) -> Definition:
    """A definition file's bytes. Raises `Malformed` saying why it is not one."""
    if len(data) > MAX_FILE_BYTES:
        raise Malformed(f"agent definition exceeds {MAX_FILE_BYTES} bytes")
    lines = data.decode("utf-8", errors="replace").removeprefix("\ufeff").split("\n")
    if len(lines) < 3 or lines[0].strip() != "---":
        raise Malformed("missing YAML frontmatter")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        raise Malformed("unterminated YAML frontmatter")
    warnings: list[tuple[str, str, str]] = []
    fields = yaml_front_matter("\n".join(line.rstrip("\r") for line in lines[1:end]), warnings)
    for _, message, field in warnings:
        if field in ("name", "description", "model", "tools", "max_turns", "timeout"):
            raise Malformed(f"decode frontmatter: {message}")
    name, description = _text(fields, "name"), _text(fields, "description").strip()
    body = "\n".join(lines[end + 1 :]).strip()
    if not _NAME.fullmatch(name):
        raise Malformed(f"invalid agent name {name!r}")
    if not description:
        raise Malformed("agent description is required")
    if not body:
        raise Malformed("agent instructions are required")
    timeout = _text(fields, "timeout").strip()
    if timeout and parse_duration(timeout) <= 0:
        raise Malformed("timeout must be positive")
    ref = f"project:{project_id}:{name}" if scope == "project" else f"{scope}:{name}"
    return Definition(
        ref,
        name,
        description,
        scope,
        body,
        path=path,
        model=_text(fields, "model").strip(),
        tools=_tools(fields.get("tools")),
        max_turns=_max_turns(fields.get("max_turns")),
        timeout=timeout,
    )


def _text(fields: dict[str, object], key: str) -> str:
    value = fields.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"decode frontmatter: {key} must be text")
    return value


def _tools(value: object) -> tuple[str, ...]:
    """Trimmed, without agent control tools or repeats, sorted (Foya's normalization)."""
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Malformed("decode frontmatter: tools must be a list of text")
    names = {v.strip() for v in value} - CONTROL_TOOLS - {""}
    return tuple(sorted(names))


def _max_turns(value: object) -> int:
    if value is None or value == "":
        return 0
    if not isinstance(value, str) or not re.fullmatch(r"[-+]?\d{1,9}", value):
        raise Malformed("decode frontmatter: max_turns must be an integer")
    if int(value) < 0:
        raise Malformed("max_turns must not be negative")
    return int(value)


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
