"""`bash {command, background?, timeout?}`, `bash_status {command_id}`, `bash_cancel {command_id}`.

Every command runs as `bash -c` in a process group of its own, ended whole on a timeout, a
cancelled turn or tool, or a cancel of a background command.

- In the foreground (the default) the tool waits for the command and answers the model with its
  output (stdout and stderr interleaved, the first `MAX_OUTPUT` bytes) and its exit code.
- With `background: true` it answers at once with Foya's `running_in_background` text and the
  command's snapshot; the command lives on, detached from the turn, until it ends, is cancelled,
  or its session or the kernel ends. `bash_status` and `bash_cancel` read and stop it.
- A running foreground command can be moved to the background by the user: the tool then
  answers like a background start, initiated by the user.

The kernel keeps the commands (`CommandHost`: app.kernel.background); a Bash tool without one
runs foreground commands only. The process itself and its output (`ShellCommand`, `Stream`) are
in app.tools.shell.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Protocol

from app.events import BackgroundCommand
from app.jsontypes import JSONObject
from app.tools.base import Action, Tool, ToolContext, ToolError, ToolResult, schema
from app.tools.shell import MAX_OUTPUT, ShellCommand

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0  # a foreground command
MAX_BACKGROUND_TIMEOUT = 86400.0  # Foya's bound

#: Who moved a command to the background, and Foya's words for each.
_MOVED = {
    "agent": "The command was started in the background by the agent.",
    "user": "The user moved this command to the background. Continue the task without waiting "
    "for it.",
}


class CommandHost(Protocol):
    """The kernel's registry of commands, per session (app.kernel.background)."""

    async def start(self, ctx: ToolContext, shell: ShellCommand) -> BackgroundCommand:
        """Keep `shell` as a background command the agent started; its snapshot."""
        ...

    async def run(self, ctx: ToolContext, shell: ShellCommand) -> BackgroundCommand | None:
        """Wait for foreground `shell`: None once it ended, or its snapshot once the user
        moved it to the background."""
        ...

    def find(self, session: str, command_id: str) -> BackgroundCommand | None:
        """The snapshot of one of the session's commands (None: no such command)."""
        ...

    async def stop(self, session: str, command_id: str, by: str) -> BackgroundCommand | None:
        """Cancel one of the session's commands; its snapshot once ended (None: no such)."""
        ...


def moved(by: str, snapshot: BackgroundCommand) -> str:
    """Foya's answer for a command now running in the background, started `by` agent or user."""
    body = {"status": "running_in_background", "initiated_by": by, "message": _MOVED[by]}
    return _json({**body, "command": snapshot})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Bash:
    name = "bash"
    description = (
        "Run a bash command in the project directory. Returns combined stdout and stderr "
        f"(at most {MAX_OUTPUT // 1024} KiB) and the exit code. "
        f"Default timeout {int(DEFAULT_TIMEOUT)} s. With background: true the command is "
        "started as a kernel-managed background process and the call returns at once with its "
        "command_id (read it with bash_status, stop it with bash_cancel)."
    )
    parameters = schema(
        {
            "command": {"type": "string", "description": "The command line."},
            "background": {
                "type": "boolean",
                "description": "Start the command in the background and return immediately.",
            },
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed (foreground: 120 by "
                "default; background: none by default).",
            },
        },
        ["command"],
    )

    def __init__(self, host: CommandHost | None = None) -> None:
        self.host = host

    def action(self, args: JSONObject) -> Action:
        return "execute"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command: a non-empty string is required")
        background = args.get("background", False)
        if not isinstance(background, bool):
            raise ToolError("background: true or false is required")
        if background and self.host is None:
            raise ToolError("background execution is unavailable")
        timeout = args.get("timeout", None if background else DEFAULT_TIMEOUT)
        if timeout is not None:
            if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
                raise ToolError("timeout: a positive number of seconds is required")
            timeout = min(float(timeout), MAX_BACKGROUND_TIMEOUT if background else MAX_TIMEOUT)
        shell = await ShellCommand.spawn(command, ctx.cwd, timeout)
        try:
            if background:
                assert self.host is not None
                return ToolResult(moved("agent", await self.host.start(ctx, shell)))
            if self.host is not None:
                snapshot = await self.host.run(ctx, shell)
                if snapshot is not None:
                    return ToolResult(moved("user", snapshot))
            else:
                await asyncio.shield(shell.finished)  # a cancel must not stop the reading
        except BaseException:
            if not shell.detached:  # a cancelled turn or tool ends its foreground command
                shell.kill()
            raise
        return shell.answer()


class _CommandTool:
    """A tool on one background command of the session, named by `command_id`: answers with
    its snapshot."""

    name: str
    description: str
    parameters = schema({"command_id": {"type": "string"}}, ["command_id"])
    _action: Action

    def __init__(self, host: CommandHost) -> None:
        self.host = host

    def action(self, args: JSONObject) -> Action:
        return self._action

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        command_id = args.get("command_id")
        if not isinstance(command_id, str) or not command_id.strip():
            raise ToolError("command_id is required")
        snapshot = await self._apply(ctx.session, command_id)
        if snapshot is None:
            raise ToolError("background command not found")
        return ToolResult(_json(snapshot))

    async def _apply(self, session: str, command_id: str) -> BackgroundCommand | None:
        raise NotImplementedError


class BashStatus(_CommandTool):
    name = "bash_status"
    description = "Read the status and accumulated output of a background command."
    parallel = True
    _action = "read"

    async def _apply(self, session: str, command_id: str) -> BackgroundCommand | None:
        return self.host.find(session, command_id)


class BashCancel(_CommandTool):
    name = "bash_cancel"
    description = "Stop a background command started by bash."
    _action = "execute"

    async def _apply(self, session: str, command_id: str) -> BackgroundCommand | None:
        return await self.host.stop(session, command_id, "agent")


def bash_tools(host: CommandHost) -> dict[str, Tool]:
    """`bash` with its background mode, `bash_status` and `bash_cancel`, kept by `host`."""
    tools: list[Tool] = [Bash(host), BashStatus(host), BashCancel(host)]
    return {t.name: t for t in tools}
