"""Contract tests for the SQLite event store: facts, projections, history operations, rows."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest

from app import events as k
from app.errors import BadRequest, Conflict, InsufficientStorage, NotFound
from app.events import (
    Checkpoint,
    ContextRequestAccepted,
    EventDraft,
    ToolBegin,
    TurnComplete,
    TurnStarted,
    Usage,
)
from app.kernel.recovery import recover
from app.store import SchemaTooNew, Store, journals, schema
from app.store import events as log
from app.store.blobs import BlobMissing
from app.store.check import check
from app.store.events import SessionDeleted, SessionNotFound
from app.store.history import HistoryChanged, MessageNotFound, NotAUserMessage
from app.store.projections import day_of

from .conftest import (
    assistant,
    checkpoint_for,
    count,
    foya,
    raw,
    rows,
    run,
    say,
    session_row,
    sha,
    tool_change,
    user,
)

SEED_000_TABLES = {
    "sessions",
    "events",
    "message_projection",
    "stream_snapshots",
    "deleted_sessions",
    "cleanup_jobs",
    "compaction_checkpoints",
    "context_accepted_boundaries",
    "file_blobs",
    "file_changes",
    "file_rewind_journals",
    "file_rewind_journal_files",
    "usage_records",
    "usage_daily_ledger",
    "usage_message_daily_ledger",
    "usage_session_days",
}
DAY_NS = 86_400 * 1_000_000_000


def make(store: Store, *sids: str, **fields: Any) -> None:
    for sid in sids:
        run(store.create_session(session_row(sid, **fields)))


def history_seqs(store: Store, session: str) -> list[int]:
    return [m["event_seq"] for m in run(store.history(session))]


def assert_clean(store: Store) -> None:
    report = check(store.path)
    assert report.clean, report.differences


# -- 1. contract ----------------------------------------------------------------------------------


def test_pragmas_are_in_effect_on_the_store_connection(store: Store) -> None:
    def read(c: Any) -> dict[str, Any]:
        names = ("foreign_keys", "journal_mode", "synchronous", "busy_timeout", "auto_vacuum")
        return {n: c.execute(f"PRAGMA {n}").fetchone()[0] for n in names}

    assert store.db.call(read, write=False) == {
        "foreign_keys": 1,
        "journal_mode": "wal",
        "synchronous": 2,  # FULL
        "busy_timeout": 5000,
        "auto_vacuum": 2,  # INCREMENTAL
    }


def test_every_seed_table_exists_and_user_version_is_current(store: Store) -> None:
    tables = {r[0] for r in rows(store, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables >= SEED_000_TABLES
    assert rows(store, "PRAGMA user_version") == [(schema.VERSION,)]


def test_reopening_keeps_data_and_version(data_dir: Path) -> None:
    s = Store(data_dir)
    s.open()
    make(s, "a")
    seq = say(s, "a", user()).seq
    s.close()
    s = Store(data_dir)
    s.open()
    try:
        assert history_seqs(s, "a") == [seq]
        assert rows(s, "PRAGMA user_version") == [(schema.VERSION,)]
    finally:
        s.close()


def test_seq_is_global_across_sessions(store: Store) -> None:
    make(store, "a", "b")
    seqs = []
    for i in range(6):
        seqs.append(say(store, "ab"[i % 2], user(f"m{i}")).seq)
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # Each session sees gaps where the other one wrote: the counter is not per session.
    assert history_seqs(store, "a") == seqs[0::2]
    assert history_seqs(store, "b") == seqs[1::2]
    assert run(store.head_seq()) == seqs[-1]


def test_seq_is_never_reused_after_the_newest_events_are_deleted(store: Store) -> None:
    make(store, "a", "b")
    say(store, "a", user())
    last = say(store, "b", user()).seq
    run(store.delete_session("b"))
    assert run(store.head_seq()) == last
    assert say(store, "a", user()).seq == last + 1


def test_database_files_are_private(store: Store) -> None:
    make(store, "a")
    say(store, "a", user())
    for name in ("foya.db", "foya.db-wal", "foya.db-shm"):
        path = store.path.parent / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700  # created by the store


# -- 2. append and projections in one transaction -------------------------------------------------


def test_message_end_enters_message_projection(store: Store) -> None:
    make(store, "a")
    u = say(store, "a", user("hello"))
    a = say(store, "a", assistant("hi"), run_id="r1")
    assert rows(store, "SELECT * FROM message_projection ORDER BY event_seq") == [
        (u.seq, "a", "user", 1),
        (a.seq, "a", "assistant", 1),
    ]
    assert rows(store, "SELECT run_id, kind FROM events WHERE seq = ?", (a.seq,)) == [
        ("r1", k.MESSAGE_END)
    ]
    day = day_of(u.time_ns)
    assert rows(store, "SELECT * FROM usage_message_daily_ledger") == [(day, 1)]
    assert rows(store, "SELECT * FROM usage_session_days") == [(day, "a")]


def test_non_message_kinds_do_not_enter_message_projection(store: Store) -> None:
    make(store, "a")
    # Partial payloads: only their kinds matter to the projection.
    started = cast(TurnStarted, {"run_id": "a"})
    run(store.append(EventDraft("a", k.TURN_STARTED, started)))
    run(store.append(EventDraft("a", k.TOOL_BEGIN, cast(ToolBegin, {"id": "t", "name": "x"}))))
    assert count(store, "message_projection") == 0
    assert count(store, "events") == 2


def test_usage_updated_enters_records_and_ledgers(store: Store) -> None:
    make(store, "a", "b")
    # Partial usages on purpose: a missing count is 0, a missing total is input + output.
    usage = cast(Usage, {"model": "m1", "input_tokens": 10, "output_tokens": 5, "cached_tokens": 2})
    e1 = run(store.append(EventDraft("a", k.USAGE_UPDATED, usage)))
    e2 = run(store.append(EventDraft("b", k.USAGE_UPDATED, {**usage, "total_tokens": 100})))
    lone = cast(Usage, {"model": "m2", "input_tokens": 1})
    e3 = run(store.append(EventDraft("a", k.USAGE_UPDATED, lone)))
    assert rows(store, "SELECT * FROM usage_records ORDER BY event_seq") == [
        (e1.seq, "a", "m1", 10, 5, 15, 2, e1.time_ns),
        (e2.seq, "b", "m1", 10, 5, 100, 2, e2.time_ns),
        (e3.seq, "a", "m2", 1, 0, 1, 0, e3.time_ns),
    ]
    ledger = rows(
        store,
        "SELECT model, SUM(input_tokens), SUM(output_tokens), SUM(total_tokens),"
        " SUM(cached_tokens), SUM(request_count) FROM usage_daily_ledger GROUP BY model",
    )
    assert ledger == [("m1", 20, 10, 115, 4, 2), ("m2", 1, 0, 1, 0, 1)]
    assert set(rows(store, "SELECT * FROM usage_session_days")) == {
        (day_of(e.time_ns), e.session) for e in (e1, e2, e3)
    }
    assert run(store.last_usage("a")) == {
        "model": "m2",
        "input_tokens": 1,
        "output_tokens": 0,
        "total_tokens": 1,
        "cached_tokens": 0,
    }


def test_compaction_completed_enters_checkpoint_projection(store: Store) -> None:
    make(store, "a")
    u = say(store, "a", user())
    cp = checkpoint_for(store, "a", u.seq)
    e = run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp)))
    [(sid, seq, stored)] = rows(store, "SELECT * FROM compaction_checkpoints")
    assert (sid, seq, json.loads(stored)) == ("a", e.seq, cp)
    assert run(store.checkpoint("a")) == cp


def test_context_request_accepted_upserts_one_boundary_per_session_and_route(
    store: Store,
) -> None:
    make(store, "a", "b")
    u = say(store, "a", user())

    def accept(sid: str, route: str, through: int, tokens: int) -> int:
        # A partial boundary (its counts partial too): a missing count or size is 0.
        payload = cast(
            ContextRequestAccepted,
            {
                "session_id": sid,
                "route": route,
                "through_seq": through,
                "usage": {"input_tokens": tokens, "output_tokens": 1},
                "payload_bytes": 123,
            },
        )
        return run(store.append(EventDraft(sid, k.CONTEXT_REQUEST_ACCEPTED, payload))).seq

    s1 = accept("a", "r1", u.seq, 10)
    s2 = accept("a", "r2", u.seq, 20)
    s3 = accept("b", "r1", 0, 30)
    s4 = accept("a", "r1", u.seq, 40)  # replaces a/r1 only
    got = rows(store, "SELECT * FROM context_accepted_boundaries ORDER BY session_id, route")
    assert got == [
        ("a", "r1", s4, u.seq, 40, 1, 41, 0, 123),
        ("a", "r2", s2, u.seq, 20, 1, 21, 0, 123),
        ("b", "r1", s3, 0, 30, 1, 31, 0, 123),
    ]
    assert s1 < s4


def test_file_change_stores_row_and_gzip_blobs_once(store: Store) -> None:
    make(store, "a", "b")
    old, new = b"old contents\n", b"new contents\n" * 50
    msg1, blobs1 = tool_change("/w/x.txt", new, old, before_mode=0o600, after_mode=0o755)
    msg2, blobs2 = tool_change("/w/y.txt", new)  # shares `new` with the first change
    e1 = say(store, "a", msg1, blobs=blobs1)
    e2 = say(store, "b", msg2, blobs=blobs2)
    assert rows(store, "SELECT * FROM file_changes ORDER BY event_seq") == [
        (e1.seq, "a", "/w/x.txt", 1, 0o600, 0o755, sha(old), sha(new), "pending"),
        (e2.seq, "b", "/w/y.txt", 0, None, 0o644, None, sha(new), "pending"),
    ]
    blobs = {
        h: (codec, size, data) for h, codec, size, data in rows(store, "SELECT * FROM file_blobs")
    }
    assert set(blobs) == {sha(old), sha(new)}
    for content in (old, new):
        codec, size, data = blobs[sha(content)]
        assert codec == "gzip" and size == len(content)
        assert gzip.decompress(data) == content
    assert len(blobs[sha(new)][2]) < len(new)  # compressed
    # The payload keeps only hashes, never the content.
    stored = rows(store, "SELECT payload_json FROM events WHERE seq = ?", (e1.seq,))[0][0]
    assert "new contents" not in stored and sha(new) in stored


def test_file_change_may_reference_an_already_stored_blob(store: Store) -> None:
    make(store, "a")
    msg, blobs = tool_change("/w/x", b"same")
    say(store, "a", msg, blobs=blobs)
    e = say(store, "a", msg)  # no blobs in the draft: the stored one is enough
    assert count(store, "file_changes", "event_seq = ?", (e.seq,)) == 1
    assert count(store, "file_blobs") == 1


def _footprint(store: Store) -> dict[str, int]:
    tables = (
        "events",
        "message_projection",
        "file_changes",
        "file_blobs",
        "usage_records",
        "usage_message_daily_ledger",
        "usage_session_days",
    )
    out = {t: count(store, t) for t in tables}
    out["head"] = run(store.head_seq())
    return out


def test_missing_blob_refuses_the_append_and_writes_nothing(store: Store) -> None:
    make(store, "a")
    say(store, "a", user())
    before = _footprint(store)
    msg, _ = tool_change("/w/x", b"after", b"before")
    # The draft carries only one of the two blobs (plus an unrelated one): all must roll back.
    partial = {sha(b"after"): b"after", sha(b"extra"): b"extra"}
    with pytest.raises(BlobMissing) as info:
        say(store, "a", msg, blobs=partial)
    assert info.value.code == "blob_missing"
    assert _footprint(store) == before
    assert count(store, "file_blobs") == 0


def test_append_to_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(SessionNotFound) as info:
        say(store, "nope", user())
    assert isinstance(info.value, NotFound) and info.value.status == 404
    assert count(store, "events") == 0


def test_append_all_is_atomic(store: Store) -> None:
    make(store, "a")
    msg, _ = tool_change("/w/x", b"missing")
    drafts = [EventDraft("a", k.MESSAGE_END, user()), EventDraft("a", k.MESSAGE_END, msg)]
    with pytest.raises(BlobMissing):
        run(store.append_all(drafts))
    assert count(store, "events") == 0 and count(store, "message_projection") == 0
    events = run(store.append_all([EventDraft("a", k.MESSAGE_END, user()) for _ in range(3)]))
    assert [e.seq for e in events] == history_seqs(store, "a")


def test_failing_append_in_a_group_commit_batch_rolls_back_alone(store: Store) -> None:
    make(store, "a", "gone")
    run(store.delete_session("gone"))
    started, release = threading.Event(), threading.Event()

    def block(_: Any) -> None:
        started.set()
        assert release.wait(30)

    bad_msg, _ = tool_change("/w/bad", b"never stored")
    good_msg, good_blobs = tool_change("/w/good", b"stored")
    drafts = [
        EventDraft("a", k.MESSAGE_END, user("1")),
        EventDraft("a", k.MESSAGE_END, bad_msg, blobs={sha(b"junk"): b"junk"}),
        EventDraft("a", k.MESSAGE_END, good_msg, blobs=good_blobs),
        EventDraft("gone", k.MESSAGE_END, user("late")),
        # A partial usage: a missing count is 0.
        EventDraft("a", k.USAGE_UPDATED, cast(Usage, {"model": "m", "input_tokens": 3})),
        EventDraft("a", k.MESSAGE_END, assistant("2")),
    ]

    async def scenario() -> list[Any]:
        # Hold the store thread so every append below is queued, then committed as one batch.
        blocker = asyncio.ensure_future(store.db.read(block))
        while not started.is_set():
            await asyncio.sleep(0.001)
        tasks = [asyncio.ensure_future(store.append(d)) for d in drafts]
        await asyncio.sleep(0)  # every task has queued its write
        await asyncio.sleep(0)
        release.set()
        await blocker
        return await asyncio.gather(*tasks, return_exceptions=True)

    statements: list[str] = []
    store.db.call(lambda c: c.set_trace_callback(statements.append), write=False)
    try:
        results = run(scenario())
    finally:
        store.db.call(lambda c: c.set_trace_callback(None), write=False)
    # The six appends really shared one group commit (one durable COMMIT for all of them).
    assert [st for st in statements if st.startswith("COMMIT")] == ["COMMIT"]
    assert isinstance(results[1], BlobMissing)
    assert isinstance(results[3], SessionDeleted)
    ok = [r for i, r in enumerate(results) if i not in (1, 3)]
    assert all(not isinstance(r, BaseException) for r in ok), results
    stored = rows(store, "SELECT seq, kind FROM events ORDER BY seq")
    assert stored == [(e.seq, e.kind) for e in ok]
    assert history_seqs(store, "a") == [ok[0].seq, ok[1].seq, ok[3].seq]
    assert rows(store, "SELECT path FROM file_changes") == [("/w/good",)]
    assert {r[0] for r in rows(store, "SELECT hash FROM file_blobs")} == {sha(b"stored")}
    assert count(store, "usage_records") == 1
    assert_clean(store)


def test_a_full_disk_fails_the_writes_but_not_the_store(store: Store) -> None:
    # `PRAGMA max_page_count` makes SQLite answer SQLITE_FULL exactly as a full disk does; SQLite
    # then rolls the whole transaction back by itself. Every caller must get an answer, and the
    # store must keep serving once space is back.
    make(store, "a")
    say(store, "a", user("before"))
    pages = rows(store, "PRAGMA page_count")[0][0]
    rows(store, f"PRAGMA max_page_count = {pages + 2}")
    big = user("x" * 200_000)
    with pytest.raises(InsufficientStorage, match="full"):
        say(store, "a", big)  # alone in its transaction

    async def batch() -> list[Any]:
        drafts = [EventDraft("a", k.MESSAGE_END, m) for m in (user("1"), big, user("2"))]
        writes = asyncio.gather(*(store.append(d) for d in drafts), return_exceptions=True)
        return await asyncio.wait_for(writes, 10)  # guards against a hang only

    results = run(batch())  # in one group commit
    assert isinstance(results[1], InsufficientStorage)
    rows(store, "PRAGMA max_page_count = 1073741823")
    after = say(store, "a", user("after"))
    acknowledged = [r.seq for r in results if not isinstance(r, BaseException)]
    assert set(acknowledged) <= {r[0] for r in rows(store, "SELECT seq FROM events")}
    assert history_seqs(store, "a")[-1] == after.seq
    assert_clean(store)


# -- 3. reads -------------------------------------------------------------------------------------


def test_history_pages_active_messages_in_seq_order(store: Store) -> None:
    make(store, "a", "b")
    seqs = []
    for i in range(5):
        seqs.append(say(store, "a", user(f"u{i}")).seq)
        say(store, "b", user("other"))
        seqs.append(say(store, "a", assistant(f"a{i}"), run_id="a").seq)
        # A partial end of turn: only that it is no message matters here.
        done = cast(TurnComplete, {"status": "completed"})
        run(store.append(EventDraft("a", k.TURN_COMPLETE, done)))
    full = run(store.history("a"))
    assert [m["event_seq"] for m in full] == seqs
    assert full[0] == {"role": "user", "content": "u0", "event_seq": seqs[0]}
    assert [m["event_seq"] for m in run(store.history("a", after_seq=seqs[3]))] == seqs[4:]
    assert [m["event_seq"] for m in run(store.history("a", limit=3))] == seqs[:3]
    page = run(store.history("a", after_seq=seqs[2], limit=2))
    assert [m["event_seq"] for m in page] == seqs[3:5]
    assert run(store.history_head("a")) == seqs[-1]
    assert run(store.history_head("nobody")) == 0
    assert run(store.history("nobody")) == []


def test_events_after_pages_by_keyset_across_and_within_sessions(store: Store) -> None:
    make(store, "a", "b")
    written = []
    for i in range(7):
        sid = "ab"[i % 3 == 0]
        written.append(say(store, sid, user(f"m{i}")))
    assert run(store.events_after(0)) == written  # payload and envelope round-trip
    got, after = [], 0
    while page := run(store.events_after(after, limit=3)):
        assert len(page) <= 3
        got += page
        after = page[-1].seq
    assert [e.seq for e in got] == [e.seq for e in written]
    mine = [e for e in written if e.session == "b"]
    got, after = [], 0
    while page := run(store.events_after(after, limit=2, session="b")):
        got += page
        after = page[-1].seq
    assert got == mine
    assert run(store.events_after(written[-1].seq)) == []
    assert run(store.head_seq()) == written[-1].seq == run(store.ping())


def test_head_seq_of_an_empty_store_is_zero(store: Store) -> None:
    assert run(store.head_seq()) == 0


# -- 4. rewind and fork ---------------------------------------------------------------------------


def _conversation(store: Store, sid: str, turns: int) -> list[int]:
    seqs = []
    for i in range(turns):
        seqs.append(say(store, sid, user(f"u{i}")).seq)
        seqs.append(say(store, sid, assistant(f"a{i}")).seq)
    return seqs


def _accept(store: Store, sid: str, route: str, through: int) -> None:
    # A partial boundary: a missing count or size is 0.
    payload = cast(
        ContextRequestAccepted, {"session_id": sid, "route": route, "through_seq": through}
    )
    run(store.append(EventDraft(sid, k.CONTEXT_REQUEST_ACCEPTED, payload)))


def test_rewind_deactivates_target_and_later_and_appends_a_fact(store: Store) -> None:
    make(store, "a", "b")
    u0, a0, u1, a1, u2, a2 = _conversation(store, "a", 3)
    other = say(store, "b", user()).seq
    cp = checkpoint_for(store, "a", a0)
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp)))
    _accept(store, "a", "keep", a0)
    _accept(store, "a", "drop", a1)
    _accept(store, "b", "drop", other)
    events_before = count(store, "events")

    ev = run(store.rewind("a", u1, expected_head_seq=a2, files=[{"path": "/x", "action": "kept"}]))
    assert ev.kind == k.HISTORY_REWOUND and ev.session == "a"
    assert ev.payload == {"target_user_seq": u1, "files": [{"path": "/x", "action": "kept"}]}
    assert ev.seq == run(store.head_seq())
    assert history_seqs(store, "a") == [u0, a0]
    assert run(store.history_head("a")) == a0
    # Nothing is physically deleted: the old messages are still in the log, just inactive.
    assert count(store, "events") == events_before + 1
    assert rows(
        store,
        "SELECT event_seq, active FROM message_projection WHERE session_id = 'a'"
        " ORDER BY event_seq",
    ) == [(u0, 1), (a0, 1), (u1, 0), (a1, 0), (u2, 0), (a2, 0)]
    assert history_seqs(store, "b") == [other]
    # The checkpoint below the target survives; boundaries past the target are gone.
    assert run(store.checkpoint("a")) == cp
    assert rows(
        store,
        "SELECT session_id, route FROM context_accepted_boundaries ORDER BY session_id, route",
    ) == [("a", "keep"), ("b", "drop")]
    assert_clean(store)


def test_rewind_drops_a_checkpoint_reaching_the_target(store: Store) -> None:
    make(store, "a")
    u0, a0, u1, a1 = _conversation(store, "a", 2)
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, checkpoint_for(store, "a", u1))))
    _accept(store, "a", "r", u1)
    run(store.rewind("a", u1, expected_head_seq=a1))
    assert count(store, "compaction_checkpoints") == 0
    assert count(store, "context_accepted_boundaries") == 0
    assert run(store.checkpoint("a")) is None
    # New messages after the rewind continue the new branch.
    u2 = say(store, "a", user("again")).seq
    assert history_seqs(store, "a") == [u0, a0, u2]
    assert_clean(store)


def test_rewind_with_a_stale_head_is_refused_and_appends_nothing(store: Store) -> None:
    make(store, "a")
    u0, _a0, u1, a1 = _conversation(store, "a", 2)
    before = _footprint(store)
    with pytest.raises(HistoryChanged) as info:
        run(store.rewind("a", u1, expected_head_seq=u1))
    assert info.value.code == "history_changed" and isinstance(info.value, Conflict)
    assert _footprint(store) == before
    assert count(store, "message_projection", "active = 0") == 0
    run(store.rewind("a", u1, expected_head_seq=a1))
    with pytest.raises(HistoryChanged):  # the head the client saw before the rewind is stale now
        run(store.rewind("a", u0, expected_head_seq=a1))
    run(store.rewind("a", u0, expected_head_seq=_a0))


def test_rewind_target_must_be_an_active_user_message_of_the_session(store: Store) -> None:
    make(store, "a", "b")
    u0, a0, u1, a1 = _conversation(store, "a", 2)
    other = say(store, "b", user()).seq
    with pytest.raises(NotAUserMessage) as info:
        run(store.rewind("a", a0, expected_head_seq=a1))
    assert info.value.code == "invalid_message_seq" and isinstance(info.value, BadRequest)
    for seq in (a1 + 1000, other, 0):
        with pytest.raises(MessageNotFound) as missing:
            run(store.rewind("a", seq, expected_head_seq=a1))
        assert missing.value.code == "message_not_found"
    run(store.rewind("a", u1, expected_head_seq=a1))
    with pytest.raises(MessageNotFound):  # already inactive
        run(store.rewind("a", u1, expected_head_seq=a0))
    assert history_seqs(store, "a") == [u0, a0]
    assert count(store, "events", "kind = ?", (k.HISTORY_REWOUND,)) == 1


def test_fork_copies_active_messages_as_imported_facts(store: Store) -> None:
    make(store, "src")
    u0, _a0, _u1, a1, u2, _a2 = _conversation(store, "src", 3)
    msg, blobs = tool_change("/w/x", b"content")
    t = say(store, "src", msg, blobs=blobs).seq
    run(store.rewind("src", u2, expected_head_seq=t))  # u2, a2 and the tool message drop out
    ledger_before = rows(store, "SELECT * FROM usage_message_daily_ledger")
    source_history = run(store.history("src"))

    out = run(store.fork("src", session_row("f", parent_id=None), None, "2024-01-01T00:00:00Z"))
    forked, imported = out[0], out[1:]
    assert forked.kind == k.SESSION_FORKED and forked.session == "f"
    assert forked.payload == {
        "source_session_id": "src",
        "through_seq": a1,
        "forked_at": "2024-01-01T00:00:00Z",
        "message_count": 4,
    }
    assert [e.kind for e in imported] == [k.MESSAGE_IMPORTED] * 4
    assert [e.seq for e in out] == list(range(forked.seq, forked.seq + 5))
    assert forked.seq > run(store.events_after(0, session="src"))[-1].seq
    fork_history = run(store.history("f"))
    assert [m["event_seq"] for m in fork_history] == [e.seq for e in imported]
    strip = [{key: v for key, v in m.items() if key != "event_seq"} for m in fork_history]
    assert strip == [{key: v for key, v in m.items() if key != "event_seq"} for m in source_history]
    assert run(store.get_session("f")) is not None
    # Imported copies are not new activity.
    assert rows(store, "SELECT * FROM usage_message_daily_ledger") == ledger_before
    assert count(store, "file_changes", "session_id = 'f'") == 0
    assert_clean(store)

    # Later changes to the source never reach the fork.
    run(store.rewind("src", u0, expected_head_seq=a1))
    assert history_seqs(store, "src") == []
    run(store.delete_session("src"))
    assert run(store.history("f")) == fork_history
    assert [e.kind for e in run(store.events_after(0, session="f"))][:1] == [k.SESSION_FORKED]
    assert_clean(store)


def test_fork_respects_through_seq(store: Store) -> None:
    make(store, "src")
    _u0, a0, u1, _a1 = _conversation(store, "src", 2)
    out = run(store.fork("src", session_row("f"), a0, "t"))
    assert out[0].payload["through_seq"] == a0
    assert out[0].payload["message_count"] == 2
    assert [m["content"] for m in run(store.history("f"))] == ["u0", "a0"]
    out = run(store.fork("src", session_row("g"), u1, "t"))
    assert [m["content"] for m in run(store.history("g"))] == ["u0", "a0", "u1"]
    # An empty source forks into an empty session.
    make(store, "empty")
    out = run(store.fork("empty", session_row("h"), None, "t"))
    assert [e.kind for e in out] == [k.SESSION_FORKED]
    assert out[0].payload["message_count"] == 0


def test_fork_through_an_inactive_message_creates_nothing(store: Store) -> None:
    make(store, "src")
    _u0, _a0, u1, a1 = _conversation(store, "src", 2)
    run(store.rewind("src", u1, expected_head_seq=a1))
    before = _footprint(store)
    with pytest.raises(MessageNotFound):
        run(store.fork("src", session_row("f"), a1, "t"))
    assert run(store.get_session("f")) is None
    assert _footprint(store) == before
    with pytest.raises(SessionNotFound):
        run(store.fork("nobody", session_row("g"), None, "t"))
    assert run(store.get_session("g")) is None


# -- 5. checkpoint repair -------------------------------------------------------------------------


def _compacted(store: Store) -> tuple[Checkpoint, Checkpoint, int]:
    """Session `a` with two valid checkpoints; returns them and the newest one's event seq."""
    make(store, "a")
    _u0, a0, _u1, a1 = _conversation(store, "a", 2)
    cp1 = checkpoint_for(store, "a", a0, "c1")
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp1)))
    cp2 = checkpoint_for(store, "a", a1, "c2")
    e2 = run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp2)))
    say(store, "a", user("after"))
    return cp1, cp2, e2.seq


def _checkpoint_row(store: Store) -> list[tuple[Any, ...]]:
    return rows(store, "SELECT session_id, event_seq, checkpoint_json FROM compaction_checkpoints")


@pytest.mark.parametrize(
    "corrupt",
    [
        "UPDATE compaction_checkpoints SET checkpoint_json = '{not json'",
        "UPDATE compaction_checkpoints SET checkpoint_json = '[1, 2]'",
        "UPDATE compaction_checkpoints SET checkpoint_json ="
        " json_set(checkpoint_json, '$.version', 99)",
        "UPDATE compaction_checkpoints SET checkpoint_json ="
        " json_set(checkpoint_json, '$.source_digest', 'bad')",
        "UPDATE compaction_checkpoints SET checkpoint_json = json_remove(checkpoint_json, '$.id')",
        "DELETE FROM compaction_checkpoints",
    ],
    ids=["garbage-json", "not-an-object", "wrong-version", "wrong-digest", "no-id", "missing"],
)
def test_broken_checkpoint_row_is_rebuilt_from_events(store: Store, corrupt: str) -> None:
    _cp1, cp2, seq2 = _compacted(store)
    store.db.call(lambda c: c.execute(corrupt))
    assert run(store.checkpoint("a")) == cp2
    [(sid, seq, stored)] = _checkpoint_row(store)
    assert (sid, seq, json.loads(stored)) == ("a", seq2, cp2)
    assert_clean(store)


def test_checkpoint_repair_skips_invalid_events_for_an_older_valid_one(store: Store) -> None:
    make(store, "a")
    _u0, a0, _u1, a1 = _conversation(store, "a", 2)
    cp1 = checkpoint_for(store, "a", a0, "c1")
    e1 = run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp1)))
    # A format we do not migrate.
    stale: Checkpoint = {**checkpoint_for(store, "a", a1, "c2"), "version": 2}
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, stale)))
    assert run(store.checkpoint("a")) == cp1
    [(_sid, seq, stored)] = _checkpoint_row(store)
    assert (seq, json.loads(stored)) == (e1.seq, cp1)


def test_checkpoint_with_no_valid_candidate_is_dropped(store: Store) -> None:
    make(store, "a")
    _u0, a0 = _conversation(store, "a", 1)
    bad: Checkpoint = {**checkpoint_for(store, "a", a0, "c1"), "source_digest": "0" * 64}
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, bad)))
    assert count(store, "compaction_checkpoints") == 1
    assert run(store.checkpoint("a")) is None
    assert count(store, "compaction_checkpoints") == 0
    assert run(store.checkpoint("a")) is None
    assert run(store.checkpoint("nobody")) is None


def test_checkpoint_repair_ignores_compactions_before_the_last_rewind(store: Store) -> None:
    make(store, "a")
    _u0, a0, u1, a1 = _conversation(store, "a", 2)
    cp = checkpoint_for(store, "a", a0)
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp)))
    run(store.rewind("a", u1, expected_head_seq=a1))
    assert run(store.checkpoint("a")) == cp  # still valid: it lies below the rewind target
    store.db.call(lambda c: c.execute("UPDATE compaction_checkpoints SET checkpoint_json = 'x'"))
    assert run(store.checkpoint("a")) is None
    assert count(store, "compaction_checkpoints") == 0
    # A compaction after the rewind is a candidate again.
    cp2 = checkpoint_for(store, "a", a0, "c2")
    run(store.append(EventDraft("a", k.COMPACTION_COMPLETED, cp2)))
    store.db.call(lambda c: c.execute("DELETE FROM compaction_checkpoints"))
    assert run(store.checkpoint("a")) == cp2


# -- 6. delete ------------------------------------------------------------------------------------

_SESSION_TABLES = {
    "events": "session_id",
    "message_projection": "session_id",
    "usage_records": "session_id",
    "compaction_checkpoints": "session_id",
    "context_accepted_boundaries": "session_id",
    "stream_snapshots": "session_id",
    "file_changes": "session_id",
    "file_rewind_journals": "session_id",
    "sessions": "id",
}
_LEDGERS = ("usage_daily_ledger", "usage_message_daily_ledger", "usage_session_days")


def _populate(store: Store, sid: str, shared: bytes, own: bytes) -> None:
    make(store, sid)
    u = say(store, sid, user()).seq
    msg, blobs = tool_change(f"/w/{sid}", own, shared)
    say(store, sid, msg, blobs=blobs)
    spent = cast(Usage, {"model": "m", "input_tokens": 7})  # partial: a missing count is 0
    run(store.append(EventDraft(sid, k.USAGE_UPDATED, spent)))
    run(store.append(EventDraft(sid, k.COMPACTION_COMPLETED, checkpoint_for(store, sid, u))))
    _accept(store, sid, "r", u)
    store.db.call(
        lambda c: c.execute(
            "INSERT INTO stream_snapshots(session_id, run_id, message_json, updated_at_ns)"
            " VALUES (?, ?, '{}', 1)",
            (sid, sid),
        )
    )
    image = journals.FileImage(True, 0o644, f"journal {sid}".encode())
    jf = journals.JournalFile(f"/w/{sid}.j", image, journals.FileImage(False), "restored")
    store.db.call(lambda c: journals.create(c, sid, u, [jf], time.time_ns()))


def test_delete_session_removes_its_facts_and_projections_but_keeps_ledgers(store: Store) -> None:
    _populate(store, "a", b"shared", b"only a")
    _populate(store, "b", b"shared", b"only b")
    ledgers = {t: sorted(rows(store, f"SELECT * FROM {t}")) for t in _LEDGERS}
    b_rows = {t: count(store, t, f"{c} = 'b'") for t, c in _SESSION_TABLES.items()}
    assert all(b_rows.values()), b_rows

    run(store.delete_session("a"))
    for table, column in _SESSION_TABLES.items():
        assert count(store, table, f"{column} = 'a'") == 0, table
        assert count(store, table, f"{column} = 'b'") == b_rows[table], table
    assert count(store, "file_rewind_journal_files") == 1  # b's only
    assert {t: sorted(rows(store, f"SELECT * FROM {t}")) for t in _LEDGERS} == ledgers
    blobs = {r[0] for r in rows(store, "SELECT hash FROM file_blobs")}
    assert sha(b"shared") in blobs  # b still references it
    assert sha(b"only a") not in blobs and sha(b"journal a") not in blobs
    assert {sha(b"only b"), sha(b"journal b")} <= blobs
    assert rows(store, "SELECT session_id FROM deleted_sessions") == [("a",)]
    assert run(store.get_session("a")) is None
    assert_clean(store)


def test_deleted_session_refuses_late_writes(store: Store) -> None:
    make(store, "a")
    u0, a0 = _conversation(store, "a", 1)
    run(store.delete_session("a"))
    head = run(store.head_seq())
    for attempt in (
        lambda: say(store, "a", user("late")),
        # A partial usage will do: an append to a deleted session is refused.
        lambda: run(store.append(EventDraft("a", k.USAGE_UPDATED, cast(Usage, {"model": "m"})))),
        lambda: run(
            store.update_session(
                "a", {"title": "x"}, lambda row: EventDraft("a", k.SESSION_UPDATED, row)
            )
        ),
        lambda: run(store.rewind("a", u0, expected_head_seq=a0)),
        lambda: run(store.fork("a", session_row("f"), None, "t")),
    ):
        with pytest.raises(SessionDeleted) as info:
            attempt()
        assert isinstance(info.value, NotFound)
    assert run(store.head_seq()) == head
    assert count(store, "events") == 0
    assert run(store.get_session("f")) is None


def test_update_session_appends_its_events_atomically(store: Store) -> None:
    make(store, "a")

    def updated(row: dict[str, object]) -> EventDraft:
        return EventDraft("a", k.SESSION_UPDATED, {"title": row["title"]})

    # A partial start: only the kind and the order of the events are checked.
    then = [EventDraft("a", k.TURN_STARTED, cast(TurnStarted, {"run_id": "r"}))]
    events = run(store.update_session("a", {"title": "T"}, updated, then))
    assert [e.kind for e in events] == [k.SESSION_UPDATED, k.TURN_STARTED]
    assert events[0].payload == {"title": "T"}  # built from the row as updated
    got = run(store.get_session("a"))
    assert got is not None and got["title"] == "T"
    with pytest.raises(SessionNotFound):
        run(store.update_session("zz", {"title": "T"}, updated))
    with pytest.raises(ValueError, match="unknown session columns"):
        run(store.update_session("a", {"bogus": 1}, updated, then))
    assert count(store, "events") == 2


# -- 7. a newer schema is refused untouched -------------------------------------------------------


def _newer_db(data_dir: Path) -> str:
    data_dir.mkdir(parents=True)
    path = data_dir / "foya.db"
    raw(path, "CREATE TABLE events (seq INTEGER PRIMARY KEY, future TEXT)")
    raw(path, f"PRAGMA user_version = {schema.VERSION + 1}")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_newer_schema_is_refused_and_left_untouched(data_dir: Path) -> None:
    digest = _newer_db(data_dir)
    s = Store(data_dir)
    with pytest.raises(SchemaTooNew) as info:
        s.open()
    s.close()
    assert info.value.code == "schema_too_new"
    assert str(schema.VERSION + 1) in str(info.value)
    assert hashlib.sha256((data_dir / "foya.db").read_bytes()).hexdigest() == digest
    assert raw(data_dir / "foya.db", "PRAGMA user_version") == [(schema.VERSION + 1,)]


def test_foya_serve_and_check_refuse_a_newer_schema(data_dir: Path) -> None:
    digest = _newer_db(data_dir)
    short = Path(tempfile.mkdtemp(prefix="fy", dir="/tmp"))  # Unix socket paths must be short
    try:
        serve = foya("serve", "--data-dir", str(data_dir), "--socket", str(short / "k.sock"))
        assert not (short / "k.sock").exists()
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert serve.returncode != 0
    lines = serve.stderr.strip().splitlines()
    assert len(lines) == 1, serve.stderr
    assert "schema" in lines[0] and str(schema.VERSION + 1) in lines[0]
    for args in ([], ["--repair"]):
        result = foya("check", "--data-dir", str(data_dir), *args)
        assert result.returncode != 0, args
        assert "schema" in result.stderr and str(schema.VERSION + 1) in result.stderr
    assert hashlib.sha256((data_dir / "foya.db").read_bytes()).hexdigest() == digest


# -- 8. startup recovery and retention ------------------------------------------------------------


def test_recovery_resets_phases_and_clears_stream_snapshots(store: Store) -> None:
    make(store, "busy", phase="turn")
    make(store, "idle")
    started: TurnStarted = {"run_id": "busy", "started_at": "t"}
    run(store.append(EventDraft("busy", k.TURN_STARTED, started, "busy")))
    store.db.call(
        lambda c: c.execute(
            "INSERT INTO stream_snapshots(session_id, run_id, message_json, updated_at_ns)"
            " VALUES ('busy', 'busy', '{\"role\":\"assistant\"}', 1)"
        )
    )
    run(recover(store))
    assert rows(store, "SELECT id, phase FROM sessions ORDER BY id") == [
        ("busy", "idle"),
        ("idle", "idle"),
    ]
    assert count(store, "stream_snapshots") == 0
    # The interrupted turn is closed once: an empty partial adds no message, only turn_complete.
    kinds = rows(store, "SELECT kind FROM events WHERE session_id = 'busy' ORDER BY seq")
    assert kinds == [("turn_started",), ("turn_complete",)]
    report = run(store.recover())  # idempotent
    assert (report.sessions_reset, report.turns_interrupted, report.pending_journals) == (0, 0, [])


def test_recovery_rolls_back_a_half_applied_rewind_journal(store: Store, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    make(store, "a")
    u = say(store, "a", user()).seq
    applied, pending, created, gone = (work / n for n in ("applied", "pending", "created", "gone"))
    # Originals (what the files were when the rewind began).
    applied.write_bytes(b"applied original\n")
    applied.chmod(0o640)
    pending.write_bytes(b"pending original\n")
    pending.chmod(0o755)
    gone.write_bytes(b"gone original\n")
    gone.chmod(0o600)
    files = [
        journals.JournalFile(
            str(applied),
            journals.FileImage(True, 0o640, b"applied original\n"),
            journals.FileImage(True, 0o600, b"applied target\n"),
            "restored",
        ),
        journals.JournalFile(
            str(pending),
            journals.FileImage(True, 0o755, b"pending original\n"),
            journals.FileImage(True, 0o644, b"pending target\n"),
            "restored",
        ),
        journals.JournalFile(
            str(created),
            journals.FileImage(False),
            journals.FileImage(True, 0o644, b"created by the rewind\n"),
            "restored",
        ),
        journals.JournalFile(
            str(gone),
            journals.FileImage(True, 0o600, b"gone original\n"),
            journals.FileImage(False),
            "restored",
        ),
    ]
    jid = store.db.call(lambda c: journals.create(c, "a", u, files, time.time_ns()), write=True)
    # The crash came half-way: two files already have their target image, one does not.
    applied.write_bytes(b"applied target\n")
    applied.chmod(0o600)
    created.write_bytes(b"created by the rewind\n")
    gone.unlink()
    assert count(store, "file_blobs") == 6

    run(recover(store))
    assert applied.read_bytes() == b"applied original\n"
    assert stat.S_IMODE(applied.stat().st_mode) == 0o640
    assert pending.read_bytes() == b"pending original\n"
    assert stat.S_IMODE(pending.stat().st_mode) == 0o755
    assert gone.read_bytes() == b"gone original\n"
    assert stat.S_IMODE(gone.stat().st_mode) == 0o600
    assert not created.exists()
    assert count(store, "file_rewind_journals", "id = ?", (jid,)) == 0
    assert count(store, "file_rewind_journal_files") == 0
    assert count(store, "file_blobs") == 0  # journal images are collected with the journal
    assert count(store, "events", "kind = ?", (k.HISTORY_REWOUND,)) == 0
    assert history_seqs(store, "a") == [u]
    assert sorted(os.listdir(work)) == ["applied", "gone", "pending"]  # no temp files left
    run(recover(store))  # nothing left to do
    assert applied.read_bytes() == b"applied original\n"


def _append_at(store: Store, when_ns: int, d: EventDraft) -> int:
    return store.db.call(lambda c: log.append(c, d, now_ns=when_ns).seq)


def _change_at(store: Store, sid: str, when_ns: int, content: bytes) -> int:
    msg, blobs = tool_change(f"/w/{content.decode()}", content)
    return _append_at(store, when_ns, EventDraft(sid, k.MESSAGE_END, msg, blobs=blobs))


def _fill(store: Store, sid: str) -> dict[str, int]:
    """Changes placed around the retention limits (100 user messages, 30 days)."""
    now = time.time_ns()
    seqs = {"old": _change_at(store, sid, now - 31 * DAY_NS, f"{sid}-31-days".encode())}
    seqs["recent"] = _change_at(store, sid, now - 29 * DAY_NS, f"{sid}-29-days".encode())
    _append_at(store, now, EventDraft(sid, k.MESSAGE_END, user("first")))
    seqs["before_100th"] = _change_at(store, sid, now, f"{sid}-before".encode())
    for i in range(100):
        _append_at(store, now, EventDraft(sid, k.MESSAGE_END, user(f"u{i}")))
        if i == 0:
            seqs["after_100th"] = _change_at(store, sid, now, f"{sid}-after".encode())
    seqs["newest"] = _change_at(store, sid, now, f"{sid}-newest".encode())
    return seqs


def test_retention_prunes_unpinned_sessions_and_collects_blobs(store: Store) -> None:
    make(store, "free")
    make(store, "pinned", pinned_at_ns=time.time_ns())
    free, pinned = _fill(store, "free"), _fill(store, "pinned")
    # "recent" is older than 100 user messages ago as well as 29 days old: pruned by count.
    kept = {free["after_100th"], free["newest"]}
    assert run(store.prune()) == len(free) - len(kept)
    assert {
        r[0] for r in rows(store, "SELECT event_seq FROM file_changes WHERE session_id = 'free'")
    } == kept
    assert {
        r[0] for r in rows(store, "SELECT event_seq FROM file_changes WHERE session_id = 'pinned'")
    } == set(pinned.values())
    blobs = {r[0] for r in rows(store, "SELECT hash FROM file_blobs")}
    assert blobs == {sha(f"free-{n}".encode()) for n in ("after", "newest")} | {
        sha(f"pinned-{n}".encode()) for n in ("31-days", "29-days", "before", "after", "newest")
    }
    # The events themselves stay (file recovery is not history).
    assert count(store, "events", "seq IN (?, ?)", (free["old"], free["before_100th"])) == 2
    assert_clean(store)
    assert run(store.prune()) == 0


def test_retention_by_age_alone(store: Store) -> None:
    make(store, "a")
    now = time.time_ns()
    old = _change_at(store, "a", now - 31 * DAY_NS, b"old")
    young = _change_at(store, "a", now - 29 * DAY_NS, b"young")
    report = run(store.recover())  # startup recovery prunes too
    assert report.file_changes_pruned == 1
    assert rows(store, "SELECT event_seq FROM file_changes") == [(young,)]
    assert {r[0] for r in rows(store, "SELECT hash FROM file_blobs")} == {sha(b"young")}
    assert old < young
    assert_clean(store)
