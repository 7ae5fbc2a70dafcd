"""What the capabilities plug into the turn core, handed to `Turns` in one piece when it is built:
the complete tool table, the limits on a session's tools, what a session's state adds to its
system prompt, the user's hooks, and whom a turn tells when it ends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.kernel.turns.ports import Answered, HookPort, Instructions, PromptPort
from app.kernel.turns.tooling import ToolPolicy
from app.kernel.turns.tooltable import ToolTable


def _nothing() -> None:
    return None


def _no_stop(session: str) -> None:
    return None


async def _unanswered(session: str, run_id: str, answer: str) -> None:
    return None


@dataclass(frozen=True)
class TurnPlugs:
    """`turn_completed` is called after each completed turn (memory maintenance's wake),
    `user_stopped` on each user stop of a session (its sub-agents stop too), `turn_answered`
    when a turn's model is done, before its `turn_complete` (plan mode)."""

    tools: ToolTable
    hooks: HookPort
    prompt: PromptPort | None = None
    policies: Sequence[ToolPolicy] = ()
    instructions: Sequence[Instructions] = ()
    turn_completed: Callable[[], None] = _nothing
    user_stopped: Callable[[str], None] = _no_stop
    turn_answered: Answered = _unanswered
