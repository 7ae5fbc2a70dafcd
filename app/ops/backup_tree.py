"""The files around a backup: walking the trees it copies, and clearing what killed runs left.

A run writes `.<archive name>.partial` (holding an flock on it while it runs) and a scratch
directory `.<archive name>.partial.d` beside it for the database snapshot. A killed run leaves
both behind; `remove_stale_partials` deletes those of one archive name and of every dated
`foya-backup-<stamp>.tar`, only when no running backup holds the lock, and never any other file.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

PARTIAL, SCRATCH = ".partial", ".partial.d"
_DATED_PARTIAL = re.compile(r"\.foya-backup-\d{8}T\d{6}Z\.tar\.partial")


def sources(
    root: Path, prefix: str, skipped: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(archive name, path, lstat) of every directory, regular file and symlink under `root`
    (except the top-level names in `skipped`), parents before children; sockets, FIFOs and
    devices are not data. What vanishes meanwhile is left out."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        rel = here.relative_to(root)
        if rel != Path("."):
            yield f"{prefix}/{rel.as_posix()}", here, here.lstat()
        for name in sorted(filenames) + [d for d in dirnames if (here / d).is_symlink()]:
            path = here / name
            if here == root and name in skipped:
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                yield f"{prefix}/{path.relative_to(root).as_posix()}", path, st


def partial_paths(archive: Path) -> tuple[Path, Path]:
    """The partial file a backup to `archive` writes, and its scratch directory."""
    return (
        archive.with_name(f".{archive.name}{PARTIAL}"),
        archive.with_name(f".{archive.name}{SCRATCH}"),
    )


def remove_stale_partials(archive: Path) -> list[Path]:
    """Delete what killed backups left beside `archive`: the partial file (and its scratch
    directory) of `archive` itself and of any dated backup, unless a running backup holds it.
    Returns the partial files removed."""
    own = f".{archive.name}{PARTIAL}"
    removed = []
    with os.scandir(archive.parent) as entries:
        found = [
            Path(e.path)
            for e in entries
            if (e.name == own or _DATED_PARTIAL.fullmatch(e.name))
            and e.is_file(follow_symlinks=False)
        ]
    for partial in found:
        try:
            fd = os.open(partial, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a backup is writing it right now
            shutil.rmtree(partial.with_name(partial.name + ".d"), ignore_errors=True)
            partial.unlink(missing_ok=True)
            removed.append(partial)
        finally:
            os.close(fd)
    return removed
