"""Request bodies of the sub-agent routes, as Foya's handlers decode
them: unknown fields are ignored by start and wait and refused by the limits. Values the
kernel checks with its own code (an empty task: 400 `agent_run_failed`; limits out of range:
400 `agent_limits_update_failed`) reach it; wrong JSON types are 400 `bad_request`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.http.models.common import Lenient, NonNegative, SqlInt, Strict


class AgentContext(Lenient):
    """Which of the parent's messages the child gets (app.kernel.agents.package)."""

    mode: Literal["", "none", "selected", "summary", "last_n_turns"] | None = None
    message_seqs: list[NonNegative] | None = None
    last_turns: NonNegative | None = None


class StartAgent(Lenient):
    task: str = ""
    agent_ref: str | None = None
    root_run_id: str | None = None
    parent_tool_call_id: str | None = None
    context: AgentContext | None = None


class WaitAgents(Lenient):
    ids: list[str] = Field(default_factory=list, max_length=256)
    mode: Literal["", "all", "any"] | None = None


class AgentLimitsBody(Strict):
    """All three fields, as Foya stores them; a missing one counts as 0."""

    max_global_concurrency: SqlInt = 0
    max_per_root: SqlInt = 0
    max_tree_tokens: SqlInt = 0
