"""Durable file journals: how a multi-file restore, or one tool's file change, survives a crash.

Protocol: (1) `create` records every file's original and target image (blobs) in one
transaction; (2) files are written; (3) the event that records it (`history_rewound`, the review
event, or the tool's `message_end`) is appended and the journal deleted in one transaction. A
journal still present at startup means step 3 never committed, so recovery puts every file that
is exactly its target image back to its original image (idempotent) and deletes the journal:
history and files then agree again.

A tool's change is a one-file journal whose action is `TOOL_CHANGE` (target_user_seq 0).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from app.store import blobs

TOOL_CHANGE = "tool_change"  # the action of a tool's one-file journal (write, edit, delete)


@dataclass(frozen=True)
class FileImage:
    """A file's state: absent, or present with a mode and content."""

    exists: bool
    mode: int | None = None
    content: bytes | None = None


@dataclass(frozen=True)
class JournalFile:
    """One file of a rewind: what it was before and what the rewind makes it.

    An image read back from a damaged blob is None: recovery cannot restore that file."""

    path: str
    original: FileImage | None
    target: FileImage | None
    action: str


@dataclass(frozen=True)
class Journal:
    id: int
    session: str
    target_user_seq: int
    files: list[JournalFile]

    @property
    def tool_change(self) -> bool:
        """Whether this journals a tool's file change (not a rewind or review restore)."""
        return bool(self.files) and all(f.action == TOOL_CHANGE for f in self.files)


def _store(conn: sqlite3.Connection, image: FileImage) -> str | None:
    return blobs.put(conn, image.content) if image.exists and image.content is not None else None


def create(
    conn: sqlite3.Connection,
    session: str,
    target_user_seq: int,
    files: list[JournalFile],
    now_ns: int,
) -> int:
    """Record a rewind about to touch `files`; return the journal id."""
    cur = conn.execute(
        "INSERT INTO file_rewind_journals(session_id, target_user_seq, state, created_at_ns)"
        " VALUES (?, ?, 'applying', ?)",
        (session, target_user_seq, now_ns),
    )
    journal = cur.lastrowid
    for f in files:
        assert f.original is not None and f.target is not None, "a new journal has both images"
        conn.execute(
            "INSERT INTO file_rewind_journal_files(journal_id, path, original_exists,"
            " original_mode, original_blob_hash, target_exists, target_mode, target_blob_hash,"
            " action) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                journal,
                f.path,
                int(f.original.exists),
                f.original.mode,
                _store(conn, f.original),
                int(f.target.exists),
                f.target.mode,
                _store(conn, f.target),
                f.action,
            ),
        )
    assert journal is not None
    return journal


def pending(conn: sqlite3.Connection) -> list[Journal]:
    """Journals whose rewind never committed, with their file images loaded."""
    out = []
    for jid, session, target in conn.execute(
        "SELECT id, session_id, target_user_seq FROM file_rewind_journals ORDER BY id"
    ).fetchall():
        files = []
        for row in conn.execute(
            "SELECT path, original_exists, original_mode, original_blob_hash, target_exists,"
            " target_mode, target_blob_hash, action FROM file_rewind_journal_files"
            " WHERE journal_id = ? ORDER BY path",
            (jid,),
        ).fetchall():
            path, o_exists, o_mode, o_hash, t_exists, t_mode, t_hash, action = row
            files.append(
                JournalFile(
                    path,
                    _image(conn, o_exists, o_mode, o_hash),
                    _image(conn, t_exists, t_mode, t_hash),
                    action,
                )
            )
        out.append(Journal(jid, session, target, files))
    return out


def _image(
    conn: sqlite3.Connection, exists: int, mode: int | None, key: str | None
) -> FileImage | None:
    if not exists or key is None:
        return FileImage(bool(exists), mode, None)
    try:
        return FileImage(True, mode, blobs.get(conn, key))
    except (blobs.BlobMissing, blobs.BlobCorrupt):
        return None


def finish(conn: sqlite3.Connection, journal: int, *, recorded: bool = False) -> None:
    """Forget a journal (its event committed, or recovery rolled it back), and the blobs only it
    referenced. A tool change `recorded` by its event has nothing to collect (the file change
    references both images): skipping the sweep matters, as that is every file tool call."""
    (tools, total) = conn.execute(
        "SELECT count(*) FILTER (WHERE action = ?), count(*) FROM file_rewind_journal_files"
        " WHERE journal_id = ?",
        (TOOL_CHANGE, journal),
    ).fetchone()
    hashes = {
        h
        for row in conn.execute(
            "SELECT original_blob_hash, target_blob_hash FROM file_rewind_journal_files"
            " WHERE journal_id = ?",
            (journal,),
        )
        for h in row
        if h is not None
    }
    conn.execute("DELETE FROM file_rewind_journals WHERE id = ?", (journal,))
    if not (recorded and tools == total > 0):
        blobs.collect_garbage(conn, hashes)
