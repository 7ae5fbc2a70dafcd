"""Input on its way into a turn or the queue: checked by the input rules, its workspace files
made canonical and its attachments committed.

A session without a usable connection is bound to the default model first
(`app.kernel.binding`), but only once the input is accepted: input that is refused binds
nothing.
"""

from __future__ import annotations

import asyncio

from app.files import ProtectedPaths
from app.kernel.binding import rebinding
from app.kernel.sessionrow import SessionRow, session_row
from app.kernel.sessions import Sessions
from app.kernel.turns import inputs
from app.kernel.turns.inputs import Accepted, TurnInput


class Intake:
    """Accepts a session's input; `protected` is what its `workspace_files` may never name."""

    def __init__(self, sessions: Sessions, protected: ProtectedPaths) -> None:
        self.sessions = sessions
        self.protected = protected

    async def accept(self, session: str, turn: TurnInput) -> Accepted:
        """`turn` as the input rules accept it, the session bound to a model if it had none."""
        return (await self.admit(session, turn))[0]

    async def admit(self, session: str, turn: TurnInput) -> tuple[Accepted, SessionRow]:
        """`accept`, and the session's row as it is now (bound, if it was)."""
        row = await self.sessions.row(session)
        bind = rebinding(self.sessions.connections, row)
        candidate = session_row({**row, **(bind or {})})
        workspace = (self.sessions.workspace(row), self.protected)
        accepted = await inputs.accept(
            self.sessions.artifacts, self.sessions.connections, candidate, turn, workspace
        )
        if bind:
            await self.sessions.save(session, bind)
        return accepted, candidate

    async def workspace_files(self, session: str, paths: list[str]) -> list[str]:
        """`paths` as canonical files of the session's workspace (`inputs.workspace_files`)."""
        root = self.sessions.workspace(await self.sessions.row(session))
        return await asyncio.to_thread(inputs.workspace_files, root, paths, self.protected)
