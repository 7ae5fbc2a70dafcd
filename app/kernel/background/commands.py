"""The registry of kept commands: the bash tools' `CommandHost` and the routes' service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from app.errors import FoyaError, NotFound
from app.events import BACKGROUND_COMMAND_UPDATED, BackgroundCommand, EventDraft
from app.kernel.background.entry import Entry, snapshot
from app.kernel.sessions import Sessions
from app.kernel.turns.activity import ToolNotRunning
from app.logs import get_logger
from app.store.events import SessionNotFound
from app.tools.base import ToolContext, ToolError
from app.tools.shell import ShellCommand

FINISHED_KEPT = 100  # ended commands of a session still readable by id
STOP_GRACE = 5.0  # seconds to wait for killed commands to be reaped (a bound, never expected)


class SessionUnknown(NotFound):
    """The session of a background-command route does not exist."""

    code = "session_not_found"


class CommandNotFound(NotFound):
    """No background command of that id in the session."""

    code = "background_command_not_found"


class BackgroundCommands:
    """Every session's kept commands, by id; the running foreground ones also by tool call."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.commands: dict[str, Entry] = {}
        self.active: dict[tuple[str, str], Entry] = {}  # (session, tool call id)
        self.closed = False
        self.log = get_logger("foya.background")

    # -- the bash tools' side (app.tools.bash.CommandHost) --------------------------------------

    async def start(self, ctx: ToolContext, shell: ShellCommand) -> BackgroundCommand:
        """Keep `shell` as a background command the agent started; recorded before returning."""
        return await self._to_background(self._keep(ctx.session, shell), "agent")

    async def run(self, ctx: ToolContext, shell: ShellCommand) -> BackgroundCommand | None:
        """Wait for foreground `shell`: None once it ended, its snapshot once moved to the
        background. A cancelled wait leaves the killing to the tool."""
        entry = self._keep(ctx.session, shell)
        moved: asyncio.Future[BackgroundCommand] = asyncio.get_running_loop().create_future()
        entry.moved = moved
        key = (ctx.session, ctx.call_id)
        self.active[key] = entry
        try:
            either: set[asyncio.Future[Any]] = {shell.finished, moved}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self.active.get(key) is entry:
                del self.active[key]
            if not shell.detached and not entry.revealed:
                self._forget(entry)
        if moved.done():
            return moved.result()
        if entry.revealed:
            self._trim(entry.session)
            await self._record(entry, snapshot(entry))
        return None

    def find(self, session: str, command_id: str) -> BackgroundCommand | None:
        entry = self.commands.get(command_id)
        return snapshot(entry) if entry is not None and entry.session == session else None

    async def stop(self, session: str, command_id: str, by: str) -> BackgroundCommand | None:
        """Kill the command's process group (if it still runs) and wait until it is reaped and
        its end recorded."""
        entry = self.commands.get(command_id)
        if entry is None or entry.session != session:
            return None
        if entry.shell.running:
            entry.stopped_by = by
            entry.shell.kill()
        await _settle([entry])
        return snapshot(entry)

    # -- the routes' side -----------------------------------------------------------------------

    async def promote(self, session: str, call_id: str) -> BackgroundCommand:
        """`POST …/tools/{id}/background`: the running foreground command of that call goes on
        in the background; its tool call answers the model at once."""
        await self._session(session)
        entry = self.active.get((session, call_id))
        if entry is None or not entry.shell.running or entry.moved is None:
            raise ToolNotRunning(f"tool call {call_id} is not running a command")
        del self.active[(session, call_id)]
        return await self._to_background(entry, "user")

    async def reveal(self, session: str, call_id: str) -> BackgroundCommand:
        """`POST …/tools/{id}/reveal`: keep the call's running command readable by id after it
        ends, without moving it to the background."""
        await self._session(session)
        entry = self.active.get((session, call_id))
        if entry is None or not entry.shell.running:
            raise ToolNotRunning(f"tool call {call_id} is not running a command")
        entry.revealed = True
        return snapshot(entry)

    async def in_background(self, session: str) -> list[BackgroundCommand]:
        """The session's running background commands, newest first."""
        await self._session(session)
        found = [
            e
            for e in self.commands.values()
            if e.session == session and e.backgrounded_by and e.shell.running
        ]
        found.sort(key=lambda e: e.shell.started_ns, reverse=True)
        return [snapshot(e) for e in found]

    async def get(self, session: str, command_id: str) -> BackgroundCommand:
        await self._session(session)
        shown = self.find(session, command_id)
        if shown is None:
            raise CommandNotFound(f"background command {command_id} not found")
        return shown

    async def cancel(self, session: str, command_id: str) -> BackgroundCommand:
        """`POST …/background-commands/{id}/cancel`: the user stops a command (one that already
        ended is answered as it is)."""
        await self._session(session)
        shown = await self.stop(session, command_id, "user")
        if shown is None:
            raise CommandNotFound(f"background command {command_id} not found")
        return shown

    # -- ending ---------------------------------------------------------------------------------

    async def end_session(self, session: str) -> None:
        """Kill the session's commands and what ended ones left behind (no further events:
        the session is going away)."""
        ending = [e for e in self.commands.values() if e.session == session]
        for entry in ending:
            self._forget(entry)
            entry.shell.kill()
        for key in [k for k in self.active if k[0] == session]:
            del self.active[key]
        await _settle(ending)

    async def stop_all(self) -> None:
        """Shutdown: start nothing more, kill every command (and what ended ones left behind)
        and record the running background ones cancelled."""
        self.closed = True
        ending = list(self.commands.values())
        for entry in ending:
            if entry.shell.running:
                entry.stopped_by = "shutdown"
            entry.shell.kill()  # also what an ended command left behind
        await _settle(ending)

    # -- inside ---------------------------------------------------------------------------------

    def _keep(self, session: str, shell: ShellCommand) -> Entry:
        if self.closed:
            raise ToolError("the kernel is shutting down")
        entry = Entry(session, shell)
        self.commands[entry.id] = entry
        return entry

    def _forget(self, entry: Entry) -> None:
        entry.forgotten = True
        self.commands.pop(entry.id, None)

    async def _to_background(self, entry: Entry, by: str) -> BackgroundCommand:
        """Detach the command from its tool call and follow it; returns once its state is
        recorded (a cancelled caller does not stop the recording)."""
        entry.shell.detach()
        entry.backgrounded_by = by
        shown = snapshot(entry)
        if entry.moved is not None:
            entry.moved.set_result(shown)
        recorded = asyncio.Event()
        entry.follower = asyncio.create_task(self._follow(entry, shown, recorded))
        await recorded.wait()
        return shown

    async def _follow(
        self, entry: Entry, shown: BackgroundCommand, recorded: asyncio.Event
    ) -> None:
        """Record the command in the background now, and its end once it ends."""
        try:
            await self._record(entry, shown)
        finally:
            recorded.set()
        await asyncio.wait({entry.shell.finished})
        self._trim(entry.session)
        await self._record(entry, snapshot(entry))

    async def _record(self, entry: Entry, shown: BackgroundCommand) -> None:
        if entry.forgotten:
            return
        draft = EventDraft(entry.session, BACKGROUND_COMMAND_UPDATED, shown)
        try:
            await self.sessions.facts.emit(draft)
        except FoyaError as exc:  # the session is being deleted; the disk is full
            self.log.warning(
                "could not record a background command", command=entry.id, error=str(exc)
            )

    def _trim(self, session: str) -> None:
        """Forget the session's oldest ended commands beyond `FINISHED_KEPT`."""
        ended = [e for e in self.commands.values() if e.session == session and not e.shell.running]
        ended.sort(key=lambda e: e.shell.ended_ns or 0)
        for entry in ended[: max(0, len(ended) - FINISHED_KEPT)]:
            self._forget(entry)

    async def _session(self, session: str) -> None:
        try:
            await self.sessions.row(session)
        except SessionNotFound:
            raise SessionUnknown(f"session {session} not found") from None


async def _settle(entries: Iterable[Entry]) -> None:
    """Wait (bounded) until these commands are reaped and their ends recorded."""
    tasks = {t for e in entries for t in (e.shell.finished, e.follower) if t is not None}
    if tasks:
        await asyncio.wait(tasks, timeout=STOP_GRACE)
