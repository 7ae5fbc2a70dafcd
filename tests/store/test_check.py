"""`foya check`: rebuild the projections from the event log, compare, and repair on request."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import threading
from pathlib import Path
from typing import cast

import pytest

from app import events as k
from app.events import ContextRequestAccepted, EventDraft, FileReviewResolved, Usage
from app.files import data_dir_lock
from app.store import Store
from app.store import events as log
from app.store.check import check

from .conftest import (
    assistant,
    checkpoint_for,
    foya,
    raw,
    run,
    say,
    session_row,
    sha,
    tool_change,
    user,
)

SHARED, OWN = b"shared contents\n", b"own contents\n"


def populate(data_dir: Path) -> dict[str, int]:
    """A database touching every projection; returns a few seqs of interest."""
    store = Store(data_dir)
    store.open()
    try:
        for sid in ("a", "b"):
            run(store.create_session(session_row(sid)))
        u0 = say(store, "a", user("u0")).seq
        say(store, "a", assistant("a0"))
        msg, blobs = tool_change("/w/x", OWN, SHARED)
        tool = say(store, "a", msg, blobs=blobs).seq
        msg, blobs = tool_change("/w/y", SHARED)
        other_tool = say(store, "b", msg, blobs=blobs).seq
        # Partial usages and boundary: the projections read a missing count or size as 0.
        spent = cast(Usage, {"model": "m", "input_tokens": 5})
        run(store.append(EventDraft("a", k.USAGE_UPDATED, spent)))
        spent = cast(Usage, {"model": "n", "output_tokens": 2})
        run(store.append(EventDraft("b", k.USAGE_UPDATED, spent)))
        run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, checkpoint_for(store, "a", u0))))
        boundary = cast(
            ContextRequestAccepted, {"session_id": "a", "route": "r", "through_seq": tool}
        )
        run(store.append(EventDraft("a", k.CONTEXT_REQUEST_ACCEPTED, boundary)))
        u1 = say(store, "a", user("u1")).seq
        say(store, "a", assistant("a1"))
        run(store.rewind("a", u1, expected_head_seq=run(store.history_head("a"))))
        review: FileReviewResolved = {"action": "kept", "through_seq": other_tool}
        run(store.append(EventDraft("b", k.FILE_REVIEW_RESOLVED, review)))
        run(store.fork("a", session_row("f"), None, "t"))
        run(store.create_session(session_row("gone")))
        say(store, "gone", user("bye"))
        spent = cast(Usage, {"model": "m", "input_tokens": 9})
        run(store.append(EventDraft("gone", k.USAGE_UPDATED, spent)))
        run(store.delete_session("gone"))
    finally:
        store.close()
    return {"u0": u0, "tool": tool, "u1": u1, "other_tool": other_tool}


@pytest.fixture
def db(data_dir: Path) -> tuple[Path, dict[str, int]]:
    seqs = populate(data_dir)
    report = check(data_dir / "foya.db")
    assert report.clean, report.differences
    assert report.events == 16 and report.blobs == 2
    return data_dir / "foya.db", seqs


PROJECTION_TAMPERS = {
    "projection-row-deleted": (
        "DELETE FROM message_projection WHERE event_seq = {u0}",
        "message_projection: rebuilt row ({u0}, 'a', 'user', 1) is missing",
    ),
    "active-flipped": (
        "UPDATE message_projection SET active = 0 WHERE event_seq = {u0}",
        "message_projection: stored row ({u0}, 'a', 'user', 0) is not in the rebuild",
    ),
    "inactive-flipped": (
        "UPDATE message_projection SET active = 1 WHERE event_seq = {u1}",
        "message_projection: rebuilt row ({u1}, 'a', 'user', 0) is missing",
    ),
    "usage-record-changed": (
        "UPDATE usage_records SET input_tokens = 6 WHERE session_id = 'a'",
        "usage_records: stored row",
    ),
    "usage-record-deleted": ("DELETE FROM usage_records WHERE session_id = 'b'", "usage_records"),
    "checkpoint-garbled": (
        "UPDATE compaction_checkpoints SET checkpoint_json = '{{'",
        "compaction_checkpoints",
    ),
    "boundary-added": (
        "INSERT INTO context_accepted_boundaries(session_id, route, event_seq, through_seq)"
        " VALUES ('a', 'ghost', 1, 1)",
        "context_accepted_boundaries: stored row ('a', 'ghost'",
    ),
    "file-change-deleted": (
        "DELETE FROM file_changes WHERE event_seq = {tool}",
        "file_changes: rebuilt row ({tool}, 'a', '/w/x'",
    ),
    "file-change-review-state": (
        "UPDATE file_changes SET review_state = 'pending' WHERE event_seq = {other_tool}",
        "file_changes: stored row ({other_tool}, 'b', '/w/y'",
    ),
    "token-ledger-below": (
        "UPDATE usage_daily_ledger SET request_count = 0 WHERE model = 'm'",
        "usage_daily_ledger: stored ledger is below the events",
    ),
    "message-ledger-deleted": (
        "DELETE FROM usage_message_daily_ledger",
        "usage_message_daily_ledger: stored ledger is below the events",
    ),
    "session-days-deleted": (
        "DELETE FROM usage_session_days WHERE session_id = 'b'",
        "usage_session_days: stored ledger is below the events",
    ),
}
BLOB_TAMPERS = {
    "blob-deleted": (
        f"DELETE FROM file_blobs WHERE hash = '{sha(SHARED)}'",
        f"file_blobs: referenced blob {sha(SHARED)} is missing",
    ),
    "blob-garbage": (
        f"UPDATE file_blobs SET data = X'1f8b0000' WHERE hash = '{sha(OWN)}'",
        f"file_blobs: blob {sha(OWN)} does not match its hash",
    ),
    "blob-other-content": (
        f"UPDATE file_blobs SET data = ? WHERE hash = '{sha(OWN)}'",
        f"file_blobs: blob {sha(OWN)} does not match its hash",
    ),
}


def tamper(path: Path, sql: str, seqs: dict[str, int]) -> None:
    sql = sql.format(**seqs)
    raw(path, sql, (gzip.compress(b"something else"),) if "?" in sql else ())


@pytest.mark.parametrize("case", sorted(PROJECTION_TAMPERS))
def test_check_finds_and_repairs_each_projection_tamper(
    db: tuple[Path, dict[str, int]], case: str
) -> None:
    path, seqs = db
    sql, expected = PROJECTION_TAMPERS[case]
    tamper(path, sql, seqs)
    report = check(path)
    assert not report.clean
    assert any(expected.format(**seqs) in line for line in report.differences), report.differences
    repaired = check(path, repair=True)
    assert repaired.repaired and repaired.differences == report.differences
    after = check(path)
    assert after.clean, after.differences


@pytest.mark.parametrize("case", sorted(BLOB_TAMPERS))
def test_check_reports_blob_damage_that_repair_cannot_fix(
    db: tuple[Path, dict[str, int]], case: str
) -> None:
    path, seqs = db
    sql, expected = BLOB_TAMPERS[case]
    tamper(path, sql, seqs)
    report = check(path)
    assert report.differences == [expected]
    check(path, repair=True)
    assert check(path).differences == [expected]


def test_cli_check_exit_codes_and_repair(db: tuple[Path, dict[str, int]]) -> None:
    path, seqs = db
    data_dir = path.parent
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    clean = foya("check", "--data-dir", str(data_dir))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout == ""
    assert "0 difference(s)" in clean.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # a plain check reads only

    for case in (
        "projection-row-deleted",
        "inactive-flipped",
        "usage-record-changed",
        "file-change-deleted",
        "token-ledger-below",
    ):
        tamper(path, PROJECTION_TAMPERS[case][0], seqs)
    dirty = foya("check", "--data-dir", str(data_dir))
    assert dirty.returncode == 1, dirty.stdout + dirty.stderr
    lines = dirty.stdout.splitlines()
    for case in (
        "projection-row-deleted",
        "inactive-flipped",
        "usage-record-changed",
        "file-change-deleted",
        "token-ledger-below",
    ):
        expected = PROJECTION_TAMPERS[case][1].format(**seqs)
        assert any(expected in line for line in lines), (expected, lines)
    assert f"{len(lines)} difference(s)" in dirty.stderr

    fixed = foya("check", "--repair", "--data-dir", str(data_dir))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "repaired" in fixed.stderr
    again = foya("check", "--data-dir", str(data_dir))
    assert again.returncode == 0, again.stdout + again.stderr


def test_cli_check_keeps_reporting_blob_damage_after_repair(
    db: tuple[Path, dict[str, int]],
) -> None:
    path, seqs = db
    for sql, _ in (BLOB_TAMPERS["blob-deleted"], BLOB_TAMPERS["blob-garbage"]):
        tamper(path, sql, seqs)
    tamper(path, PROJECTION_TAMPERS["active-flipped"][0], seqs)
    blob_lines = sorted(BLOB_TAMPERS[c][1] for c in ("blob-deleted", "blob-garbage"))
    before = foya("check", "--data-dir", str(path.parent))
    assert before.returncode == 1
    lines = before.stdout.splitlines()
    assert len(lines) == 4  # the flipped row twice (stored and rebuilt), then both blobs
    assert sorted(line for line in lines if line.startswith("file_blobs")) == blob_lines
    foya("check", "--repair", "--data-dir", str(path.parent))
    after = foya("check", "--data-dir", str(path.parent))
    assert after.returncode == 1
    assert sorted(after.stdout.splitlines()) == blob_lines
    assert "2 difference(s)" in after.stderr


def test_cli_repair_fails_while_unrepairable_damage_remains(
    db: tuple[Path, dict[str, int]],
) -> None:
    # `foya check` exits 1 on any difference; a repair that could not fix a missing blob must not
    # report success (exit 0), or scripts take the database for healthy.
    path, seqs = db
    tamper(path, BLOB_TAMPERS["blob-deleted"][0], seqs)
    result = foya("check", "--repair", "--data-dir", str(path.parent))
    assert result.returncode != 0, result.stdout + result.stderr


def test_cli_repair_refuses_while_a_kernel_holds_the_data_dir(
    db: tuple[Path, dict[str, int]],
) -> None:
    path, seqs = db
    tamper(path, PROJECTION_TAMPERS["active-flipped"][0], seqs)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with data_dir_lock(path.parent):
        result = foya("check", "--repair", "--data-dir", str(path.parent))
    assert result.returncode == 2
    assert "another foya kernel" in result.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_cli_check_without_a_database(tmp_path: Path) -> None:
    result = foya("check", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "no foya.db" in result.stderr
    assert not (tmp_path / "foya.db").exists()


def test_ledgers_outlive_deleted_sessions(data_dir: Path) -> None:
    populate(data_dir)  # deleted session "gone" left ledger rows behind
    assert check(data_dir / "foya.db").clean
    store = Store(data_dir)
    store.open()
    try:
        ledger = store.db.call(
            lambda c: c.execute("SELECT SUM(request_count) FROM usage_daily_ledger").fetchone()[0],
            write=False,
        )
        assert ledger == 3  # a, b and the deleted session's request
        run(store.delete_session("a"))
        run(store.delete_session("f"))
    finally:
        store.close()
    assert check(data_dir / "foya.db").clean
    result = foya("check", "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_accepts_a_dropped_invalid_checkpoint(data_dir: Path) -> None:
    # A compaction can finish after a rewind moved history under it: its checkpoint is stale when
    # appended. `Store.checkpoint()` then drops the projection row.
    # That is a legitimate state, so `foya check` must not call it a difference.
    store = Store(data_dir)
    store.open()
    try:
        run(store.create_session(session_row("a")))
        say(store, "a", user())
        say(store, "a", assistant())
        u1 = say(store, "a", user()).seq
        a1 = say(store, "a", assistant()).seq
        stale = checkpoint_for(store, "a", a1)  # computed by the compaction, before the rewind
        run(store.rewind("a", u1, expected_head_seq=a1))
        run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, stale)))
        assert run(store.checkpoint("a")) is None
    finally:
        store.close()
    report = check(data_dir / "foya.db")
    assert report.clean, report.differences


def test_check_works_for_data_dirs_with_uri_characters(tmp_path: Path) -> None:
    data_dir = tmp_path / "projects #1 (100%)"
    populate(data_dir)
    result = foya("check", "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "checked 16 events" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == [data_dir.name]  # no stray files


def test_check_has_no_false_differences_while_the_store_is_written(data_dir: Path) -> None:
    # `foya check` is allowed next to a running kernel (only --repair takes the lock), so it must
    # compare one consistent snapshot: appends committed while it runs are not differences.
    store = Store(data_dir)
    store.open()
    stop = threading.Event()
    try:
        run(store.create_session(session_row("a")))
        drafts = [EventDraft("a", k.MESSAGE_END, user(str(i))) for i in range(10_000)]
        store.db.call(lambda c: log.append_all(c, drafts))
        # A partial usage: a missing count is 0.
        usage = EventDraft("a", k.USAGE_UPDATED, cast(Usage, {"model": "m", "input_tokens": 1}))

        async def write() -> None:
            while not stop.is_set():
                await store.append(usage)

        writer = threading.Thread(target=lambda: asyncio.run(write()))
        writer.start()
        try:
            reports = [check(data_dir / "foya.db") for _ in range(3)]
        finally:
            stop.set()
            writer.join()
        written = store.db.call(
            lambda c: c.execute("SELECT COUNT(*) FROM usage_records").fetchone()[0], write=False
        )
    finally:
        store.close()
    assert written > 0
    for report in reports:
        assert report.clean, report.differences[:3]
