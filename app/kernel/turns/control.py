"""`TurnControl`: how a capability starts and stops turns (sub-agents run their children's turns,
plan mode submits the approved plan and stops a planning turn).

Those capabilities are built before the turn core, because the tools and limits they plug into
the turn must be in its table when it is built; they hold this port, which the composition root
answers with the turn core once it exists (`app.kernel.wiring`)."""

from __future__ import annotations

from typing import Protocol

from app.kernel.turns.inputs import TurnAccepted, TurnInput


class TurnControl(Protocol):
    """Starting and stopping a session's turns (`app.kernel.turns.runner.Turns` fits it)."""

    async def submit(
        self, session: str, turn: TurnInput, command: str | None = None
    ) -> TurnAccepted:
        """Start a turn, or queue the input if the session is busy."""
        ...

    async def cancel(self, session: str, reason: str = "user_stop") -> None:
        """Stop the session's running turn (if any)."""
        ...

    async def workspace_files(self, session: str, paths: list[str]) -> list[str]:
        """`paths` as canonical files of the session's workspace."""
        ...
