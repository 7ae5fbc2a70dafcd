"""File changes read back as spans, rewind/review projections, rewind journals, retention and
cleanup jobs."""

from __future__ import annotations

import asyncio
import time
from typing import cast

import pytest

from app import events as k
from app.events import EventDraft, FileOutcome
from app.kernel.maintenance import PRUNE_FILE_CHANGES, PRUNE_INTERVAL_NS, RETRY_NS, Maintenance
from app.store import Store, jobs, journals
from app.store import events as log
from app.store.history import REMOVE_SESSION_FILES, HistoryChanged
from app.store.journals import FileImage

from .conftest import count, rows, run, say, session_row, sha, tool_change, user

DAY_NS = 86_400 * 1_000_000_000


def change(store: Store, sid: str, path: str, after: bytes | None, before: bytes | None) -> int:
    message, blobs = tool_change(path, after, before)
    return run(store.append(EventDraft(sid, k.MESSAGE_END, message, blobs=blobs))).seq


def test_spans_join_a_paths_changes_from_first_before_to_last_after(store: Store) -> None:
    run(store.create_session(session_row("a")))
    say(store, "a", user())
    first = change(store, "a", "/w/x", b"x1", None)  # created
    change(store, "a", "/w/y", b"y1", b"y0")
    change(store, "a", "/w/x", b"x2", b"x1")
    last = change(store, "a", "/w/x", None, b"x2")  # deleted at the end
    spans = run(store.file_spans("a"))
    assert [s.path for s in spans] == ["/w/x", "/w/y"]  # in order of first change
    x = spans[0]
    assert (x.first_seq, x.last_seq) == (first, last)
    assert x.before == FileImage(False)
    assert x.after == FileImage(False)
    y = spans[1]
    assert y.before == FileImage(True, 0o644, b"y0")
    assert y.after == FileImage(True, 0o644, b"y1")
    # A later start sees x as it was then (x1), not as created.
    later = run(store.file_spans("a", from_seq=first + 1))
    assert [(s.path, s.before.content) for s in later] == [("/w/y", b"y0"), ("/w/x", b"x1")]


def test_review_and_rewind_settle_pending_changes(store: Store) -> None:
    run(store.create_session(session_row("a")))
    say(store, "a", user("one"))
    kept = change(store, "a", "/w/a", b"a1", None)
    run(
        store.append(
            EventDraft("a", k.FILE_REVIEW_RESOLVED, {"action": "kept", "through_seq": kept})
        )
    )
    target = say(store, "a", user("two")).seq
    change(store, "a", "/w/b", b"b1", None)
    assert [s.path for s in run(store.file_spans("a", pending_only=True))] == ["/w/b"]
    head = run(store.history_head("a"))
    run(store.rewind("a", target, head))
    assert run(store.file_spans("a", pending_only=True)) == []
    states = rows(store, "SELECT path, review_state FROM file_changes ORDER BY event_seq")
    assert states == [("/w/a", "kept"), ("/w/b", "rewound")]
    # The rewound change is no longer part of the files' present.
    assert [s.path for s in run(store.file_spans("a"))] == ["/w/a"]


def test_a_rewind_forgets_its_journal_in_its_own_transaction(store: Store) -> None:
    run(store.create_session(session_row("a")))
    target = say(store, "a", user()).seq
    files = [journals.JournalFile("/w/f", FileImage(True, 0o644, b"now"), FileImage(False), "x")]
    jid = run(store.begin_restore("a", target, files))
    assert count(store, "file_rewind_journals") == 1
    with pytest.raises(HistoryChanged):  # refused: the journal stays for recovery
        run(store.rewind("a", target, target + 1, [cast(FileOutcome, {"path": "/w/f"})], jid))
    assert count(store, "file_rewind_journals") == 1
    run(store.rewind("a", target, target, [{"path": "/w/f", "action": "restored"}], jid))
    assert count(store, "file_rewind_journals") == 0
    assert count(store, "file_blobs") == 0  # the journal's images went with it
    [payload] = rows(store, "SELECT payload_json FROM events WHERE kind = 'history_rewound'")
    assert '"action":"restored"' in payload[0]


def test_deleting_a_session_leaves_a_job_to_remove_its_directories(store: Store) -> None:
    run(store.create_session(session_row("a")))
    job = run(store.delete_session("a"))
    [due] = run(store.due_jobs(time.time_ns()))
    assert (due.id, due.kind, due.payload) == (job, REMOVE_SESSION_FILES, {"session": "a"})
    run(store.job_done(job))
    assert run(store.due_jobs(time.time_ns())) == []


def test_jobs_are_unique_when_asked_due_in_time_and_retried(store: Store) -> None:
    now = time.time_ns()
    first = store.db.call(lambda c: jobs.schedule(c, "p", now + 10, unique=True), write=True)
    again = store.db.call(lambda c: jobs.schedule(c, "p", now, unique=True), write=True)
    assert first is not None and again is None
    assert run(store.due_jobs(now)) == []
    assert run(store.next_job_at()) == now + 10
    [job] = run(store.due_jobs(now + 10))
    run(store.job_failed(job.id, now + 99))
    assert run(store.due_jobs(now + 98)) == []
    [retried] = run(store.due_jobs(now + 99))
    assert retried.attempts == 1


def _expired_change(store: Store, sid: str) -> int:
    message, blobs = tool_change(f"/w/{sid}", b"old " + sid.encode())
    old = EventDraft(sid, k.MESSAGE_END, message, blobs=blobs)
    return store.db.call(lambda c: log.append(c, old, time.time_ns() - 31 * DAY_NS).seq, write=True)


def test_maintenance_prunes_on_schedule_and_spares_pinned_sessions(store: Store) -> None:
    removed: list[str] = []

    async def remove(session: str) -> None:
        removed.append(session)

    async def scenario() -> None:
        maintenance = Maintenance(store, remove)
        now = time.time_ns()
        assert await maintenance.run_due(now) == 0
        [waiting] = await store.due_jobs(now + PRUNE_INTERVAL_NS)
        assert waiting.kind == PRUNE_FILE_CHANGES
        await store.create_session(session_row("free"))
        await store.create_session(session_row("pinned", pinned_at_ns=now))
        _expired_change(store, "free")
        pinned = _expired_change(store, "pinned")
        assert await maintenance.run_due(now + 1) == 0  # not due yet: nothing pruned
        assert count(store, "file_changes") == 2
        assert await maintenance.run_due(now + PRUNE_INTERVAL_NS) == 1
        assert rows(store, "SELECT event_seq FROM file_changes") == [(pinned,)]
        assert rows(store, "SELECT hash FROM file_blobs") == [(sha(b"old pinned"),)]
        # The next prune waits a whole interval again.
        assert await store.next_job_at() == now + 2 * PRUNE_INTERVAL_NS

    asyncio.run(scenario())
    assert removed == []


def test_maintenance_retries_a_failing_job_and_then_finishes_it(store: Store) -> None:
    calls: list[str] = []

    async def remove(session: str) -> None:
        calls.append(session)
        if len(calls) == 1:
            raise OSError("disk said no")

    async def scenario() -> None:
        maintenance = Maintenance(store, remove)
        await store.create_session(session_row("gone"))
        await store.delete_session("gone")
        now = time.time_ns()
        assert await maintenance.run_due(now) == 0  # failed: kept for later
        [job] = [j for j in await store.due_jobs(now + RETRY_NS) if j.kind == REMOVE_SESSION_FILES]
        assert job.attempts == 1
        assert await maintenance.run_due(now + RETRY_NS) == 1
        assert [j.kind for j in await store.due_jobs(now + RETRY_NS)] == []

    asyncio.run(scenario())
    assert calls == ["gone", "gone"]
