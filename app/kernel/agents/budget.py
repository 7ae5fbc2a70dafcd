"""The token budget of agent trees: every model request of a child is charged to its root run.

A tree is the children of one root run (the parent's turn that spawned them, or a client's
`root_run_id`). `max_tree_tokens` > 0 caps what the tree may spend: once its children have used
that many tokens (`total_tokens` of their `usage_updated`), the budget is exceeded, its running
and queued runs are cancelled and it takes no new ones. A parent's own tokens are not charged.
Totals are kept in the runs' records (`tokens_used`: the tree's total), so they survive a
restart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NotRequired

from typing_extensions import TypedDict

from app.kernel.agents.runs import AgentRun


class Budget(TypedDict):
    """`GET …/agent-budget` and the `agent_budget_*` payloads (Foya's fields)."""

    root_session_id: str
    root_run_id: str
    tokens_used: int
    max_tokens: NotRequired[int]
    exceeded: bool


class TreeTokens:
    """Tokens used per root run."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    def restore(self, runs: Iterable[AgentRun]) -> None:
        """Totals from stored records (each holds the tree's total as of its last write)."""
        for run in runs:
            self._used[run.root_run_id] = max(self._used.get(run.root_run_id, 0), run.tokens_used)

    def used(self, root_run_id: str) -> int:
        return self._used.get(root_run_id, 0)

    def charge(self, root_run_id: str, tokens: int) -> int:
        """Add `tokens` to the tree; its new total."""
        self._used[root_run_id] = self.used(root_run_id) + tokens
        return self._used[root_run_id]

    def forget(self, root_run_ids: Iterable[str]) -> None:
        for root in root_run_ids:
            self._used.pop(root, None)


def budget(root_session_id: str, root_run_id: str, used: int, max_tokens: int) -> Budget:
    out: Budget = {
        "root_session_id": root_session_id,
        "root_run_id": root_run_id,
        "tokens_used": used,
        "exceeded": exceeded(used, max_tokens),
    }
    if max_tokens:
        out["max_tokens"] = max_tokens
    return out


def exceeded(used: int, max_tokens: int) -> bool:
    return max_tokens > 0 and used >= max_tokens
