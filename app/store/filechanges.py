"""Recorded file changes read back as spans, for file review and rewind."""

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
    # The changes cut where someone else edited the file in between (a change's before-image
    # is not the previous one's after-image): each run's (before, after), oldest first.
    # Empty means one run, (before, after).
    runs: tuple[tuple[FileImage, FileImage], ...] = ()


_Key = tuple[bool, int | None, str | None]


def _key(exists: bool, mode: int | None, blob: str | None) -> _Key:
    return (True, mode, blob) if exists else (False, None, None)


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
    # Per path, the (before, after) image keys where the chain of changes breaks.
    breaks: dict[str, list[tuple[_Key, _Key]]] = {}
    for seq, path, b_exists, b_mode, a_mode, b_blob, a_blob in conn.execute(
        sql + " ORDER BY fc.event_seq", (session, from_seq)
    ):
        first.setdefault(path, (seq, bool(b_exists), b_mode, b_blob))
        if path in last:
            _, p_mode, p_blob = last[path]
            prev: _Key = (p_blob is not None, p_mode, p_blob)
            if _key(bool(b_exists), b_mode, b_blob) != _key(*prev):
                breaks.setdefault(path, []).append((prev, (bool(b_exists), b_mode, b_blob)))
        last[path] = (seq, a_mode, a_blob)
    out = []
    for path, (first_seq, b_exists, b_mode, b_blob) in first.items():
        last_seq, a_mode, a_blob = last[path]
        before = _image(conn, b_exists, b_mode, b_blob)
        after = _image(conn, a_blob is not None, a_mode, a_blob)
        runs: tuple[tuple[FileImage, FileImage], ...] = ()
        if path in breaks:  # blobs are read only where someone edited the file in between
            images = [before]
            for end, start in breaks[path]:
                images += [_image(conn, *end), _image(conn, *start)]
            images.append(after)
            runs = tuple(zip(images[::2], images[1::2], strict=True))
        out.append(FileSpan(path, first_seq, last_seq, before, after, runs))
    return out


def _image(conn: sqlite3.Connection, exists: bool, mode: int | None, key: str | None) -> FileImage:
    if not exists:
        return FileImage(False)
    return FileImage(True, mode, blobs.get(conn, key) if key is not None else b"")
