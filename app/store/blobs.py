"""File contents keyed by SHA-256, gzip-compressed, stored once."""

from __future__ import annotations

import gzip
import hashlib
import sqlite3
from collections.abc import Iterable

from app.errors import FoyaError


class BlobMissing(FoyaError):
    """An event referenced a blob that is not stored."""

    code = "blob_missing"


class BlobCorrupt(FoyaError):
    """A stored blob does not decompress to the content its hash names."""

    code = "blob_corrupt"


def digest(data: bytes) -> str:
    """The blob key of `data`."""
    return hashlib.sha256(data).hexdigest()


def put(conn: sqlite3.Connection, data: bytes) -> str:
    """Store `data` once; return its hash."""
    key = digest(data)
    conn.execute(
        "INSERT OR IGNORE INTO file_blobs(hash, codec, raw_size, data) VALUES (?, 'gzip', ?, ?)",
        (key, len(data), gzip.compress(data, compresslevel=6, mtime=0)),
    )
    return key


def get(conn: sqlite3.Connection, key: str) -> bytes:
    """The content of blob `key`, verified against its hash."""
    row = conn.execute("SELECT data FROM file_blobs WHERE hash = ?", (key,)).fetchone()
    if row is None:
        raise BlobMissing(f"blob {key} is not stored")
    data = _decompress(row[0])
    if data is None or digest(data) != key:
        raise BlobCorrupt(f"blob {key} does not match its hash")
    return data


def _decompress(stored: bytes) -> bytes | None:
    try:
        return gzip.decompress(stored)
    except (OSError, EOFError):
        return None


def matches(key: str, stored: bytes) -> bool:
    """Whether gzip data `stored` decompresses to content hashing to `key`."""
    data = _decompress(stored)
    return data is not None and digest(data) == key


def require(conn: sqlite3.Connection, keys: Iterable[str | None]) -> None:
    """Raise `BlobMissing` unless every non-null key is stored."""
    for key in keys:
        if key is not None and (
            conn.execute("SELECT 1 FROM file_blobs WHERE hash = ?", (key,)).fetchone() is None
        ):
            raise BlobMissing(f"blob {key} is not stored")


def collect_garbage(conn: sqlite3.Connection, candidates: Iterable[str] | None = None) -> int:
    """Delete blobs no file change or rewind journal references (only among `candidates` when
    given); return how many."""
    if candidates is not None:
        wanted = sorted(candidates)
        if not wanted:
            return 0
        marks = ",".join("?" * len(wanted))
        return _delete_unreferenced(conn, f"hash IN ({marks}) AND ", wanted)
    return _delete_unreferenced(conn, "", [])


def _delete_unreferenced(conn: sqlite3.Connection, where: str, args: list[str]) -> int:
    cur = conn.execute(
        f"""
        DELETE FROM file_blobs WHERE {where}hash NOT IN (
            SELECT before_blob_hash FROM file_changes WHERE before_blob_hash IS NOT NULL
            UNION SELECT after_blob_hash FROM file_changes WHERE after_blob_hash IS NOT NULL
            UNION SELECT original_blob_hash FROM file_rewind_journal_files
                WHERE original_blob_hash IS NOT NULL
            UNION SELECT target_blob_hash FROM file_rewind_journal_files
                WHERE target_blob_hash IS NOT NULL
        )
        """,
        args,
    )
    return cur.rowcount
