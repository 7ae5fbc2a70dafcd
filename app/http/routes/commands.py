"""Commands: Markdown prompt templates under `~/.foya/commands` and
`<project>/.foya/commands`, served by `app.kernel.usercontext.commands.Commands`."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.commands import CreateCommand, RunCommand, UpdateCommand
from app.kernel.api import Command, CommandExecution, Kernel


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["commands"])
    commands = kernel.commands

    @api.get("/commands", response_model_exclude_none=True)
    async def list_commands(scope: str = "", project_id: str | None = None) -> list[Command]:
        """The commands of one scope (`global`, or `project` with `project_id`), or with
        `effective` those a session in `project_id` (or in no project) can run."""
        return await commands.for_scope(scope, project_id)

    @api.post("/commands", status_code=201, response_model_exclude_none=True)
    async def create_command(body: CreateCommand) -> Command:
        """A new command file; without `body` it holds a placeholder to edit."""
        return await commands.create(body.scope, body.project_id, body.name, body.body)

    @api.patch("/commands/{ref}", response_model_exclude_none=True)
    async def update_command(ref: str, body: UpdateCommand) -> Command:
        """Replace the name, description and body of the scope's command `ref`."""
        return await commands.update(
            ref, body.scope, body.project_id, body.name, body.description, body.body
        )

    @api.delete("/commands/{ref}", status_code=204)
    async def delete_command(ref: str, scope: str = "", project_id: str | None = None) -> Response:
        await commands.delete(ref, scope, project_id)
        return Response(status_code=204)

    @api.get("/sessions/{session_id}/commands", response_model_exclude_none=True)
    async def session_commands(session_id: str) -> list[Command]:
        """The commands the session can run: its project's, then the global ones it does not
        shadow."""
        return await commands.for_session(session_id)

    @api.post("/sessions/{session_id}/commands/{name}", response_model_exclude_none=True)
    async def run_command(
        session_id: str, name: str, body: RunCommand | None = None
    ) -> CommandExecution:
        """Expand the command with `args` and submit it as a turn (started, or queued while
        the session is busy) with the `workspace_files` named; its user message records
        `command`."""
        args, files = (body.args or "", body.workspace_files) if body else ("", None)
        return await commands.run(session_id, name, args, files)

    return api
