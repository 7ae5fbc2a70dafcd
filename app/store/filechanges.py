"""Recorded file changes read back as spans, for file review and rewind (seed 000 "文件 Blob")."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from app.store import blobs
from app.store.journals import FileImage


@dataclass(frozen=True)
class FileSpan:
    """What the agent did to one path over a range of changes: the file as it was before the
    first change and as the last change left it."""

    path: str
    first_seq: int
    last_seq: int
    before: FileImage
    after: FileImage


def spans(
    conn: sqlite3.Connection, session: str, *, from_seq: int = 0, pending_only: bool = False
) -> list[FileSpan]:
    """One span per path changed by `session`'s active messages at or after `from_seq`, in the
    order the paths were first changed. Changes of rewound (inactive) messages are history,
    not the files' present; `pending_only` keeps the changes nobody has reviewed yet."""
    sql = (
        "SELECT fc.event_seq, fc.path, fc.before_exists, fc.before_mode, fc.after_mode,"
        " fc.before_blob_hash, fc.after_blob_hash"
        " FROM file_changes AS fc JOIN message_projection AS mp ON mp.event_seq = fc.event_seq"
        " WHERE fc.session_id = ? AND fc.event_seq >= ? AND mp.active = 1"
    )
    if pending_only:
        sql += " AND fc.review_state = 'pending'"
    first: dict[str, tuple[int, bool, int | None, str | None]] = {}
    last: dict[str, tuple[int, int | None, str | None]] = {}
    for seq, path, b_exists, b_mode, a_mode, b_blob, a_blob in conn.execute(
        sql + " ORDER BY fc.event_seq", (session, from_seq)
    ):
        first.setdefault(path, (seq, bool(b_exists), b_mode, b_blob))
        last[path] = (seq, a_mode, a_blob)
    out = []
    for path, (first_seq, b_exists, b_mode, b_blob) in first.items():
        last_seq, a_mode, a_blob = last[path]
        before = _image(conn, b_exists, b_mode, b_blob)
        after = _image(conn, a_blob is not None, a_mode, a_blob)
        out.append(FileSpan(path, first_seq, last_seq, before, after))
    return out


def _image(conn: sqlite3.Connection, exists: bool, mode: int | None, key: str | None) -> FileImage:
    if not exists:
        return FileImage(False)
    return FileImage(True, mode, blobs.get(conn, key) if key is not None else b"")
