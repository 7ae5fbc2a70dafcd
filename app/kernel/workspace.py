"""Workspace browsing (reference §1 "Workspace"): read-only views of the directory a session's
tools run in, confined to it.

Every path is relative to the workspace root. A path that is absolute, climbs out with `..`, or
leads out through a symbolic link is `invalid_workspace_path`. Files are opened first and the
opened descriptor's real path is checked (via /proc/self/fd), so a link swapped in after the
check still cannot lead outside.

Foya's own data and secrets (`ProtectedPaths`: the data dir but its managed workspaces, `~/.foya`,
the TLS key and certificate, the token digest file) are never listed into or read, whatever
workspace contains them, reached directly, through `..` or through a link: 400
`invalid_workspace_path` (the reference's code for a path the workspace will not serve), with a
message that says the path is protected. `files` leaves them out.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import BadRequest, FoyaError, NotFound
from app.events import iso_time
from app.files import ProtectedPaths
from app.kernel.sessions import Sessions

MAX_LISTED = 5000
MAX_TEXT = 1024 * 1024
MAX_RAW = 32 * 1024 * 1024
SKIPPED_DIRS = frozenset({".git"})


class InvalidWorkspacePath(BadRequest):
    code = "invalid_workspace_path"


def _refuse_protected(rel: str, real: Path, protected: ProtectedPaths) -> None:
    if protected.covers(real):
        raise InvalidWorkspacePath(
            f"path: {rel!r} is protected (Foya's data directory and secrets are never served)"
        )


class WorkspaceFileNotFound(NotFound):
    code = "file_not_found"


class FileTooLarge(FoyaError):
    status = 413
    code = "file_too_large"


@dataclass(frozen=True)
class RawFile:
    """A workspace file's bytes for `media=1`."""

    data: bytes
    media_type: str


def _resolve(root: Path, rel: str, protected: ProtectedPaths, *, allow_root: bool = False) -> Path:
    """`rel` inside `root`, symlinks resolved; `InvalidWorkspacePath` if it leads elsewhere
    or to a protected path."""
    if "\x00" in rel or (rel and (rel.startswith("/") or Path(rel).is_absolute())):
        raise InvalidWorkspacePath("path: must be relative to the workspace")
    if not rel and not allow_root:
        raise InvalidWorkspacePath("path: a file path is required")
    real_root = root.resolve()
    target = (real_root / rel).resolve()
    if not target.is_relative_to(real_root):
        raise InvalidWorkspacePath(f"path: {rel!r} is outside the workspace")
    _refuse_protected(rel, target, protected)
    return target


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root.resolve()).as_posix()


def _entry(root: Path, path: Path, st: os.stat_result) -> dict[str, Any]:
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
    return {
        "name": path.name,
        "path": _relative(root, path),
        "kind": kind,
        "size": st.st_size if kind == "file" else 0,
        "modified_at": iso_time(st.st_mtime_ns),
    }


def listing(root: Path, rel: str, protected: ProtectedPaths) -> dict[str, Any]:
    """The entries of one directory (default: the root), directories first."""
    directory = _resolve(root, rel, protected, allow_root=True)
    if not directory.is_dir():
        raise WorkspaceFileNotFound(f"{rel or '.'} is not a directory in the workspace")
    entries = []
    with os.scandir(directory) as it:
        for item in it:
            try:
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            entries.append(_entry(root, Path(item.path), st))
            if len(entries) >= MAX_LISTED:
                break
    entries.sort(key=lambda e: (e["kind"] != "dir", e["name"]))
    return {
        "root": str(root),
        "path": _relative(root, directory) if directory != root.resolve() else "",
        "entries": entries,
        "truncated": len(entries) >= MAX_LISTED,
    }


def files(root: Path, protected: ProtectedPaths) -> dict[str, Any]:
    """Every regular file under the root (not following links, skipping .git and protected
    paths), sorted."""
    real_root = root.resolve()
    rule = protected.resolved()
    out: list[str] = []
    truncated = False
    if real_root.is_dir():
        for dirpath, dirnames, filenames in os.walk(real_root):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if d not in SKIPPED_DIRS and not rule.holds(here / d)
            )
            for name in filenames:
                path = here / name
                if path.is_symlink() or not path.is_file() or rule.holds(path):
                    continue
                out.append(path.relative_to(real_root).as_posix())
            if len(out) >= MAX_LISTED:
                truncated = True
                break
    out.sort()
    return {"root": str(root), "files": out[:MAX_LISTED], "truncated": truncated}


def _read(root: Path, rel: str, limit: int, protected: ProtectedPaths) -> tuple[bytes, int]:
    """(up to `limit` bytes, full size) of a regular file inside the workspace."""
    path = _resolve(root, rel, protected)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise WorkspaceFileNotFound(f"{rel} does not exist in the workspace") from None
    except OSError:
        raise InvalidWorkspacePath(f"path: {rel!r} is not a readable file") from None
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not real.is_relative_to(root.resolve()):
            raise InvalidWorkspacePath(f"path: {rel!r} is outside the workspace")
        _refuse_protected(rel, real, protected)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidWorkspacePath(f"path: {rel!r} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit), st.st_size
    finally:
        os.close(fd)


def text(root: Path, rel: str, protected: ProtectedPaths) -> dict[str, Any]:
    """A file as JSON: its text (first MiB) or, for non-UTF-8 content, only its metadata."""
    data, size = _read(root, rel, MAX_TEXT, protected)
    media_type = mimetypes.guess_type(rel)[0] or "application/octet-stream"
    out: dict[str, Any] = {"path": rel, "size": size, "media_type": media_type}
    content = _utf8(data, cut=size > MAX_TEXT)
    out["binary"] = content is None
    if content is not None:
        out["content"] = content
    out["truncated"] = size > MAX_TEXT
    return out


def _utf8(data: bytes, *, cut: bool) -> str | None:
    """`data` as text, None if it is not UTF-8. A cut may split the last character (≤ 3 bytes)."""
    for drop in range(4 if cut else 1):
        try:
            return data[: len(data) - drop].decode()
        except UnicodeDecodeError:
            continue
    return None


def raw(root: Path, rel: str, protected: ProtectedPaths) -> RawFile:
    """A file's bytes and media type (`media=1`), up to `MAX_RAW`."""
    data, size = _read(root, rel, MAX_RAW + 1, protected)
    if size > MAX_RAW:
        raise FileTooLarge(f"{rel} is larger than {MAX_RAW // (1024 * 1024)} MiB")
    return RawFile(data, mimetypes.guess_type(rel)[0] or "application/octet-stream")


class Workspaces:
    """The routes' entry: finds a session's workspace, then works off the event loop."""

    def __init__(self, sessions: Sessions, protected: ProtectedPaths | None = None) -> None:
        self.sessions = sessions
        self.protected = protected or ProtectedPaths()

    async def _root(self, session: str) -> Path:
        return self.sessions.workspace(await self.sessions.row(session))

    async def listing(self, session: str, path: str = "") -> dict[str, Any]:
        return await asyncio.to_thread(listing, await self._root(session), path, self.protected)

    async def files(self, session: str) -> dict[str, Any]:
        return await asyncio.to_thread(files, await self._root(session), self.protected)

    async def text(self, session: str, path: str) -> dict[str, Any]:
        return await asyncio.to_thread(text, await self._root(session), path, self.protected)

    async def raw(self, session: str, path: str) -> RawFile:
        return await asyncio.to_thread(raw, await self._root(session), path, self.protected)
