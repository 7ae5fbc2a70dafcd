"""Staging directories: where multi-file work is built before it is moved into place.

The convention (one home for it): everything under `<data-dir>/.staging/` is disposable at
start. A job that writes several files (an import's artifacts and workspaces, a plugin's
unpacked archive) builds them in `new_staging(root, kind)`, commits its store change, and only
then moves them into place; a crash in between leaves files only under `.staging/`, which
`sweep(root)` deletes on the next start, before anything could be staging again.

A job whose files must follow its commit (an import's images belong to committed messages)
calls `place(staging, moves)` right after committing: it first writes the list of moves into
the staging directory (`PLACE`, atomically), then makes them. If a crash cuts the moves short,
`sweep` finishes them before deleting the rest: before the list, nothing was committed to
keep; after it, everything on it ends in place.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
from pathlib import Path

from app.failpoints import failpoint
from app.files import fsync_dir, write_json_atomic

STAGING = ".staging"
_KIND = re.compile(r"[a-z][a-z0-9-]{0,31}")
PLACE = "PLACE"  # the list of moves a committed job still owes


def staging_root(root: Path) -> Path:
    """The `.staging` directory of the data directory `root` (it may not exist yet)."""
    return root / STAGING


def new_staging(root: Path, kind: str) -> Path:
    """Create and return a fresh, private (0700) `<root>/.staging/<kind>-<random>/` directory.

    The name is created with an exclusive `mkdir`, so two callers never share one; `kind` is a
    short lowercase word (e.g. `import`, `plugin`) that says in a listing what left it."""
    if not _KIND.fullmatch(kind):
        raise ValueError(f"bad staging kind {kind!r}")
    parent = staging_root(root)
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    while True:
        path = parent / f"{kind}-{secrets.token_hex(8)}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # a 64-bit collision: draw again
            continue
        return path


def sweep(root: Path) -> list[Path]:
    """Delete everything under `<root>/.staging/` (call it at start, before any staging);
    return the top-level entries removed. A missing `.staging` has nothing to sweep."""
    parent = staging_root(root)
    try:
        with os.scandir(parent) as entries:
            names = sorted(e.name for e in entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for name in names:
        path = parent / name
        if (path / PLACE).is_file() and not path.is_symlink():
            with contextlib.suppress(OSError, ValueError):
                _finish(root, path)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def place(staging: Path, moves: list[tuple[Path, Path]]) -> None:
    """Move each (source in `staging`, target) into place, durably recorded first so that a
    crash midway is finished by the next `sweep`. A target's parent must exist; a source
    already gone (moved before a crash) is skipped."""
    write_json_atomic(staging / PLACE, [[str(s), str(t)] for s, t in moves])
    failpoint("staging_place")
    _moves(moves)


def _finish(root: Path, staging: Path) -> None:
    listed = json.loads((staging / PLACE).read_bytes())
    inside = root.resolve()
    moves = []
    for source, target in listed:
        src, dst = Path(source), Path(target)
        # Only our own moves: out of this staging directory, into the data directory.
        if src.is_relative_to(staging) and dst.resolve().is_relative_to(inside):
            moves.append((src, dst))
    _moves(moves)


def _moves(moves: list[tuple[Path, Path]]) -> None:
    parents = set()
    for source, target in moves:
        if not os.path.lexists(source) or os.path.lexists(target):
            continue
        try:
            os.replace(source, target)
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # another file system: copy, then remove
                raise
            shutil.move(source, target)
        parents.add(target.parent)
    for parent in parents:
        fsync_dir(parent)


def sweep_staging(data_dir: Path) -> list[Path]:
    """Alias of `sweep` under the name the start-up code calls."""
    return sweep(data_dir)
