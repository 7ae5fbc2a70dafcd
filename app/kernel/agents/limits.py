"""Sub-agent limits (`GET|PUT /settings/agent-limits`), kept in `<data-dir>/agent-limits.json`.

`max_global_concurrency` (1-256) child runs at once in the whole kernel, `max_per_root` (1-256)
at once under one root run (the parent's turn, or a client's `root_run_id`), and
`max_tree_tokens` (≥ 0, 0 for no limit) tokens that the children of one root run may spend.
Until a PUT stores them, the defaults are `FOYA_AGENT_MAX_GLOBAL_CONCURRENCY`,
`FOYA_AGENT_MAX_PER_ROOT` (4 each) and `FOYA_AGENT_MAX_TREE_TOKENS` (0). The file is Foya's,
written atomically (0600); one that cannot be read is logged and the defaults apply. Besides
these, a root run never has more than `MAX_CHILDREN_PER_ROOT` (64) children: that cap is not
a setting.
"""

from __future__ import annotations

import json
from pathlib import Path

from typing_extensions import TypedDict

from app.errors import BadRequest
from app.files import write_json_atomic
from app.logs import get_logger
from app.settings import Settings

FILE = "agent-limits.json"
MAX_CONCURRENCY = 256
MAX_CHILDREN_PER_ROOT = 64


class AgentLimits(TypedDict):
    max_global_concurrency: int
    max_per_root: int
    max_tree_tokens: int


class InvalidAgentLimits(BadRequest):
    """A `PUT /agent-limits` whose limits break a rule (the message names the field, in Foya's
    words)."""

    code = "agent_limits_update_failed"


def check(limits: AgentLimits) -> AgentLimits:
    """`limits` if valid; else `InvalidAgentLimits` naming the first bad field (Foya's words)."""
    for name in ("max_global_concurrency", "max_per_root"):
        value = limits[name]
        if not 1 <= value <= MAX_CONCURRENCY:
            raise InvalidAgentLimits(
                f"invalid agent limits: {name} must be between 1 and {MAX_CONCURRENCY}"
            )
    if limits["max_tree_tokens"] < 0:
        raise InvalidAgentLimits("invalid agent limits: max_tree_tokens must be zero or greater")
    return limits


def defaults(settings: Settings) -> AgentLimits:
    return {
        "max_global_concurrency": settings.agent_max_global_concurrency,
        "max_per_root": settings.agent_max_per_root,
        "max_tree_tokens": settings.agent_max_tree_tokens,
    }


def load(data_dir: Path, fallback: AgentLimits) -> AgentLimits:
    """The stored limits, else `fallback`. Blocking."""
    path = data_dir / FILE
    try:
        raw = json.loads(path.read_bytes())
        if not isinstance(raw, dict) or set(raw) != set(AgentLimits.__annotations__):
            raise ValueError("not an object of the three limits")
        if not all(type(v) is int for v in raw.values()):
            raise ValueError("a limit is not an integer")
        return check(
            {
                "max_global_concurrency": raw["max_global_concurrency"],
                "max_per_root": raw["max_per_root"],
                "max_tree_tokens": raw["max_tree_tokens"],
            }
        )
    except FileNotFoundError:
        return fallback
    except (OSError, ValueError, InvalidAgentLimits) as exc:
        get_logger("foya.agents").warning(
            "agent-limits.json cannot be used: the defaults apply", path=str(path), error=str(exc)
        )
        return fallback


def save(data_dir: Path, limits: AgentLimits) -> None:
    """Store `limits` atomically (0600). Blocking."""
    write_json_atomic(data_dir / FILE, dict(limits))
