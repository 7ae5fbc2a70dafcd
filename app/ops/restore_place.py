"""Putting a verified restore in place, shared by `foya restore` from an archive
(app.ops.restore) and from a replica (app.ops.replica_restore).

The rules: a non-empty target is refused unless `replace` (then it is moved aside, never
deleted); a data directory a kernel holds is refused; every directory is staged beside its
target (same file system) and renamed into place, all of them or none.

Exception map: `RestoreRefused` (`restore_refused`, printed by the command line and exit status
2; never answered over HTTP), its message saying what to do.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from app.errors import FoyaError
from app.files import LOCK_NAME, fsync_dir

# How the service that the systemd recipe installs is stopped: what a refusal tells the operator.
STOP_SERVICE = "`sudo systemctl stop foya` for the systemd service"


class RestoreRefused(FoyaError):
    """A restore that would not be safe, or an archive or replica that does not verify."""

    code = "restore_refused"


def preflight(data_dir: Path, *, replace: bool, dry_run: bool) -> tuple[list[str], int | None]:
    """What would refuse a restore into `data_dir`, and the kernel lock held meanwhile (so no
    kernel starts on it). Not a dry run: the first refusal is raised, saying what to do."""
    refusals = []
    if nonempty(data_dir) and not replace:
        refusals.append(
            f"{data_dir} is not empty: stop the kernel that uses it ({STOP_SERVICE}) and pass "
            "--replace to move the current data aside (it is kept, not deleted)"
        )
    lock = None
    if data_dir.is_dir():
        try:
            lock = hold_if_locked(data_dir)
        except RestoreRefused as exc:
            refusals.append(exc.message)
    if refusals and not dry_run:
        if lock is not None:
            os.close(lock)
        raise RestoreRefused(refusals[0])
    return refusals, lock


def hold_if_locked(data_dir: Path) -> int | None:
    """Take the data dir's kernel lock without writing to it; refuse if a kernel holds it."""
    lock = data_dir / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RestoreRefused(
            f"a foya kernel is running on {data_dir}: stop it first ({STOP_SERVICE}), then "
            "restore again"
        ) from None
    return fd


def nonempty(path: Path) -> bool:
    return path.exists() and (not path.is_dir() or any(path.iterdir()))


def existing_ancestor(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


@dataclass
class Move:
    """One directory to put in place: staged beside its target (same file system), then
    renamed; undone by renaming back."""

    staged: Path
    target: Path
    aside: Path | None = None
    done: bool = False

    def apply(self) -> None:
        if nonempty(self.target):
            self.aside = _aside_name(self.target)
            os.rename(self.target, self.aside)
        elif self.target.is_dir():
            self.target.rmdir()
        self.target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.rename(self.staged, self.target)
        self.done = True
        fsync_dir(self.target.parent)

    def undo(self) -> None:
        if self.done:
            os.rename(self.target, self.staged)
        if self.aside is not None:
            os.rename(self.aside, self.target)


def put_in_place(moves: list[Move]) -> list[str]:
    """Rename every staged directory into place, or none of them; return notes naming the
    targets after the first and where each previous target was kept."""
    # One flush of everything written instead of an fsync per file (half the time of a
    # restore went there), before anything is renamed into place.
    os.sync()
    try:
        for move in moves:
            move.apply()
    except BaseException:
        for move in reversed(moves):
            move.undo()  # every target as it was
        raise
    notes = [f"restored {m.target}" for m in moves[1:]]
    return notes + [f"the previous {m.target} is kept at {m.aside}" for m in moves if m.aside]


def _aside_name(target: Path) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 1000):
        aside = target.with_name(f"{target.name}.replaced-{stamp}" + (f"-{n}" if n > 1 else ""))
        if not aside.exists():
            return aside
    raise RestoreRefused(f"cannot find a free name to move {target} aside")


def discard_staging(scratch: Path, moves: list[Move], lock: int | None) -> None:
    """Remove a restore's scratch directory and the staging of all but the data directory
    (renamed into place, or never), and release the data directory's lock."""
    shutil.rmtree(scratch, ignore_errors=True)
    for move in moves[1:]:
        shutil.rmtree(move.staged.parent, ignore_errors=True)
    if lock is not None:
        os.close(lock)


def stage_beside(source: Path, target: Path) -> Path:
    """A copy of `source` in a new directory beside `target` (same file system as `target`)."""
    base = existing_ancestor(target.parent)
    staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.restore-", dir=base)) / "tree"
    shutil.copytree(source, staged, symlinks=True)
    return staged
