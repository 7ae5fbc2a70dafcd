"""Command files: the `Command` model, Foya's rules for names and bodies, and reading and
writing `.foya/commands/*.md` of the user, of a project and of the enabled plugins (cached by
each file's mtime and size). `app.kernel.usercontext.commands` runs them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from app.errors import BadRequest, NotFound
from app.events import iso_time
from app.files import replace_atomic
from app.kernel.usercontext.markdown import (
    Malformed,
    parse_front_matter,
    render_front_matter,
    split_front_matter,
)
from app.logs import get_logger

MAX_FILE_BYTES = 256 * 1024
MAX_DIRS = 3
RESERVED = ("plan", "spec", "goal")
MARKERS = ("$ARGUMENTS", "$@", "{{args}}")
DEFAULT_BODY = "Define what the AI should do when this command is triggered."
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_-]{0,63}")


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
