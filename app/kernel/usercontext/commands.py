"""Commands (reference §1 "Commands"; Foya's `workflow.CommandManager`): Markdown prompt
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
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, WithJsonSchema

from app.errors import BadRequest, NotFound
from app.events import iso_time
from app.files import replace_atomic
from app.kernel.projects import Projects
from app.kernel.sessions import Sessions
from app.kernel.turns.inputs import TurnAccepted, TurnInput
from app.kernel.usercontext.markdown import (
    Malformed,
    parse_front_matter,
    render_front_matter,
    split_front_matter,
)
from app.kernel.workflows import Workflow, Workflows
from app.logs import get_logger

T = TypeVar("T")
MAX_FILE_BYTES = 256 * 1024
MAX_DIRS = 3
RESERVED = ("plan", "spec", "goal")
MARKERS = ("$ARGUMENTS", "$@", "{{args}}")
DEFAULT_BODY = "Define what the AI should do when this command is triggered."
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_-]{0,63}")

Submit = Callable[[str, TurnInput, str | None], Awaitable[TurnAccepted]]
"""Start or queue a turn whose user message records the command (`Turns.submit`)."""


class InvalidCommand(BadRequest):
    """A request about commands that cannot be carried out as sent."""


class CommandNotFound(NotFound):
    """No such command."""


class Command(BaseModel):
    """A command as served (Foya's `workflow.Command`)."""

    ref: str
    name: str
    description: str | None = None
    scope: Literal["builtin", "global", "project"]
    project_id: str | None = None
    kind: Literal["prompt", "workflow"] = "prompt"
    path: str | None = None
    body: str | None = None
    builtin: bool | None = None
    updated_at: str | None = None


PLAN = Command(
    ref="builtin:plan",
    name="plan",
    description="Start a Plan workflow",
    scope="builtin",
    kind="workflow",
    builtin=True,
)


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


def expand(body: str, args: str) -> str:
    """`body` with `$ARGUMENTS`, `$@` and `{{args}}` replaced by the trimmed `args`; a body with
    none of them gets non-empty arguments appended as a block of their own."""
    args = args.strip()
    text = body
    for marker in MARKERS:
        text = text.replace(marker, args)
    if args and not any(marker in body for marker in MARKERS):
        text += "\n\nAdditional user arguments:\n" + args
    return text.strip()


def normalize_name(value: str) -> str:
    """A command name as stored, or `InvalidCommand` saying what is wrong with it."""
    name = value.strip().removeprefix("/").replace("/", ":")
    if not _NAME.fullmatch(name):
        raise InvalidCommand(
            "name: 1 to 64 letters, digits, ':', '_' or '-', starting with a letter or digit"
        )
    parts = name.split(":")
    if "" in parts:
        raise InvalidCommand("name: each ':' must stand between two parts")
    if len(parts) - 1 > MAX_DIRS:
        raise InvalidCommand(f"name: at most {MAX_DIRS} ':' (directories)")
    if name in RESERVED:
        raise InvalidCommand(f"name: {name} is reserved for a builtin workflow")
    return name


def render(name: str, description: str | None, body: str) -> str:
    """A command file as Foya writes it: front matter, a blank line, the body."""
    return render_front_matter({"name": name, "description": description}) + f"\n{body}\n"


@dataclass(frozen=True)
class Root:
    """One scope's commands directory: `base` joined with `parts`, which must be real
    directories (`base` itself is trusted: `~/.foya` or the project directory)."""

    scope: Literal["global", "project"]
    project_id: str | None
    base: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.base.joinpath(*self.parts)

    def ref(self, name: str) -> str:
        return f"project:{self.project_id}:{name}" if self.project_id else f"global:{name}"


class CommandFiles:
    """Reads and writes command files, caching each file's parse by its mtime and size."""

    def __init__(self, home: Path) -> None:
        self.global_root = Root("global", None, home, ("commands",))
        self._cache: dict[Path, dict[Path, tuple[tuple[int, int], Command | None]]] = {}
        self.log = get_logger("foya.commands")

    def scan(self, root: Root) -> list[Command]:
        """The commands of `root`, by name."""
        top = root.path
        if not _plain_dirs(root.base, root.parts, create=False) or not top.is_dir():
            self._cache.pop(top, None)
            return []
        old, new = self._cache.get(top, {}), {}
        for dirpath, dirnames, filenames in os.walk(top):  # symbolic links are not followed
            here = Path(dirpath)
            if len(here.relative_to(top).parts) >= MAX_DIRS:
                dirnames.clear()
            for name in filenames:
                path = here / name
                if name.lower().endswith(".md") and not path.is_symlink():
                    found = self._cached(root, path, old)
                    if found is not None:
                        new[path] = found
        self._cache[top] = new
        return sorted((c for _, c in new.values() if c is not None), key=lambda c: c.name)

    def _cached(
        self, root: Root, path: Path, old: dict[Path, tuple[tuple[int, int], Command | None]]
    ) -> tuple[tuple[int, int], Command | None] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        hit = old.get(path)
        if hit is not None and hit[0] == key:
            return hit
        try:
            return key, _parse(root, path, st)
        except (InvalidCommand, Malformed, OSError) as exc:
            reason = exc.message if isinstance(exc, InvalidCommand) else str(exc)
            self.log.warning("command file skipped", path=str(path), reason=reason)
            return key, None

    def target(self, root: Root, name: str) -> Path:
        """The file of command `name` in `root`; refused when a directory on the way is a
        symbolic link or a file, or the file itself is not a regular file."""
        *dirs, last = name.split(":")
        if not _plain_dirs(root.base, (*root.parts, *dirs), create=False):
            raise InvalidCommand(f"name: {name}: a directory on its way is a link or a file")
        path = root.path.joinpath(*dirs, last + ".md")
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise InvalidCommand(f"name: {name}: {path.name} is not a regular file")
        return path

    def write(self, root: Root, path: Path, text: str) -> Command:
        """Write `path` atomically (0600, directories 0700) and return the command it holds."""
        if root.scope == "global":
            root.base.mkdir(mode=0o700, exist_ok=True)
        elif not root.base.is_dir():
            raise InvalidCommand(f"the project directory {root.base} does not exist")
        dirs = path.parent.relative_to(root.base).parts
        _plain_dirs(root.base, dirs, create=True)
        replace_atomic(path, text.encode(), mode=0o600)
        return _parse(root, path, path.stat())


def _parse(root: Root, path: Path, st: os.stat_result) -> Command:
    if st.st_size > MAX_FILE_BYTES:
        raise InvalidCommand(f"larger than {MAX_FILE_BYTES // 1024} KiB")
    front, body = split_front_matter(path.read_text(encoding="utf-8", errors="replace"))
    meta = parse_front_matter(front) if front is not None else {}
    name, description = meta.get("name") or "", meta.get("description") or ""
    if not isinstance(name, str) or not isinstance(description, str):
        raise InvalidCommand("front matter: name and description must be strings")
    if not name.strip():
        name = path.relative_to(root.path).with_suffix("").as_posix()
    name = normalize_name(name)
    if not body.strip():
        raise InvalidCommand("the body is empty")
    return Command(
        ref=root.ref(name),
        name=name,
        description=description.strip() or None,
        scope=root.scope,
        project_id=root.project_id,
        path=str(path),
        body=body.strip(),
        updated_at=iso_time(st.st_mtime_ns),
    )


def _plain_dirs(base: Path, parts: tuple[str, ...], *, create: bool) -> bool:
    """Whether each of `parts` below `base` is a real directory or absent (then made, 0700, if
    `create`). A symbolic link or a file on the way answers False."""
    current = base
    for part in parts:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            return False
        if create and not current.exists():
            current.mkdir(mode=0o700)
    return True


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
