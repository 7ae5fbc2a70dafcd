"""One agent definition (Foya's `agentdef` file format): the role a child session is started
as, and how its Markdown file is read.

Front matter (the YAML subset the skills' reader understands): `name` (1-64 of `A-Za-z0-9_-`,
starting with a letter or digit), `description` (required), `model`, `tools` (a list, or one
string split on commas and spaces as Claude Code writes it), `max_turns` (≥ 0), `timeout` (a Go
duration such as `90s` or `1h30m`); the body is the agent's instructions (required). Tools that
drive agents (`agent`, `spawn_agent`, …) are dropped, so a child can never start children. A
zero or negative `timeout` is refused (Foya's child would time out at once).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from app.kernel.usercontext.markdown import Malformed
from app.kernel.usercontext.skillfile import yaml_front_matter

Scope = Literal["builtin", "user", "project"]
MAX_FILE_BYTES = 256 * 1024
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
