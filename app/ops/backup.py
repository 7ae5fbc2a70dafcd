"""`foya backup`: everything a kernel keeps, in one verifiable archive (`foya restore` reads it
back: app.ops.restore).

A backup is an uncompressed tar (mode 0600) holding `data/` (the data directory: a consistent
snapshot of `foya.db` taken with SQLite's backup API while the kernel runs, connections,
projects, artifacts, managed workspaces, …), `home/.foya/` when that directory exists, and last
`manifest.json`: format and schema versions, the head seq, when it was made, and the type, mode,
size and SHA-256 of every member. It is written under a temporary name and renamed when
complete, so a file with the final name is always a whole backup.

The temporary name is `.<archive name>.partial`, with the database snapshot in a scratch
directory beside it; what a killed run leaves there is cleared by the next backup into the same
directory (app.ops.backup_tree has the rules).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, NotRequired, TypedDict

from app import __version__
from app.errors import FoyaError
from app.failpoints import failpoint
from app.files import LOCK_NAME, fsync_dir, write_json_atomic
from app.metrics import BACKUP_STATUS_FILE
from app.ops.backup_tree import partial_paths, remove_stale_partials, sources
from app.store import DB_NAME
from app.store.backup import snapshot

FORMAT = "foya-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DATA, HOME = "data", "home/.foya"
# Live-only files: the lock, the socket and the database's own files (the snapshot stands in).
SKIPPED = frozenset(
    {LOCK_NAME, "kernel.sock", BACKUP_STATUS_FILE}
    | {DB_NAME + suffix for suffix in ("", "-wal", "-shm", "-journal")}
)
CHUNK = 1024 * 1024
# Files up to this size are read whole before they are archived, so a file rewritten during
# the backup is still archived as one consistent version.
WHOLE_FILE = 64 * 1024 * 1024

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


class BackupFailed(FoyaError):
    """A backup not written: a bad destination, or a file that changed while it was read."""

    code = "backup_failed"


@dataclass(frozen=True)
class Report:
    """What a backup wrote or a restore verified (and put in place, unless a dry run)."""

    archive: Path
    target: Path | None
    members: int
    bytes: int
    head_seq: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # what would refuse the real restore


class Member(TypedDict):
    """One member of the archive as the manifest records it."""

    path: str
    mode: int
    type: Literal["dir", "symlink", "file"]
    target: NotRequired[str]  # a symlink's
    size: NotRequired[int]  # a file's, with its digest
    sha256: NotRequired[str]


class Manifest(TypedDict):
    """`manifest.json`, the last member: what the archive holds and what made it."""

    format: str
    format_version: int
    foya_version: str
    schema_version: int
    head_seq: int
    created_at: str
    members: list[Member]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class _Writer:
    """Adds members to the archive and records each in the manifest."""

    def __init__(self, tar: tarfile.TarFile, total: int, progress: Progress | None) -> None:
        self.tar = tar
        self.members: list[Member] = []
        self.done, self.total, self.progress = 0, total, progress

    def add(self, name: str, path: Path, st: os.stat_result) -> None:
        """Archive one member; one deleted since it was listed is skipped (the kernel removes
        files at any time: deleted sessions, temp files of atomic writes)."""
        with contextlib.suppress(FileNotFoundError):
            self._add(name, path, st)

    def _add(self, name: str, path: Path, st: os.stat_result) -> None:
        info = tarfile.TarInfo(name)
        info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
        if stat.S_ISDIR(st.st_mode):
            info.type = tarfile.DIRTYPE
            self.tar.addfile(info)
            self.members.append(Member(path=name, mode=info.mode, type="dir"))
            return
        if stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
            self.tar.addfile(info)
            member = Member(path=name, mode=info.mode, type="symlink", target=info.linkname)
            self.members.append(member)
            return
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            digest = hashlib.sha256()
            if size <= WHOLE_FILE:
                data = f.read()
                digest.update(data)
                info.size = len(data)
                self.tar.addfile(info, io.BytesIO(data))
            else:
                info.size = size
                self.tar.addfile(info, _Hashing(f, size, digest, name))
        self.members.append(
            Member(
                path=name, mode=info.mode, type="file", size=info.size, sha256=digest.hexdigest()
            )
        )
        self.done += info.size
        if self.progress is not None:
            self.progress(self.done, max(self.total, self.done))


class _Hashing:
    """Reads exactly `size` bytes of a large file, hashing them; a file that shrank while it
    was read fails the backup instead of leaving a torn member."""

    def __init__(self, f: IO[bytes], size: int, digest: Any, name: str) -> None:
        self.f, self.left, self.digest, self.name = f, size, digest, name

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(self.left if n < 0 else min(n, self.left))
        if not data and self.left:
            raise BackupFailed(f"{self.name} shrank while it was being backed up; run it again")
        self.left -= len(data)
        self.digest.update(data)
        return data


def archive_path(dest: str | os.PathLike[str]) -> Path:
    """Where a backup to `dest` goes: a dated file inside `dest` when it is a directory (an
    existing one, or a path ending in `/`), else `dest` itself. A directory that does not
    exist, or the missing directory of a file, is refused: never create a file in its place."""
    raw = os.fspath(dest)
    path = Path(raw).resolve()
    if raw.endswith("/") or path.is_dir():
        if not path.is_dir():
            problem = "not a directory" if path.exists() else "directory does not exist"
            raise BackupFailed(f"{raw}: {problem}")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        return path / f"foya-backup-{stamp}.tar"
    if not path.parent.is_dir():
        raise BackupFailed(f"{raw}: directory {path.parent} does not exist")
    return path


def backup(
    data_dir: Path,
    dest: str | os.PathLike[str],
    *,
    home: Path | None = None,
    progress: Progress | None = None,
) -> Report:
    """Write a backup of `data_dir` (and `home`, e.g. ~/.foya, if it exists) to `dest` (a file,
    or a directory to put a dated file in: see `archive_path`). Safe while a kernel runs on
    `data_dir`."""
    started = time.monotonic()
    data_dir = data_dir.resolve()
    if not (data_dir / DB_NAME).is_file():
        raise BackupFailed(f"{data_dir} holds no {DB_NAME}: not a Foya data directory")
    archive = archive_path(dest)
    if archive.is_relative_to(data_dir):
        raise BackupFailed("the backup must be written outside the data directory it copies")
    if archive.exists():
        raise BackupFailed(f"{archive} exists; choose another name")
    found = list(sources(data_dir, DATA, SKIPPED))
    if home is not None and home.is_dir():
        found += [(HOME, home, home.lstat()), *sources(home, HOME)]
    total = sum(st.st_size for _, _, st in found if stat.S_ISREG(st.st_mode))
    total += (data_dir / DB_NAME).stat().st_size
    remove_stale_partials(archive)
    manifest = _write(archive, data_dir, found, total, progress)
    size = archive.stat().st_size
    write_json_atomic(
        data_dir / BACKUP_STATUS_FILE,
        {
            "last_success_at": manifest["created_at"],
            "last_success_unix": time.time(),
            "archive": str(archive),
            "bytes": size,
            "head_seq": manifest["head_seq"],
        },
    )
    elapsed = time.monotonic() - started
    return Report(archive, None, len(manifest["members"]), size, manifest["head_seq"], elapsed)


Source = tuple[str, Path, os.stat_result]  # (archive name, path, lstat)


def _write(
    archive: Path, data_dir: Path, found: list[Source], total: int, progress: Progress | None
) -> Manifest:
    """Write the archive under its partial name, then rename it to `archive`; the partial file
    is locked while it is written and removed if the run fails."""
    partial, scratch = partial_paths(archive)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    lock = os.dup(fd)  # the same open file: the lock outlives `out` until the rename is done
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        scratch.mkdir(mode=0o700)
        with os.fdopen(fd, "wb") as out:
            manifest = _archive(out, data_dir, scratch, found, total, progress)
            out.flush()
            os.fsync(out.fileno())
        failpoint("backup_written")
        os.replace(partial, archive)
        fsync_dir(archive.parent)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        os.close(lock)
    return manifest


def _archive(
    out: IO[bytes],
    data_dir: Path,
    scratch: Path,
    found: list[Source],
    total: int,
    progress: Progress | None,
) -> Manifest:
    """The tar itself: the data dir, a snapshot of its database, the rest, then the manifest."""
    copy = scratch / DB_NAME
    info = snapshot(data_dir / DB_NAME, copy)
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        writer = _Writer(tar, total, progress)
        writer.add(DATA, data_dir, data_dir.lstat())
        writer.add(f"{DATA}/{DB_NAME}", copy, copy.stat())
        for name, path, st in found:
            writer.add(name, path, st)
        manifest = Manifest(
            format=FORMAT,
            format_version=FORMAT_VERSION,
            foya_version=__version__,
            schema_version=info.schema_version,
            head_seq=info.head_seq,
            created_at=_now(),
            members=writer.members,
        )
        body = json.dumps(manifest, indent=1).encode()
        entry = tarfile.TarInfo(MANIFEST)
        entry.size, entry.mode, entry.mtime = len(body), 0o600, int(time.time())
        tar.addfile(entry, io.BytesIO(body))
    return manifest
