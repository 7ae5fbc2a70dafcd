"""The file snapshot: the state kept outside foya.db, as rows of a second SQLite database that
Litestream replicates like foya.db (app.ops.replicate), so every replica transport and
point-in-time restore serve the files too.

`<data-dir>/replica-files.db` holds `files(root, path, mode, mtime_ns, size, sha256, data)`:
`root` is "data" (the data directory) or "home" (`~/.foya`), `path` is POSIX and relative to
it, `mode` the full `st_mode` (directories have rows too, without data, so empty directories
and their modes come back). A scan (`sync_tree`) compares each entry's (mode, mtime_ns, size)
with its row and rewrites only what differs (a file whose bytes hash the same keeps its blob),
deletes rows of what vanished, all in one transaction: a replica never holds half a scan.
Symlinks, sockets, FIFOs and devices are not data and are skipped; links are never followed.
Skipped at the top of the data directory: the database and this snapshot (with their WAL,
shared-memory and journal files and Litestream's meta directories: replicated on their own),
the lock, the socket, the log a tunnel-started kernel writes (it grows all the time),
`exports/` (archives made on demand), `replica/` (the generated Litestream config), the backup
status and backups' partial files.

`extract` writes the rows back under target directories, refusing (`SnapshotRefused`) a row
whose path leaves its target, whose type is not a file or directory, or whose bytes do not
match their hash; it creates files exclusively and never writes through a link.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.errors import FoyaError
from app.files import LOCK_NAME
from app.metrics import BACKUP_STATUS_FILE
from app.store import DB_NAME
from app.store.db import REPLICATED_AUTOCHECKPOINT

FILES_DB = "replica-files.db"
#: Files larger than this are left out (SQLite's blobs stop at 1 GB); `SyncStats.skipped`.
MAX_FILE = 512 * 1024 * 1024
_LIVE = frozenset(
    {LOCK_NAME, "kernel.sock", "kernel.log", BACKUP_STATUS_FILE, "exports", "replica"}
    | {f"{db}{suffix}" for db in (DB_NAME, FILES_DB) for suffix in ("", "-wal", "-shm", "-journal")}
    | {f".{DB_NAME}-litestream", f".{FILES_DB}-litestream"}
)
_PARTIAL = re.compile(r"\..*\.partial(\.d)?")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    mode INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT,
    data BLOB,
    PRIMARY KEY (root, path)
)
"""


class SnapshotRefused(FoyaError):
    """A snapshot row that cannot be written back safely."""

    status = 422
    code = "snapshot_refused"


@dataclass(frozen=True)
class SyncStats:
    """What one scan changed: rows written, rows removed, bytes of file data stored, and
    files left out for their size."""

    changed: int
    removed: int
    bytes: int
    skipped: tuple[str, ...] = ()


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, isolation_level=None)
    for pragma in (
        "PRAGMA busy_timeout=5000",
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=FULL",
        f"PRAGMA wal_autocheckpoint={REPLICATED_AUTOCHECKPOINT}",  # Litestream checkpoints
    ):
        conn.execute(pragma)
    conn.execute(_SCHEMA)
    db_path.chmod(0o600)  # it holds connections.json's API keys, among others
    return conn


def _entries(root: Path, top_skip: frozenset[str]) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(relative POSIX path, path, lstat) of every directory and regular file under `root`."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        at_top = here == root
        keep = []
        for name in sorted(dirnames):
            if at_top and (name in top_skip or _PARTIAL.fullmatch(name)):
                continue
            path = here / name
            with contextlib.suppress(FileNotFoundError):
                st = path.lstat()
                if stat.S_ISDIR(st.st_mode):  # a symlink to a directory is not walked
                    keep.append(name)
                    yield path.relative_to(root).as_posix(), path, st
        dirnames[:] = keep
        for name in sorted(filenames):
            if at_top and (name in top_skip or _PARTIAL.fullmatch(name)):
                continue
            path = here / name
            with contextlib.suppress(FileNotFoundError):
                st = path.lstat()
                if stat.S_ISREG(st.st_mode):
                    yield path.relative_to(root).as_posix(), path, st


def sync_tree(db_path: Path, roots: dict[str, Path]) -> SyncStats:
    """Bring the snapshot at `db_path` up to date with the trees in `roots` (name → directory;
    a missing directory has no rows). Returns what changed."""
    conn = _connect(db_path)
    try:
        known = {
            (r, p): (mode, mtime, size, sha)
            for r, p, mode, mtime, size, sha in conn.execute(
                "SELECT root, path, mode, mtime_ns, size, sha256 FROM files"
            )
        }
        seen: set[tuple[str, str]] = set()
        changed = stored = 0
        skipped: list[str] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for name, root in roots.items():
                top_skip = _LIVE if name == "data" else frozenset()
                for rel, path, st in _entries(root, top_skip) if root.is_dir() else ():
                    key = (name, rel)
                    old = known.get(key)
                    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_FILE:
                        skipped.append(f"{name}/{rel}")
                        continue
                    seen.add(key)
                    if old is not None and old[:3] == (st.st_mode, st.st_mtime_ns, st.st_size):
                        continue
                    written = _store(conn, key, path, st, old[3] if old else None)
                    if written is not None:
                        changed += 1
                        stored += written
            gone = [key for key in known if key not in seen]
            conn.executemany("DELETE FROM files WHERE root = ? AND path = ?", gone)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return SyncStats(changed, len(gone), stored, tuple(skipped))
    finally:
        conn.close()


def _store(
    conn: sqlite3.Connection,
    key: tuple[str, str],
    path: Path,
    st: os.stat_result,
    old_sha: str | None,
) -> int | None:
    """Write one row; the bytes of file data stored, or None if the file vanished meanwhile."""
    if stat.S_ISDIR(st.st_mode):
        conn.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, NULL, NULL)",
            (*key, st.st_mode, st.st_mtime_ns, st.st_size),
        )
        return 0
    try:
        # O_NOFOLLOW: a file replaced by a link since it was listed is not read through it.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # vanished, or turned into a link, since it was listed
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())  # what we read is what we describe
        data = f.read()
    sha = hashlib.sha256(data).hexdigest()
    if sha == old_sha:  # touched, not changed: keep the stored blob
        conn.execute(
            "UPDATE files SET mode = ?, mtime_ns = ?, size = ? WHERE root = ? AND path = ?",
            (st.st_mode, st.st_mtime_ns, len(data), *key),
        )
        return 0
    conn.execute(
        "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
        (*key, st.st_mode, st.st_mtime_ns, len(data), sha, data),
    )
    return len(data)


def _target_path(target: Path, rel: str) -> Path:
    parts = rel.split("/")  # as stored: PurePosixPath would quietly drop "." and "//"
    if "\0" in rel or any(p in ("..", ".", "") for p in parts):
        raise SnapshotRefused(f"the file snapshot holds an unsafe path: {rel!r}")
    return target.joinpath(*parts)


def extract(db_path: Path, targets: dict[str, Path]) -> int:
    """Write the snapshot's rows of each root in `targets` under its directory (created if
    missing); rows of other roots are ignored. Returns the number of files written.

    Files are created exclusively (an existing file, or a link in its place, is refused), with
    their mode and mtime; directory modes are applied last, deepest first."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    dirs: list[tuple[Path, int, int]] = []
    written = 0
    try:
        try:
            if conn.execute("PRAGMA quick_check").fetchone() != ("ok",):
                raise SnapshotRefused(f"{db_path}: the files snapshot is damaged")
            rows = conn.execute(
                "SELECT root, path, mode, mtime_ns, sha256, data FROM files ORDER BY root, path"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise SnapshotRefused(f"{db_path} is not a files snapshot ({exc})") from None
        for root, rel, mode, mtime_ns, sha, data in rows:
            if root not in targets:
                continue
            target = targets[root]
            target.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = _target_path(target, rel)
            _parent_inside(target, path)
            if stat.S_ISDIR(mode):
                path.mkdir(mode=0o700, exist_ok=True)
                if not stat.S_ISDIR(path.lstat().st_mode):
                    raise SnapshotRefused(f"{root}/{rel}: something that is not a directory")
                dirs.append((path, mode, mtime_ns))
            elif stat.S_ISREG(mode):
                if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != sha:
                    raise SnapshotRefused(f"{root}/{rel}: its bytes do not match their hash")
                _write_new(path, data, stat.S_IMODE(mode), mtime_ns)
                written += 1
            else:
                raise SnapshotRefused(f"{root}/{rel}: neither a file nor a directory")
    finally:
        conn.close()
    for path, mode, mtime_ns in sorted(dirs, key=lambda d: len(d[0].parts), reverse=True):
        path.chmod(stat.S_IMODE(mode))
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return written


def _parent_inside(target: Path, path: Path) -> None:
    """Create `path`'s parent directories under `target`, refusing to pass through a link."""
    here = target
    for part in path.relative_to(target).parts[:-1]:
        here = here / part
        try:
            here.mkdir(mode=0o700)
        except FileExistsError:
            if not stat.S_ISDIR(here.lstat().st_mode):
                raise SnapshotRefused(f"{here}: not a directory (a link?)") from None


def _write_new(path: Path, data: bytes, mode: int, mtime_ns: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise SnapshotRefused(f"{path} exists already: extract into an empty place") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, mode)
    os.utime(path, ns=(mtime_ns, mtime_ns))
