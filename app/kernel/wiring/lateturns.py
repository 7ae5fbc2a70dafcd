"""`LateTurns`: the turn core as the capabilities built before it reach it.

Sub-agents, plan mode, automations and commands start and stop turns, but are built before the
turn core, which is built on first use with the tools they plug into it. They hold this
`TurnControl`; each call goes to the root's turn core, building it if nothing had yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from app.kernel.turns.inputs import TurnAccepted, TurnInput

if TYPE_CHECKING:
    from app.kernel.turns.runner import Turns


class HasTurns(Protocol):
    """The composition root, as far as `LateTurns` needs it."""

    @property
    def turns(self) -> Turns: ...


class LateTurns:
    """The `TurnControl` of the capabilities built before the turn core: each call goes to the
    root's turn core, which exists by the time anything calls."""

    def __init__(self, root: HasTurns) -> None:
        self.root = root

    async def submit(
        self, session: str, turn: TurnInput, command: str | None = None
    ) -> TurnAccepted:
        return await self.root.turns.submit(session, turn, command)

    async def cancel(self, session: str, reason: str = "user_stop") -> None:
        await self.root.turns.cancel(session, reason)

    async def workspace_files(self, session: str, paths: list[str]) -> list[str]:
        return await self.root.turns.workspace_files(session, paths)
