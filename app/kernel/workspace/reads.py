"""Reading a workspace: a directory's entries, the whole tree, a file as text or as bytes.

Reads follow symbolic links that stay inside the workspace. A file is opened first and the
opened descriptor's real path is checked (via /proc/self/fd), so a link swapped in after the
check still cannot lead outside. Protected paths are never listed into or read.

The tree (`GET …/workspace/files`) is Foya's: every directory and file, depth first, each
directory's entries sorted by their lower-cased name, symbolic links and special files left
out, the directories Foya never lists (`.git`, `node_modules`, build output…) skipped, at most
10,000 entries.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from typing_extensions import TypedDict

from app.events import iso_time
from app.files import ProtectedPaths
from app.kernel.workspace.paths import (
    BinaryFile,
    FileTooLarge,
    InvalidWorkspacePath,
    WorkspaceFileNotFound,
    refuse_protected,
    relative,
    resolve,
)

MAX_LISTED = 5000
MAX_TREE = 10_000
MAX_TEXT = 2 * 1024 * 1024
MAX_RAW = 32 * 1024 * 1024
SKIPPED_DIRS = frozenset(
    {".git", ".idea", ".next", ".nuxt", ".turbo", "coverage", "dist", "node_modules", "target"}
    | {"vendor"}
)


class TreeEntry(TypedDict):
    """One entry of the tree: the client's `WorkspaceEntry`."""

    path: str
    name: str
    is_dir: bool


class DirectoryEntry(TypedDict):
    """One entry of a directory listing."""

    name: str
    path: str
    kind: Literal["dir", "file", "other"]
    size: int
    modified_at: str


class Listing(TypedDict):
    root: str
    path: str
    entries: list[DirectoryEntry]
    truncated: bool


@dataclass(frozen=True)
class RawFile:
    """A workspace file's bytes for `media=1`."""

    data: bytes
    media_type: str


def _entry(root: Path, path: Path, st: os.stat_result) -> DirectoryEntry:
    kind: Literal["dir", "file", "other"] = (
        "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
    )
    return {
        "name": path.name,
        "path": relative(root, path),
        "kind": kind,
        "size": st.st_size if kind == "file" else 0,
        "modified_at": iso_time(st.st_mtime_ns),
    }


def listing(root: Path, rel: str, protected: ProtectedPaths) -> Listing:
    """The entries of one directory (default: the root), directories first."""
    directory = resolve(root, rel, protected, allow_root=True)
    if not directory.is_dir():
        raise WorkspaceFileNotFound(f"{rel or '.'} is not a directory in the workspace")
    entries: list[DirectoryEntry] = []
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
        "path": relative(root, directory) if directory != root.resolve() else "",
        "entries": entries,
        "truncated": len(entries) >= MAX_LISTED,
    }


def _children(directory: Path) -> list[tuple[str, bool]]:
    """(name, is a directory) of the directories and regular files in `directory`, sorted as
    Foya sorts them; an unreadable directory has none."""
    out = []
    try:
        with os.scandir(directory) as it:
            for item in it:
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode) and item.name not in SKIPPED_DIRS:
                    out.append((item.name, True))
                elif stat.S_ISREG(st.st_mode):
                    out.append((item.name, False))
    except OSError:
        return []
    out.sort(key=lambda child: child[0].lower())
    return out


def _walk(real_root: Path, rule: ProtectedPaths) -> Iterator[TreeEntry]:
    # An explicit stack, not recursion: a deep tree must not hit Python's recursion limit.
    stack = [iter(_children(real_root))]
    dirs = [real_root]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            dirs.pop()
            continue
        name, is_dir = child
        path = dirs[-1] / name
        if rule.holds(path):
            continue
        yield {"path": path.relative_to(real_root).as_posix(), "name": name, "is_dir": is_dir}
        if is_dir:
            stack.append(iter(_children(path)))
            dirs.append(path)


def tree(root: Path, protected: ProtectedPaths) -> list[TreeEntry]:
    """Every directory and file of the workspace, depth first (see the module docstring)."""
    real_root = root.resolve()
    if not real_root.is_dir():
        raise WorkspaceFileNotFound(f"the workspace {root} does not exist")
    out: list[TreeEntry] = []
    for entry in _walk(real_root, protected.resolved()):
        out.append(entry)
        if len(out) >= MAX_TREE:
            break
    return out


def _read(root: Path, rel: str, limit: int, protected: ProtectedPaths) -> tuple[bytes, int]:
    """(up to `limit` bytes, full size) of a regular file inside the workspace."""
    path = resolve(root, rel, protected)
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
        refuse_protected(rel, real, protected)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidWorkspacePath(f"path: {rel!r} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit), st.st_size
    finally:
        os.close(fd)


def existing_file(root: Path, rel: str, protected: ProtectedPaths) -> str:
    """`rel` as the canonical relative path of a regular file in the workspace (what a turn's
    `workspace_files` names): not a symbolic link itself (as in Foya), inside the workspace
    and not protected once resolved. `WorkspaceFileNotFound` or `InvalidWorkspacePath`
    otherwise. Blocking."""
    clean = os.path.normpath(rel) if rel else rel  # `a/../b` is `b`, as Foya cleans it
    try:
        target = resolve(root, clean, protected)
        st = os.lstat(root.resolve() / clean)
    except (FileNotFoundError, NotADirectoryError):
        raise WorkspaceFileNotFound(f"{rel} does not exist in the workspace") from None
    except OSError:
        raise InvalidWorkspacePath(f"path: {rel!r} is not a readable file") from None
    if stat.S_ISLNK(st.st_mode):
        raise InvalidWorkspacePath(f"path: {rel!r} is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise InvalidWorkspacePath(f"path: {rel!r} is not a regular file")
    return relative(root, target)


def text(root: Path, rel: str, protected: ProtectedPaths) -> str:
    """A file's text, as Foya previews it: whole, UTF-8, at most 2 MiB."""
    data, size = _read(root, rel, MAX_TEXT + 1, protected)
    if size > MAX_TEXT:
        raise FileTooLarge(f"{rel} is larger than 2 MiB: files that large are not previewed")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise BinaryFile(f"{rel} is not UTF-8 text: read it with media=1") from None


def raw(root: Path, rel: str, protected: ProtectedPaths) -> RawFile:
    """A file's bytes and media type (`media=1`), up to `MAX_RAW`."""
    data, size = _read(root, rel, MAX_RAW + 1, protected)
    if size > MAX_RAW:
        raise FileTooLarge(f"{rel} is larger than {MAX_RAW // (1024 * 1024)} MiB")
    return RawFile(data, mimetypes.guess_type(rel)[0] or "application/octet-stream")
