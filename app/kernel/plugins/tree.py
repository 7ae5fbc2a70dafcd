"""Files of plugin packages: copying a package in, reading its small files, and the checks that
keep every path inside its package.

A package is copied file by file into a private staging directory; nothing in it is run. The
copy refuses any symbolic link (as Foya does: a link can point anywhere, now or later) and any
file that is not a regular file or directory, skips `.git` directories, and stops at a count
and size limit. A source is opened with `O_NOFOLLOW`, so a file swapped for a link during the
copy is refused too.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from app.kernel.plugins.models import Problem

MAX_DEPTH = 32


def inside(child: str | Path, root: str | Path) -> bool:
    """Whether the absolute `child` is `root` or below it (no resolution of links)."""
    child, root = os.path.abspath(child), os.path.abspath(root)
    return child == root or child.startswith(root.rstrip(os.sep) + os.sep)


def resolved_inside(child: str | Path, root: str | Path) -> bool:
    """Whether `child` exists and its real path lies inside the real path of `root`."""
    try:
        return inside(os.path.realpath(child, strict=True), os.path.realpath(root, strict=True))
    except (OSError, RuntimeError):
        return False


def read_limited(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path` (not a link), at most `limit` of them. Raises
    `Problem` when it is not one or is larger, `FileNotFoundError` when it is absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise Problem(f"{path.name}: {exc.strerror or 'cannot be read'}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Problem(f"{path.name} is not a regular file")
        if st.st_size > limit:
            raise Problem(f"{path.name} exceeds {limit} bytes")
        return f.read(limit + 1)[:limit]


def copy_tree(source: Path, target: Path, *, max_files: int, max_bytes: int) -> None:
    """Copy the package at `source` into the existing, empty directory `target` (directories
    0700, files keeping only their owner's permission bits). Raises `Problem` naming the first
    link, special file or limit met."""
    budget = [max_files, max_bytes]

    def visit(src: str, dst: str, rel: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Problem(f"package nests directories deeper than {MAX_DEPTH}: {rel}")
        try:
            entries = sorted(os.scandir(src), key=lambda e: e.name)
        except OSError as exc:
            raise Problem(f"{rel or '.'}: {exc.strerror or 'cannot be read'}") from None
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                raise Problem(f"symbolic links are not accepted in a plugin: {path}")
            if entry.is_dir(follow_symlinks=False):
                if entry.name == ".git":
                    continue
                os.mkdir(os.path.join(dst, entry.name), 0o700)
                visit(entry.path, os.path.join(dst, entry.name), path, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                _copy_file(entry.path, os.path.join(dst, entry.name), path, budget)
            else:
                raise Problem(f"a plugin holds only regular files and directories: {path}")

    visit(str(source), str(target), "", 0)


def _copy_file(src: str, dst: str, rel: str, budget: list[int]) -> None:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise Problem(f"{rel}: {exc.strerror or 'cannot be read'}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Problem(f"a plugin holds only regular files and directories: {rel}")
        budget[0] -= 1
        budget[1] -= st.st_size
        if budget[0] < 0 or budget[1] < 0:
            raise Problem("the package exceeds the installation limits (files or bytes)")
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(out, "wb") as g:
            shutil.copyfileobj(f, g)
            os.fchmod(g.fileno(), stat.S_IMODE(st.st_mode) & 0o700 | 0o600)


def remove_tree(path: Path) -> None:
    """Remove `path` (a directory, or a link to one: only the link) if it exists."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
