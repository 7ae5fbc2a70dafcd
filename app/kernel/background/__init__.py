"""Background commands (Foya's background command manager).

The kernel keeps every session's bash commands that run in the background: those the agent
started with `bash {background: true}` and foreground ones the user moved there
(`POST …/tools/{tool_call_id}/background`). A running foreground command is kept too, so it can
be moved or revealed (`…/reveal`: kept after it ends, without moving it); one that ends unrevealed
is forgotten. Each command runs in a process group of its own, detached from the turn; cancelling
one (`POST …/background-commands/{id}/cancel`, the `bash_cancel` tool) kills that whole group.

`background_command_updated` (stored, must-deliver, no run id; payload `app.events.
BackgroundCommand`) records a command when it goes to the background and when it ends, and when
a revealed foreground command ends. `GET …/background-commands` lists the running background
commands, newest first; a command's snapshot stays readable by id after it ended (the last
`FINISHED_KEPT` per session). Deleting a session kills its commands without further events; a
kernel shutdown kills them all and records them cancelled (`stopped_by: shutdown`). Nothing
survives a restart (§6): every command id is then unknown.

Errors (the route's status and code):
- `SessionUnknown`: 404 `session_not_found`
- `CommandNotFound`: 404 `background_command_not_found`
- `ToolNotRunning` (app.kernel.turns.activity): 409 `tool_not_running`, no such call running
  a command
"""

from app.kernel.background.commands import (
    FINISHED_KEPT,
    BackgroundCommands,
    CommandNotFound,
    SessionUnknown,
)

__all__ = ["FINISHED_KEPT", "BackgroundCommands", "CommandNotFound", "SessionUnknown"]
