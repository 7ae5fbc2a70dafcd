"""Atomic file writes and the file-system rules shared by the kernel, its tools and its CLI.

Write a temp file in the same directory, fsync it, rename it over the target, then fsync the
directory, so a crash leaves either the old or the new file and never a torn one.

Temp files are named `.<name>.foya-<12 hex>.tmp` (the name cut to 200 characters) and nothing
else of ours or of a user's is: a crash between creating one and renaming it leaves it behind,
and `remove_stray_temps` deletes exactly those of one target, never any other file.

`ProtectedPaths` is the one rule for what no workspace route or file tool may touch: Foya's
own data and secrets, whatever project directory happens to contain them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ConfigError
from app.failpoints import failpoint

#: Directories no file tool deletes, wherever they are: version control and Foya's own.
NEVER_DELETED = (".git", ".foya", ".agents")
_NAME_KEPT = 200  # a temp name stays below NAME_MAX (255) whatever the target's name
_TEMP = r"\.foya-[0-9a-f]{12}\.tmp"


def _temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name[:_NAME_KEPT]}.foya-{secrets.token_hex(6)}.tmp")


def remove_stray_temps(path: Path) -> list[Path]:
    """Delete the temp files a crash left beside `path` (only names `replace_atomic` makes for
    that very target); return them. A missing directory has none."""
    pattern = re.compile(r"\." + re.escape(path.name[:_NAME_KEPT]) + _TEMP)
    removed = []
    try:
        with os.scandir(path.parent) as entries:
            names = [e.name for e in entries if pattern.fullmatch(e.name) and e.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    for name in names:
        stray = path.parent / name
        with contextlib.suppress(FileNotFoundError):
            stray.unlink()
            removed.append(stray)
    if removed:
        fsync_dir(path.parent)
    return removed


def replace_atomic(
    path: Path,
    data: bytes,
    *,
    mode: int,
    owner: tuple[int, int] | None = None,
    point: str | None = None,
) -> None:
    """Replace `path` (its directory must exist) with `data` and exactly `mode`, atomically.

    `owner` (uid, gid) is given to the new file when it differs from ours; where we may not
    (not root, someone else's file) the file becomes ours, as any editor's save would make it.
    `point` names a failpoint passed once the temp file is complete, just before the rename."""
    tmp = _temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if owner is not None and owner != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(f.fileno(), *owner)
            os.fchmod(f.fileno(), mode)  # after chown, which clears set-id bits
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if point is not None:
            failpoint(point)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically; the file is created with `mode` from the start
    (missing parents are made private: this is for Foya's own files)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    replace_atomic(path, data, mode=mode)


def write_json_atomic(path: Path, value: Any, *, mode: int = 0o600) -> None:
    """Serialize `value` as indented JSON and write it atomically."""
    data = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).encode() + b"\n"
    write_bytes_atomic(path, data, mode=mode)


def read_versioned_list(path: Path, version: int, key: str, what: str) -> tuple[list[Any], str]:
    """The list under `key` of the JSON file `path` written as `{"version": version, key: [...]}`,
    and what is wrong with the file ("" if nothing; a missing file is an empty list). `what`
    names the file in that text. Our catalog files' one reader."""
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return [], ""
    except (OSError, ValueError) as exc:
        return [], f"unreadable: {exc}"
    if not isinstance(raw, dict) or raw.get("version") != version:
        return [], f"not a version {version} {what}"
    items = raw.get(key) or []
    if not isinstance(items, list):
        return [], f"{key}: not a list"
    return items, ""


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def owner_of(path: Path) -> tuple[int, int] | None:
    """(uid, gid) of an existing file, None if absent."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_uid, st.st_gid


def new_file_mode() -> int:
    """The mode `open(…, "w")` would give a new file: 0666 less the process umask (read from
    /proc, since setting the umask to learn it would race with other threads)."""
    umask = 0o022
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                umask = int(line.split()[1], 8)
    return 0o666 & ~umask


def restore_file(path: Path, *, exists: bool, mode: int | None, content: bytes | None) -> None:
    """Make `path` absent, or present with `content` and `mode`; idempotent, atomic per file.
    The directory is created as the user's tools would (umask), an existing file keeps its
    owner, and a crash can leave only temp files that `remove_stray_temps` knows."""
    if not exists:
        path.unlink(missing_ok=True)
        if path.parent.exists():
            fsync_dir(path.parent)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomic(
        path,
        content or b"",
        mode=mode if mode is not None else new_file_mode(),
        owner=owner_of(path),
        point="restore_staged",
    )


@dataclass(frozen=True)
class ProtectedPaths:
    """Files and directories (`roots`) no workspace route or file tool may read or change,
    whichever project contains them, except below an `allowed` directory (the data dir's
    managed workspaces: the user's files, like any project's). Paths are compared after
    resolving symbolic links and `..`."""

    roots: tuple[Path, ...] = ()
    allowed: tuple[Path, ...] = ()

    def resolved(self) -> ProtectedPaths:
        """The same rule with every root resolved now (resolve once, test many paths)."""
        return ProtectedPaths(_real(self.roots), _real(self.allowed))

    def holds(self, real: Path) -> bool:
        """Whether `real` (already resolved) is protected by this (already resolved) rule."""
        return any(real.is_relative_to(r) for r in self.roots) and not any(
            real.is_relative_to(a) for a in self.allowed
        )

    def covers(self, real: Path) -> bool:
        """Whether resolved path `real` is protected, the roots resolved as of now."""
        return self.resolved().holds(real)


def _real(paths: Iterable[Path]) -> tuple[Path, ...]:
    out: list[Path] = []
    for path in paths:
        absolute = Path(os.path.abspath(path))
        out += [absolute, absolute.resolve()]
    return tuple(dict.fromkeys(out))


LOCK_NAME = "kernel.lock"


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold a non-blocking exclusive flock on `<data-dir>/kernel.lock` (one kernel per data dir),
    with our PID written in it.

    A clean exit removes the file. After a crash it stays, naming a dead PID, but nobody holds
    its lock any more (the kernel's last descriptor closed with it), so the next start takes it.
    """
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_in(fd)
            os.close(fd)
            raise in_use(data_dir, holder) from None
        # A kernel that stopped meanwhile unlinked the file we opened: lock the current one.
        if _is_at(fd, path):
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        # Unlinked while we hold the lock, so that no one locks this file meanwhile.
        if _is_at(fd, path):
            with contextlib.suppress(OSError):
                path.unlink()
        os.close(fd)


def lock_holder(data_dir: Path) -> str | None:
    """The PID written in `<data-dir>/kernel.lock` if a running kernel holds it, else None.
    (Probing takes the lock for an instant: a kernel starting at that very moment is refused.)"""
    try:
        fd = os.open(data_dir / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _pid_in(fd)
    finally:
        os.close(fd)
    return None


def in_use(data_dir: Path, holder: str) -> ConfigError:
    """The refusal to start on a data directory a running kernel holds."""
    return ConfigError(f"--data-dir {data_dir}: another foya kernel (pid {holder}) is using it")


def _pid_in(fd: int) -> str:
    return os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"


def _is_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is the one `path` names now."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
