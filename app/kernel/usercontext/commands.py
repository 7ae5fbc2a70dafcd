"""Commands (Foya's `workflow.CommandManager`): Markdown prompt
templates the user runs by name in a session.

    ~/.foya/commands/**/*.md            global commands
    <plugin>/commands/**/*.md           an enabled plugin's commands (`app.kernel.plugins`)
    <project>/.foya/commands/**/*.md    a project's commands

A command file is optional front matter (`name`, `description`) and a body, the template. A file
without a `name` is named by its path: `git/commit.md` is `git:commit`. Files at most three
directories below the root count. As in Foya, a symbolic link is skipped, and so is a file over
256 KiB, with an empty body, front matter that cannot be read, or an invalid or reserved name
(with a warning, logged once per change of the file). Each file's parse is cached by mtime and
size, so a hand edit shows on the next request without a restart.

Names match `[A-Za-z0-9][A-Za-z0-9:_-]{0,63}` (a leading `/` is dropped, `/` reads as `:`); each
`:` is a directory, at most three. `plan`, `spec` and `goal` are reserved for Foya's builtin
workflows; of these, this kernel runs `plan` (`builtin:plan`, listed first), not `spec` or
`goal` (nor lists them). Refs: `global:<name>`, `project:<project id>:<name>`. A session's
commands are its project's and the global ones; a project command shadows a global one of the
same name. A plugin's commands count as global ones wherever a session's commands are found
(`effective`, a session's listing, running one), shadowed by the user's own; `scope=global` lists
only the files under `~/.foya/commands`, the ones the routes can edit.

A command is prompt text, never a shell: a project's commands are not executable configuration
and need no trust (`app.kernel.trust` says why).

Running a command expands its body with the arguments (`expand`) and submits the text as a
turn whose user message records `command: <name>`. Running `plan` puts the session in plan
mode with the arguments as the goal (`app.kernel.workflows`); its answer carries the workflow.

Writes are atomic, files 0600, new directories 0700. No directory below `~/.foya` or the project
on the way to a command file may be a symbolic link: nothing is read or written outside the
commands directories. Foya has no context events for commands; changes are not journaled.

Errors (rendered by `app.http.errors`), Foya's statuses and codes:

- `InvalidCommand` 400 `bad_request`: a bad scope, a missing `project_id`, a bad, reserved or
  taken name, an empty or too large body, a name whose directory is a link or a file
- `CommandNotFound` 404 `not_found`: no command with that ref in the scope, or that name in the
  session; an unknown project or session is `ProjectNotFound` / `SessionNotFound`, 404 too
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, WithJsonSchema

from app.kernel.projects import Projects
from app.kernel.sessions import Sessions
from app.kernel.turns.inputs import TurnAccepted, TurnInput
from app.kernel.usercontext.commandfiles import (
    DEFAULT_BODY,
    MAX_FILE_BYTES,
    PLAN,
    Command,
    CommandFiles,
    CommandNotFound,
    InvalidCommand,
    Root,
    expand,
    normalize_name,
    render,
)
from app.kernel.workflows import Workflow, Workflows

T = TypeVar("T")

Submit = Callable[[str, TurnInput, str | None], Awaitable[TurnAccepted]]
"""Start or queue a turn whose user message records the command (`Turns.submit`)."""


class CommandExecution(BaseModel):
    """`POST /sessions/{id}/commands/{name}`: the command and how its turn was submitted
    (and, for `plan`, the workflow it started)."""

    command: Command
    workflow: Workflow | None = None
    # An enum of one in the schema (client generators read `enum`, not pydantic's `const`).
    status: Annotated[
        Literal["submitted"], WithJsonSchema({"type": "string", "enum": ["submitted"]})
    ]
    submission: TurnAccepted


class Commands:
    """The commands of the user and of each project, and running one in a session."""

    def __init__(
        self,
        home: Path,
        projects: Projects,
        sessions: Sessions,
        submit: Submit,
        workflows: Workflows,
        plugin_dirs: Callable[[], Sequence[Path]] = tuple,
    ) -> None:
        self.files = CommandFiles(home)
        self.plugin_dirs = plugin_dirs  # the enabled plugins' directories
        self.projects = projects
        self.sessions = sessions
        self.submit = submit
        self.workflows = workflows
        self._lock = asyncio.Lock()

    async def _run(self, work: Callable[[], T]) -> T:
        """File work off the event loop, one at a time."""
        async with self._lock:
            return await asyncio.to_thread(work)

    def _root(self, scope: str, project_id: str | None) -> Root:
        if scope == "global":
            return self.files.global_root
        if scope != "project":
            raise InvalidCommand("scope: must be global or project")
        if not project_id:
            raise InvalidCommand("project_id is required for scope project")
        path = Path(self.projects.get(project_id)["path"])
        return Root("project", project_id, path, (".foya", "commands"))

    def _roots(self, project_id: str | None) -> list[Root]:
        """Where commands of `project_id` (or of no project) are found, the shadowing one last."""
        plugins = [Root("global", None, d, ("commands",)) for d in self.plugin_dirs()]
        if not project_id:
            return [*plugins, self.files.global_root]
        return [*plugins, self.files.global_root, self._root("project", project_id)]

    async def _session_roots(self, session: str) -> list[Root]:
        """The roots of the session's project; a session whose project is gone has none."""
        project_id = (await self.sessions.row(session)).get("project_id")
        return self._roots(project_id if project_id and self.projects.exists(project_id) else None)

    async def for_scope(self, scope: str, project_id: str | None) -> list[Command]:
        """One scope's commands, or the `effective` ones of a project (or of none)."""
        if project_id:
            self.projects.get(project_id)  # an unknown project is 404 whatever the scope
        if scope not in ("global", "project", "effective"):
            raise InvalidCommand("scope: must be global, project or effective")
        if scope == "effective":
            roots = self._roots(project_id)
            return [PLAN, *await self._run(lambda: _effective(self.files, roots))]
        root = self._root(scope, project_id)
        return await self._run(lambda: self.files.scan(root))

    async def for_session(self, session: str) -> list[Command]:
        """The commands a session can run (`GET /sessions/{id}/commands`)."""
        roots = await self._session_roots(session)
        return [PLAN, *await self._run(lambda: _effective(self.files, roots))]

    async def create(
        self, scope: str, project_id: str | None, name: str, body: str | None
    ) -> Command:
        """A new command file (with a placeholder body when none is given)."""
        root = self._root(scope, project_id)
        name = normalize_name(name)
        text = _sized(render(name, None, (body or "").strip() or DEFAULT_BODY))

        def write() -> Command:
            if any(c.name == name for c in self.files.scan(root)):
                raise InvalidCommand(f"name: a command {name} already exists")
            path = self.files.target(root, name)
            if path.exists():
                raise InvalidCommand(f"name: a file {path.name} already exists")
            return self.files.write(root, path, text)

        return await self._run(write)

    async def update(
        self,
        ref: str,
        scope: str,
        project_id: str | None,
        name: str,
        description: str | None,
        body: str,
    ) -> Command:
        """Rewrite command `ref` of the scope: name, description and body all as sent (Foya's
        PATCH replaces them); a new name moves the file."""
        root = self._root(scope, project_id)

        def write() -> Command:
            found = self.files.scan(root)
            before = _file_of(found, ref)
            new_name = normalize_name(name)
            if any(c.name == new_name and c.ref != ref for c in found):
                raise InvalidCommand(f"name: a command {new_name} already exists")
            if not body.strip():
                raise InvalidCommand("body: must not be empty")
            text = _sized(render(new_name, (description or "").strip() or None, body.strip()))
            path = self.files.target(root, new_name)
            if path != before and path.exists():
                raise InvalidCommand(f"name: a file {path.name} already exists")
            command = self.files.write(root, path, text)
            if path != before:
                before.unlink(missing_ok=True)
            return command

        return await self._run(write)

    async def delete(self, ref: str, scope: str, project_id: str | None) -> None:
        root = self._root(scope, project_id)
        await self._run(lambda: _file_of(self.files.scan(root), ref).unlink(missing_ok=True))

    async def run(
        self, session: str, name: str, args: str, workspace_files: list[str] | None = None
    ) -> CommandExecution:
        """Expand the session's command `name` with `args` and submit it as a turn, with the
        workspace files the user picked (`app.kernel.turns.inputs`; refused ones start nothing)."""
        roots = await self._session_roots(session)
        wanted = name.strip().removeprefix("/")
        if wanted == PLAN.name:
            workflow, submission = await self.workflows.start_plan(session, args, workspace_files)
            return CommandExecution(
                command=PLAN, workflow=workflow, status="submitted", submission=submission
            )
        found = await self._run(lambda: _effective(self.files, roots))
        command = next((c for c in found if c.name == wanted), None)
        if command is None:
            raise CommandNotFound(f"command {wanted} not found")
        turn = TurnInput(message=expand(command.body or "", args), workspace_files=workspace_files)
        submission = await self.submit(session, turn, command.name)
        return CommandExecution(command=command, status="submitted", submission=submission)


def _effective(files: CommandFiles, roots: list[Root]) -> list[Command]:
    """Commands by name, a later root's shadowing an earlier's; project ones first."""
    by_name = {c.name: c for root in roots for c in files.scan(root)}
    return sorted(by_name.values(), key=lambda c: (c.scope != "project", c.name))


def _file_of(found: list[Command], ref: str) -> Path:
    """The file of command `ref` among `found` (commands read from files: each has a path)."""
    path = next((c.path for c in found if c.ref == ref), None)
    if path is None:
        raise CommandNotFound(f"command {ref} not found")
    return Path(path)


def _sized(text: str) -> str:
    if len(text.encode()) > MAX_FILE_BYTES:
        raise InvalidCommand(f"body: a command file holds at most {MAX_FILE_BYTES // 1024} KiB")
    return text
