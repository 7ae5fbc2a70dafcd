"""Projects: named directories the agent works in, kept in `<data-dir>/projects.json`.

The file is rewritten atomically on every change (temp file, fsync, rename, fsync dir), under one
lock so concurrent requests cannot lose each other's updates.

Exception map (status, code — Foya's, which answers a missing project three ways):

- `ProjectNotFound` 404 `not_found`: `/projects/{id}` names no project
- `ParentProjectNotFound` 404 `project_not_found`: a route below a project
  (`/projects/{id}/agents`, `/projects/{id}/skills`) names no project
- `UnknownProject` 400 `project_not_found`: a request body's `project_id` names no project
- `InvalidProjectPath` 400 `invalid_project_path`: a path that cannot be a project
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, NotRequired

from typing_extensions import TypedDict

from app.errors import BadRequest, NotFound
from app.events import iso_time
from app.files import write_json_atomic
from app.kernel.ids import new_id, now_ns
from app.logs import get_logger
from app.text.surrogates import scrub

DEFAULT_NAME = "New project"


#: Pseudo file systems: never a project, nor anything under them.
SYSTEM_TREES = ("/proc", "/sys", "/dev")
#: System directories that are never a project themselves (a project below them is fine).
SYSTEM_DIRS = ("/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/var", "/run")


class ProjectNotFound(NotFound):
    """The URL names no project."""


class ParentProjectNotFound(ProjectNotFound):
    """A route below a project (its agents, its skills) names no project."""

    code = "project_not_found"


class UnknownProject(BadRequest):
    """A request body's `project_id` names no project."""

    code = "project_not_found"


class InvalidProjectPath(BadRequest):
    """A path that cannot be a project: relative, missing, not a directory, or a system
    directory."""

    code = "invalid_project_path"


def checked_path(path: str) -> Path:
    """`path` as a project directory: absolute, an existing directory, and not the root, a
    system directory or a pseudo file system (tools would run and write there)."""
    if "\0" in path or not path.strip() or not Path(path).is_absolute():
        raise InvalidProjectPath("path: must be an absolute directory path")
    given = Path(path)
    try:
        real = given.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InvalidProjectPath(f"path: {path} does not exist") from None
    if not real.is_dir():
        raise InvalidProjectPath(f"path: {path} is not a directory")
    text = str(real)
    if text in SYSTEM_DIRS or any(text == t or text.startswith(t + "/") for t in SYSTEM_TREES):
        raise InvalidProjectPath(f"path: {path} is a system directory, not a project")
    return given


class Project(TypedDict):
    """A project as stored and served."""

    id: str
    name: str
    path: str
    pinned: bool
    pinned_at: NotRequired[str]
    created_at: str
    updated_at: str


class ProjectInfo(Project):
    """A project as served (Foya's `ProjectInfo`): the stored record and whether its directory
    is there now."""

    available: bool


def info(project: Project) -> ProjectInfo:
    """`project` with `available`: its path is (through symlinks) an existing directory, checked
    on every answer as Foya does, never stored (the directory may come back)."""
    try:
        available = Path(project["path"]).is_dir()
    except (OSError, ValueError):  # an unreadable or malformed hand-edited path
        available = False
    return {**project, "available": available}


_TEXT_FIELDS = ("id", "name", "path", "created_at", "updated_at")


def _servable(raw: Any) -> Project | None:
    """A record of the (hand-editable) file as the kernel serves it, or None, logged, when it
    lacks what a project is: text no encoder accepts becomes U+FFFD, a `pinned` that is not
    `true` is false, so one bad record never breaks a listing or a later write."""
    record: dict[str, Any] | None = scrub(raw) if isinstance(raw, dict) else None
    if record is None or not all(isinstance(record.get(f), str) for f in _TEXT_FIELDS):
        shown = str(scrub(raw.get("id"))) if isinstance(raw, dict) else "?"
        get_logger("foya.projects").warning("projects.json: skipped a malformed record", id=shown)
        return None
    project: Project = {
        "id": record["id"],
        "name": record["name"],
        "path": record["path"],
        "pinned": record.get("pinned") is True,
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
    }
    if project["pinned"] and isinstance(record.get("pinned_at"), str):
        project["pinned_at"] = record["pinned_at"]
    return project


class Projects:
    """The project index."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "projects.json"
        self._lock = asyncio.Lock()
        self._items: dict[str, Project] = {}

    def load(self) -> None:
        """Read the index (a missing file is an empty index)."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raw = []
        records = (_servable(r) for r in (raw if isinstance(raw, list) else []))
        self._items = {r["id"]: r for r in records if r is not None}

    def _save(self) -> None:
        write_json_atomic(self.path, list(self._items.values()))

    def all(self) -> list[Project]:
        """Pinned first, then by creation time."""
        return sorted(self._items.values(), key=lambda p: (not p["pinned"], p["created_at"]))

    def listing(self) -> list[ProjectInfo]:
        """`all()` as served, each with `available`."""
        return [info(p) for p in self.all()]

    def get(self, project_id: str) -> Project:
        try:
            return self._items[project_id]
        except KeyError:
            raise ProjectNotFound(f"project {project_id} not found") from None

    def exists(self, project_id: str) -> bool:
        return project_id in self._items

    async def create(self, path: str, name: str | None) -> ProjectInfo:
        """Add a project for an existing directory (duplicate paths are allowed)."""
        given = checked_path(path)
        stamp = iso_time(now_ns())
        project: Project = {
            "id": new_id(),
            "name": (name or "").strip() or DEFAULT_NAME,
            "path": str(given),
            "pinned": False,
            "created_at": stamp,
            "updated_at": stamp,
        }
        async with self._lock:
            self._items[project["id"]] = project
            self._save()
        return info(project)

    async def update(self, project_id: str, name: str | None, pinned: bool | None) -> ProjectInfo:
        async with self._lock:
            project = self.get(project_id).copy()
            if name is not None:
                if not name.strip():
                    raise BadRequest("name: must not be empty")
                project["name"] = name.strip()
            if pinned:
                project["pinned"], project["pinned_at"] = True, iso_time(now_ns())
            elif pinned is not None:
                project["pinned"] = False
                project.pop("pinned_at", None)
            project["updated_at"] = iso_time(now_ns())
            self._items[project_id] = project
            self._save()
            return info(project)

    async def remove(self, project_id: str) -> None:
        async with self._lock:
            self.get(project_id)
            del self._items[project_id]
            self._save()
