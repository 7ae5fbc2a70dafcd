"""The path rules every workspace route shares, and the errors they answer.

A path is relative to the workspace root. Absolute paths, NUL bytes and paths that climb out
with `..` are `invalid_workspace_path`, and so is any path that, its symbolic links resolved,
leads out of the workspace or onto Foya's own data and secrets (`ProtectedPaths`: the data dir
but its managed workspaces, `~/.foya`, the TLS files, the token digest), whatever workspace
contains them. An existing entry named by a route that changes it, or resolves it, must not be
a symbolic link itself (as in Foya): the route would act on the link's target.

Changes (create, rename, delete) are refused on the directories the file tools keep away from
too (`.git`, `.foya`, `.agents`, anywhere in the path or as a new name), and a rename or a
delete whose entry holds a protected root inside it is refused: it would take Foya's data
along.

Exception map (`{"code","message"}` rendered by app.http.errors):

- `InvalidWorkspacePath` 400 `invalid_workspace_path`: the path, or a new name, is refused
- `WorkspaceFileNotFound` 404 `not_found`: the entry (or a parent of a new one) is missing
- `WorkspaceEntryExists` 409 `workspace_entry_exists`: a new entry's name is taken
- `FileTooLarge` 413 `file_too_large`: over the text (2 MiB) or raw (32 MiB) read limit
- `BinaryFile` 415 `binary_file`: a text read of a file that is not UTF-8
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from app.errors import BadRequest, Conflict, FoyaError, NotFound
from app.files import NEVER_DELETED as PROTECTED_NAMES
from app.files import ProtectedPaths


class InvalidWorkspacePath(BadRequest):
    code = "invalid_workspace_path"


class WorkspaceFileNotFound(NotFound):
    """Foya answers every missing workspace entry 404 `not_found`."""


class WorkspaceEntryExists(Conflict):
    code = "workspace_entry_exists"


class FileTooLarge(FoyaError):
    status = 413
    code = "file_too_large"


class BinaryFile(FoyaError):
    status = 415
    code = "binary_file"


def refuse_protected(rel: str, real: Path, protected: ProtectedPaths) -> None:
    """`InvalidWorkspacePath` if resolved `real` is one of Foya's own files."""
    if protected.covers(real):
        raise InvalidWorkspacePath(
            f"path: {rel!r} is protected (Foya's data directory and secrets are never served)"
        )


def resolve(root: Path, rel: str, protected: ProtectedPaths, *, allow_root: bool = False) -> Path:
    """`rel` inside `root`, symlinks resolved; `InvalidWorkspacePath` if it leads elsewhere
    or to a protected path. Used by the reads, which follow links that stay inside."""
    if "\x00" in rel or (rel and (rel.startswith("/") or Path(rel).is_absolute())):
        raise InvalidWorkspacePath("path: must be relative to the workspace")
    if not rel and not allow_root:
        raise InvalidWorkspacePath("path: a file path is required")
    real_root = root.resolve()
    target = (real_root / rel).resolve()
    if not target.is_relative_to(real_root):
        raise InvalidWorkspacePath(f"path: {rel!r} is outside the workspace")
    refuse_protected(rel, target, protected)
    return target


def relative(root: Path, path: Path) -> str:
    """Resolved `path` relative to the (resolved) root, with `/`."""
    return path.relative_to(root.resolve()).as_posix()


def clean(rel: str) -> str:
    """`rel` normalized (`a/../b` is `b`), as Foya cleans it; the root itself, an absolute
    path, a NUL byte and a climb out are `InvalidWorkspacePath`."""
    if not rel or "\x00" in rel or rel.startswith("/"):
        raise InvalidWorkspacePath("path: a path relative to the workspace is required")
    normal = os.path.normpath(rel)
    if normal in (".", "..") or normal.startswith("../"):
        raise InvalidWorkspacePath(f"path: {rel!r} is not an entry inside the workspace")
    return normal


def refuse_names(rel: str) -> None:
    """`InvalidWorkspacePath` if a changed path goes through `.git`, `.foya` or `.agents`."""
    if any(part in PROTECTED_NAMES for part in PurePosixPath(rel).parts):
        raise InvalidWorkspacePath(
            f"path: {rel!r} is protected ({', '.join(PROTECTED_NAMES)} are never changed here)"
        )


def refuse_holders(rel: str, real: Path, protected: ProtectedPaths) -> None:
    """`InvalidWorkspacePath` if a protected root lies inside the entry `real` (moving or
    deleting it would move or delete Foya's data)."""
    if any(r.is_relative_to(real) for r in protected.resolved().roots):
        raise InvalidWorkspacePath(f"path: {rel!r} holds Foya's data directory or secrets")


def _inside(root: Path, real: Path, rel: str) -> None:
    if not real.is_relative_to(root):
        raise InvalidWorkspacePath(f"path: {rel!r} is outside the workspace")


def existing(root: Path, rel: str, protected: ProtectedPaths) -> Path:
    """The entry `rel` names, not followed if it is a link (refused: Foya supports none), its
    parents resolved. `WorkspaceFileNotFound` if it is missing. Blocking."""
    normal = clean(rel)
    real_root = root.resolve()
    candidate = real_root / normal
    try:
        st = os.lstat(candidate)
    except (FileNotFoundError, NotADirectoryError):
        raise WorkspaceFileNotFound(f"{rel} does not exist in the workspace") from None
    if stat.S_ISLNK(st.st_mode):
        raise InvalidWorkspacePath(f"path: {rel!r} is a symbolic link; links are not supported")
    real = candidate.parent.resolve() / candidate.name
    _inside(real_root, real, rel)
    if real == real_root:
        raise InvalidWorkspacePath(f"path: {rel!r} is the workspace itself")
    refuse_protected(rel, real, protected)
    return real


def new(root: Path, rel: str, protected: ProtectedPaths) -> Path:
    """Where a new entry `rel` goes: its parent an existing directory inside the workspace
    (resolved), its name free. Blocking."""
    normal = clean(rel)
    real_root = root.resolve()
    candidate = real_root / normal
    parent = candidate.parent.resolve()
    _inside(real_root, parent, rel)
    if not parent.exists():
        raise WorkspaceFileNotFound(f"the directory of {rel} does not exist in the workspace")
    if not parent.is_dir():
        raise InvalidWorkspacePath(f"path: the parent of {rel!r} is not a directory")
    target = parent / candidate.name
    refuse_protected(rel, target, protected)
    if os.path.lexists(target):
        raise WorkspaceEntryExists(f"{rel} already exists in the workspace")
    return target


def valid_name(name: str) -> str:
    """A new name for an entry: one path component, not `.` or `..`."""
    if not name.strip() or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise InvalidWorkspacePath("new_name: must be a file or directory name, without `/`")
    return name
