"""Helpers shared by the rewind and file-review tests: workspace snapshots and the wire calls.

Files are compared as `{relative path: (bytes, mode)}` snapshots of a session's workspace, so
"restored byte for byte, mode included" is one equality. The database is only ever opened
read-only, next to (or after) the kernel that owns it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from support.fake_provider import Call, Session, answer, call, tools
from support.streams_helpers import Frame

Snapshot = dict[str, tuple[bytes, int]]
LINES = "".join(f"line {i}\n" for i in range(1, 9))  # 8 lines: room for non-overlapping edits


# ---------------------------------------------------------------------------------- the agent


def write(path: str, content: str, id: str = "w") -> Call:
    return call(id, "write", {"path": path, "content": content})


def edit(path: str, old: str, new: str, id: str = "e") -> Call:
    return call(id, "edit", {"path": path, "old_string": old, "new_string": new})


def delete(path: str, id: str = "d") -> Call:
    return call(id, "delete", {"path": path})


def turn(s: Session, *calls: Call, message: str = "hello") -> list[Frame]:
    """One agent turn after user `message`: one step running `calls`, then a short answer.
    Every tool must succeed; returns every frame up to `turn_complete`."""
    frames = s.turn(tools(*calls), answer("Done."), message=message)
    ends = [f.data["payload"] for f in frames if f.event == "tool_end"]
    assert len(ends) == len(calls) and not any(e.get("is_error") for e in ends), ends
    return frames


def put(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Create or overwrite a file by hand (the user, not the agent), with an exact mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)


def snapshot(root: Path) -> Snapshot:
    """Every regular file below `root` (symlinks not followed): content and permission bits."""
    out: Snapshot = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                out[str(path.relative_to(root))] = (path.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def rel(s: Session, files: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """File entries (preview, review, event payload) by path relative to the workspace."""
    root = s.workspace.resolve()
    return {str(Path(f["path"]).relative_to(root)): f for f in files}


def user_seqs(s: Session) -> list[int]:
    return [int(m["event_seq"]) for m in s.history() if m["role"] == "user"]


# ------------------------------------------------------------------------------------- rewind


def rewind_url(s: Session, seq: int | str) -> str:
    return f"/sessions/{s.id}/turns/{seq}/rewind"


def preview(s: Session, seq: int) -> dict[str, Any]:
    """A rewind preview, which must ask for confirmation."""
    response = s.client.post(rewind_url(s, seq))
    assert response.status_code == 200, response.text
    body = dict(response.json())
    assert body["status"] == "confirmation_required", body
    return body


def confirm_call(
    s: Session, seq: int, shown: dict[str, Any], force: list[str] | None = None
) -> httpx.Response:
    """Confirm a rewind with what `shown` (a preview) returned."""
    body: dict[str, Any] = {
        "confirm": True,
        "expected_head_seq": shown["head_seq"],
        "expected_file_state": shown["file_state_token"],
    }
    if force is not None:
        body["force_file_keys"] = force
    return s.client.post(rewind_url(s, seq), json=body)


def confirm(
    s: Session, seq: int, shown: dict[str, Any], force: list[str] | None = None
) -> dict[str, Any]:
    response = confirm_call(s, seq, shown, force)
    assert response.status_code == 200, response.text
    body = dict(response.json())
    assert body["status"] == "rewound", body
    return body


# -------------------------------------------------------------------------------- file review


def review_url(s: Session) -> str:
    return f"/sessions/{s.id}/file-review"


def review(s: Session) -> dict[str, Any]:
    response = s.client.get(review_url(s))
    assert response.status_code == 200, response.text
    return dict(response.json())


def resolve_call(
    s: Session, action: str, listed: dict[str, Any], force: list[str] | None = None
) -> httpx.Response:
    """Keep or undo with what `listed` (a GET) returned."""
    body: dict[str, Any] = {
        "action": action,
        "expected_through_seq": listed["through_seq"],
        "expected_file_state": listed["file_state_token"],
    }
    if force is not None:
        body["force_file_keys"] = force
    return s.client.post(review_url(s), json=body)


def resolve(
    s: Session, action: str, listed: dict[str, Any], force: list[str] | None = None
) -> None:
    response = resolve_call(s, action, listed, force)
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "resolved"}


# ------------------------------------------------------------------------------------ database


@contextlib.contextmanager
def read_db(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """`<data_dir>/foya.db`, read-only."""
    conn = sqlite3.connect(f"file:{data_dir / 'foya.db'}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def count(data_dir: Path, sql: str, *args: Any) -> int:
    with read_db(data_dir) as conn:
        return int(conn.execute(sql, args).fetchone()[0])


def journal_rows(data_dir: Path) -> tuple[int, int]:
    """(journals, journaled files) still in the database: both 0 once every restore is final."""
    return (
        count(data_dir, "SELECT COUNT(*) FROM file_rewind_journals"),
        count(data_dir, "SELECT COUNT(*) FROM file_rewind_journal_files"),
    )


def stored_kinds(data_dir: Path, session: str, kind: str) -> list[dict[str, Any]]:
    """Payloads of the session's stored events of `kind`, oldest first."""
    with read_db(data_dir) as conn:
        rows = conn.execute(
            "SELECT payload_json FROM events WHERE session_id = ? AND kind = ? ORDER BY seq",
            (session, kind),
        ).fetchall()
    return [json.loads(r[0]) if r[0] else {} for r in rows]
