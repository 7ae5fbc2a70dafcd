"""Consistent copies of a live `foya.db`: the SQLite backup API, never a file copy of a database
whose WAL may hold committed transactions.

`snapshot` copies every page in one backup step, which reads inside one transaction: the copy
is the database as of one instant, while the kernel keeps appending (WAL readers never block
its writer). `inspect` opens a copy read-only and reports what a restore must verify.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from app.errors import FoyaError
from app.store.schema import VERSION, SchemaTooNew


class DatabaseDamaged(FoyaError):
    """A database copy failed SQLite's integrity check."""

    code = "database_damaged"


@dataclass(frozen=True)
class DatabaseInfo:
    schema_version: int
    head_seq: int


def _readonly(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


def snapshot(live: Path, copy: Path) -> DatabaseInfo:
    """Copy the database at `live` into a new file `copy` (a self-contained rollback-journal
    database, mode 0600); return the copy's schema version and head seq."""
    os.close(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    source = _readonly(live)
    try:
        target = sqlite3.connect(copy, isolation_level=None)
        try:
            source.backup(target, pages=-1)  # one step: one read transaction, one instant
            # A single file, readable without its -wal/-shm; the kernel turns WAL back on.
            target.execute("PRAGMA journal_mode=DELETE")
        finally:
            target.close()
    finally:
        source.close()
    return inspect(copy, integrity=False)


def inspect(path: Path, *, integrity: bool = True) -> DatabaseInfo:
    """Schema version and head seq of a database file; with `integrity`, raise
    `DatabaseDamaged` unless SQLite's quick check passes."""
    try:
        conn = _readonly(path)
    except sqlite3.DatabaseError as exc:
        raise DatabaseDamaged(f"cannot open the database copy: {exc}") from None
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > VERSION:
            raise SchemaTooNew(
                f"the database schema is version {version}, but this Foya knows only up to "
                f"{VERSION}; upgrade Foya first"
            )
        if integrity:
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
            if result != "ok":
                raise DatabaseDamaged(f"the database copy is damaged: {result}")
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        return DatabaseInfo(version, int(row[0]) if row else 0)
    except sqlite3.DatabaseError as exc:
        raise DatabaseDamaged(f"not a readable database: {exc}") from None
    finally:
        conn.close()
