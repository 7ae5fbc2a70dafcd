"""The terminals of every session: start, attach, input, resize, stop, and their event
streams.

A terminal lives in memory only: after a restart every ref is unknown (404
`terminal_not_found`), as Foya's are. Its shell runs in the session's working directory (the
project's, or the session's managed workspace) and ends with the terminal: on DELETE, when its
session is deleted, and at shutdown.

Beyond Foya: at most `max_terminals_per_session` terminals per session and `max_terminals` in
all (settings; exited ones count until deleted), input at most `MAX_INPUT` bytes a request,
DELETE forgets the terminal (Foya keeps it, exited), and an `after` beyond the terminal's last
seq is refused. Errors: app.kernel.terminals.errors.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.errors import BadRequest
from app.kernel.ids import new_id
from app.kernel.sessions import SessionNotFound, Sessions
from app.kernel.terminals.errors import (
    MAX_INPUT,
    InputTooLarge,
    TerminalNotFound,
    TooManyTerminals,
)
from app.kernel.terminals.process import ShellProcess, end_shells
from app.kernel.terminals.terminal import Terminal, TerminalSnapshot, TerminalStream
from app.metrics import Metrics


class Terminals:
    """Every terminal of the kernel, by ref."""

    def __init__(
        self, sessions: Sessions, metrics: Metrics, *, per_session: int, total: int
    ) -> None:
        self.sessions = sessions
        self.metrics = metrics
        self.per_session = per_session
        self.total = total
        self._terminals: dict[str, Terminal] = {}
        self._starting: list[str] = []  # sessions of terminals being started

    async def start(self, session: str, cols: int, rows: int) -> TerminalSnapshot:
        """`POST /sessions/{id}/terminals`: the user's shell on a new PTY (0 x 0: 80 x 24)."""
        cwd = await self._workspace(session)
        # Terminals being started count too: concurrent starts cannot pass a limit together.
        mine = sum(t.session_id == session for t in self._terminals.values())
        mine += self._starting.count(session)
        if mine >= self.per_session:
            raise TooManyTerminals(
                f"this session already has {mine} terminals (at most {self.per_session}); "
                "delete one first"
            )
        if (count := len(self._terminals) + len(self._starting)) >= self.total:
            raise TooManyTerminals(
                f"the kernel already has {count} terminals (at most {self.total}); delete one first"
            )
        if cwd.parent == self.sessions.workspaces:  # managed: made again if removed by hand
            cwd.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._starting.append(session)
        try:
            shell = await asyncio.to_thread(ShellProcess.spawn, cwd, cols, rows)
        finally:
            self._starting.remove(session)
        terminal = Terminal(session, new_id(), shell, self.metrics)
        self._terminals[terminal.ref] = terminal
        try:  # deleted meanwhile? `Kernel.delete_session` ends its terminals once more afterwards
            await self.sessions.row(session)
        except SessionNotFound:
            await self._remove(terminal)
            raise TerminalNotFound(f"session {session} not found") from None
        return terminal.snapshot()

    async def list(self, session: str) -> list[TerminalSnapshot]:
        """`GET /sessions/{id}/terminals` (ours): the session's terminals, oldest first, each
        without its `buffer` (that is `snapshot`'s), so any device can attach to one."""
        await self._workspace(session)  # `TerminalNotFound` for no such session
        return [
            t.snapshot(output=False) for t in self._terminals.values() if t.session_id == session
        ]

    def snapshot(self, session: str, ref: str) -> TerminalSnapshot:
        """`GET …/terminals/{ref}`: state, the last MiB of output and the last seq."""
        return self._get(session, ref).snapshot()

    async def write(self, session: str, ref: str, text: str) -> None:
        """`POST …/{ref}/input`: keystrokes or a paste, as UTF-8."""
        terminal = self._get(session, ref)
        data = text.encode()  # the request guard refuses lone surrogates (400)
        if len(data) > MAX_INPUT:
            raise InputTooLarge(f"input: at most {MAX_INPUT} bytes per request")
        await terminal.write(data)

    def resize(self, session: str, ref: str, cols: int, rows: int) -> None:
        """`POST …/{ref}/resize`."""
        self._get(session, ref).resize(cols, rows)

    async def stop(self, session: str, ref: str) -> None:
        """`DELETE …/{ref}`: end the shell's session and forget the terminal."""
        await self._remove(self._get(session, ref))

    def stream(self, session: str, ref: str, after: int) -> TerminalStream:
        """`GET …/{ref}/events`: a cursor after `after` (`TerminalStream.attached` attaches it)."""
        terminal = self._get(session, ref)
        if after > terminal.replay.seq:
            raise BadRequest(f"after: terminal {ref} has only reached seq {terminal.replay.seq}")
        return TerminalStream(terminal, after)

    async def end_session(self, session: str) -> None:
        """End and forget the session's terminals (it is being deleted)."""
        await self._remove(*(t for t in self._terminals.values() if t.session_id == session))

    async def stop_all(self) -> None:
        """End and forget every terminal (shutdown)."""
        await self._remove(*self._terminals.values())

    async def _remove(self, *terminals: Terminal) -> None:
        for terminal in terminals:
            self._terminals.pop(terminal.ref, None)
        await end_shells([t.shell for t in terminals])
        await asyncio.gather(*(t.finish() for t in terminals))

    async def _workspace(self, session: str) -> Path:
        """The directory the session's tools run in; `TerminalNotFound` for no such session."""
        try:
            return self.sessions.workspace(await self.sessions.row(session))
        except SessionNotFound:
            raise TerminalNotFound(f"session {session} not found") from None

    def _get(self, session: str, ref: str) -> Terminal:
        terminal = self._terminals.get(ref)
        if terminal is None or terminal.session_id != session:
            raise TerminalNotFound(f"terminal {ref} not found in session {session}")
        return terminal
