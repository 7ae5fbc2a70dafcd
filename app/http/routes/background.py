"""Background commands: move a running bash call to the background or reveal it,
list, read and cancel a session's kept commands. Every answer is a command's snapshot
(`app.events.BackgroundCommand`); errors are listed in app.kernel.background."""

from __future__ import annotations

from fastapi import APIRouter

from app.events import BackgroundCommand
from app.kernel.api import Kernel

TOOL = "/sessions/{session_id}/tools/{tool_call_id}"
COMMANDS = "/sessions/{session_id}/background-commands"


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["background commands"])
    commands = kernel.background

    @api.post(TOOL + "/background")
    async def background_tool(session_id: str, tool_call_id: str) -> BackgroundCommand:
        """Move the call's running bash command to the background: the call answers the model
        at once, the command goes on (409 `tool_not_running` if the call runs no command)."""
        return await commands.promote(session_id, tool_call_id)

    @api.post(TOOL + "/reveal")
    async def reveal_tool(session_id: str, tool_call_id: str) -> BackgroundCommand:
        """The call's running bash command, kept readable by id after it ends (it stays in the
        foreground)."""
        return await commands.reveal(session_id, tool_call_id)

    @api.get(COMMANDS)
    async def list_commands(session_id: str) -> list[BackgroundCommand]:
        """The running background commands, newest first."""
        return await commands.in_background(session_id)

    @api.get(COMMANDS + "/{command_id}")
    async def get_command(session_id: str, command_id: str) -> BackgroundCommand:
        """One command, running or ended: state, exit code and the tail of its output."""
        return await commands.get(session_id, command_id)

    @api.post(COMMANDS + "/{command_id}/cancel")
    async def cancel_command(session_id: str, command_id: str) -> BackgroundCommand:
        """Kill the command's whole process group; answers its final state."""
        return await commands.cancel(session_id, command_id)

    return api
