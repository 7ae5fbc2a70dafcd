"""One kept command, and its snapshot (the wire shape of `app.events.BackgroundCommand`)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field

from app.events import BackgroundCommand, iso_time
from app.tools.shell import ShellCommand


def new_command_id() -> str:
    """`cmd-` and 16 hex digits, the shape of Foya's command ids."""
    return "cmd-" + secrets.token_hex(8)


@dataclass(eq=False)
class Entry:
    """A command of a session, from its start (foreground or background) until forgotten."""

    session: str
    shell: ShellCommand
    id: str = field(default_factory=new_command_id)
    backgrounded_by: str = ""  # agent | user: the command runs in the background
    stopped_by: str = ""  # agent | user | shutdown: cancelled
    revealed: bool = False  # a foreground command kept after it ends
    #: Its session or the kernel is ending it: nothing more is recorded.
    forgotten: bool = False
    #: A running foreground command: resolved with its snapshot when moved to the background.
    moved: asyncio.Future[BackgroundCommand] | None = None
    #: A background command's task recording its states.
    follower: asyncio.Task[None] | None = None


def snapshot(entry: Entry) -> BackgroundCommand:
    """The command as clients see it: Foya's fields (empty ones left out), then ours."""
    shell = entry.shell
    code = shell.exit_code
    shown: BackgroundCommand = {
        "command_id": entry.id,
        "session_id": entry.session,
        "command": shell.command,
        "pid": shell.pid,
        "running": code is None,
        "status": "running",
        "started_at": iso_time(shell.started_ns),
    }
    if stdout := shell.stdout.tail():
        shown["stdout"] = stdout
    if stderr := shell.stderr.tail():
        shown["stderr"] = stderr
    if entry.backgrounded_by:
        shown["backgrounded_by"] = entry.backgrounded_by
    if entry.stopped_by:
        shown["stopped_by"] = entry.stopped_by
    if code is not None:
        shown["exit_code"] = code
        shown["status"] = (
            "cancelled" if entry.stopped_by else "completed" if code == 0 else "failed"
        )
        if shell.ended_ns is not None:
            shown["completed_at"] = iso_time(shell.ended_ns)
    return shown
