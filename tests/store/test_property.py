"""Property test: random histories across a few sessions keep the store consistent.

Each example drives a fresh `Store` through a random sequence of appends (messages, file changes,
usage, checkpoints, accepted boundaries), rewinds, forks, deletes and session creations while a
small in-test model tracks what must be true. Afterwards every read agrees with the model and
`foya check` (the replay of the event log through the projections) finds no difference.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app import events as k
from app.events import (
    Checkpoint,
    ContextRequestAccepted,
    EventDraft,
    FileReviewResolved,
    Message,
    Usage,
)
from app.store import Store
from app.store.check import check
from app.store.events import SessionDeleted
from app.store.history import HistoryChanged

from .conftest import checkpoint_for, rows, session_row, sha

PATHS = ("/w/a.txt", "/w/b.txt", "/w/c.txt")
CONTENTS = (b"alpha\n", b"beta\n", b"gamma\n" * 40, b"")
MODELS = ("m1", "m2")
ROUTES = ("r1", "r2")

slot = st.integers(0, 3)
pick = st.integers(0, 1000)
USER = st.tuples(st.just("user"), slot)
ASSISTANT = st.tuples(st.just("assistant"), slot)
TOOL = st.tuples(st.just("tool"), slot, st.integers(0, 2), st.integers(0, 3), st.booleans())
REWIND = st.tuples(st.just("rewind"), slot, pick, st.booleans())
OPS = st.one_of(
    # Messages are the bulk of a history, so they come up more often.
    USER,
    USER,
    USER,
    ASSISTANT,
    ASSISTANT,
    TOOL,
    TOOL,
    REWIND,
    REWIND,
    st.tuples(
        st.just("usage"), slot, st.sampled_from(MODELS), st.integers(0, 500), st.integers(0, 500)
    ),
    st.tuples(st.just("compact"), slot, pick),
    st.tuples(st.just("accept"), slot, st.sampled_from(ROUTES), pick),
    st.tuples(st.just("fork"), slot, st.none() | pick),
    st.tuples(st.just("review"), slot, st.sampled_from(("kept", "undone"))),
    st.tuples(st.just("delete"), slot),
    st.tuples(
        st.just("create"),
    ),
    st.tuples(st.just("late"), st.sampled_from(("user", "usage"))),
)


@dataclass
class Msg:
    seq: int
    payload: Message
    active: bool = True


@dataclass
class Sess:
    msgs: list[Msg] = field(default_factory=list)
    events: list[tuple[int, str]] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    boundaries: dict[str, tuple[int, int]] = field(default_factory=dict)
    usage: list[tuple[int, str, int, int]] = field(default_factory=list)
    # event_seq -> (path, before hash, after hash, review state)
    changes: dict[int, tuple[str, str | None, str | None, str]] = field(default_factory=dict)

    def active(self) -> list[Msg]:
        return [m for m in self.msgs if m.active]

    def head(self) -> int:
        live = self.active()
        return live[-1].seq if live else 0


@dataclass
class Model:
    sessions: dict[str, Sess] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    created: int = 0
    head: int = 0
    user_messages: int = 0
    requests: int = 0
    tokens: int = 0

    def new_id(self) -> str:
        self.created += 1
        return f"s{self.created}"

    def live(self, index: int) -> str | None:
        ids = sorted(self.sessions)
        return ids[index % len(ids)] if ids else None

    def record(self, sid: str, seq: int, kind: str) -> None:
        assert seq == self.head + 1, f"seq {seq} after head {self.head}"
        self.head = seq
        self.sessions[sid].events.append((seq, kind))


async def apply(store: Store, model: Model, op: tuple[Any, ...]) -> None:
    name, args = op[0], op[1:]
    sid: str | None
    if name == "create":
        if len(model.sessions) < 3:
            sid = model.new_id()
            await store.create_session(session_row(sid))
            model.sessions[sid] = Sess()
            event("op create")
        return
    if name == "late":
        if not model.deleted:
            return
        sid = sorted(model.deleted)[0]
        late = (
            EventDraft(sid, k.MESSAGE_END, {"role": "user", "content": "late"})
            if args[0] == "user"
            # A partial usage will do: an append to a deleted session is refused.
            else EventDraft(sid, k.USAGE_UPDATED, cast(Usage, {"model": "m1"}))
        )
        try:
            await store.append(late)
        except SessionDeleted:
            event("op late append refused")
            return
        raise AssertionError("an append to a deleted session was accepted")

    sid = model.live(args[0])
    if sid is None:
        return
    s = model.sessions[sid]

    if name in ("user", "assistant", "tool"):
        payload: Message = {"role": name, "content": f"{name} {model.head + 1}"}
        blobs: dict[str, bytes] = {}
        if name == "tool":
            _, path_i, content_i, had_before = args
            after = CONTENTS[content_i]
            before = CONTENTS[(content_i + 1) % len(CONTENTS)] if had_before else None
            blobs = {sha(b): b for b in (after, before) if b is not None}
            payload["file_change"] = {
                "path": PATHS[path_i],
                "before_exists": had_before,
                "before_mode": 0o644 if had_before else None,
                "after_mode": 0o600,
                "before_blob": sha(before) if before is not None else None,
                "after_blob": sha(after),
            }
        ev = await store.append(EventDraft(sid, k.MESSAGE_END, payload, blobs=blobs))
        model.record(sid, ev.seq, k.MESSAGE_END)
        s.msgs.append(Msg(ev.seq, payload))
        if name == "user":
            model.user_messages += 1
        if name == "tool":
            fc = payload["file_change"]
            s.changes[ev.seq] = (fc["path"], fc["before_blob"], fc["after_blob"], "pending")
    elif name == "usage":
        _, model_name, inp, out = args
        # A partial usage: a missing count is 0, a missing total is input + output.
        usage = cast(Usage, {"model": model_name, "input_tokens": inp, "output_tokens": out})
        ev = await store.append(EventDraft(sid, k.USAGE_UPDATED, usage))
        model.record(sid, ev.seq, k.USAGE_UPDATED)
        s.usage.append((ev.seq, model_name, inp, out))
        model.requests += 1
        model.tokens += inp + out
    elif name == "compact":
        active = s.active()
        if not active:
            return
        through = active[args[1] % len(active)].seq
        cp = checkpoint_for(store, sid, through, f"c{model.head + 1}")
        ev = await store.append(EventDraft(sid, k.COMPACTION_COMPLETED, cp))
        model.record(sid, ev.seq, k.COMPACTION_COMPLETED)
        s.checkpoint = cp
    elif name == "accept":
        _, route, choice = args
        active = s.active()
        through = active[choice % len(active)].seq if active else 0
        # A partial boundary: a missing count or size is 0.
        boundary = cast(
            ContextRequestAccepted, {"session_id": sid, "route": route, "through_seq": through}
        )
        ev = await store.append(EventDraft(sid, k.CONTEXT_REQUEST_ACCEPTED, boundary))
        model.record(sid, ev.seq, k.CONTEXT_REQUEST_ACCEPTED)
        s.boundaries[route] = (ev.seq, through)
    elif name == "rewind":
        _, choice, stale = args
        users = [m for m in s.active() if m.payload["role"] == "user"]
        if not users:
            return
        target = users[choice % len(users)].seq
        if stale:
            try:
                await store.rewind(sid, target, expected_head_seq=s.head() + 1)
            except HistoryChanged:
                event("op stale rewind refused")
                return
            raise AssertionError("a rewind with a stale head was accepted")
        ev = await store.rewind(sid, target, expected_head_seq=s.head())
        model.record(sid, ev.seq, k.HISTORY_REWOUND)
        for m in s.msgs:
            if m.seq >= target:
                m.active = False
        # The rewind settles the file changes it takes back: nothing is left to review.
        for seq, (p, b, a, state) in list(s.changes.items()):
            if seq >= target and state == "pending":
                s.changes[seq] = (p, b, a, "rewound")
        if s.checkpoint is not None and s.checkpoint["through_seq"] >= target:
            s.checkpoint = None
        s.boundaries = {r: b for r, b in s.boundaries.items() if b[1] < target}
    elif name == "fork":
        if len(model.sessions) >= 4:
            return
        active = s.active()
        through = None if args[1] is None or not active else active[args[1] % len(active)].seq
        copies = [m for m in active if through is None or m.seq <= through]
        new = model.new_id()
        out = await store.fork(
            sid, session_row(new, parent_id=sid), through, "2025-01-01T00:00:00Z"
        )
        model.sessions[new] = f = Sess()
        assert out[0].kind == k.SESSION_FORKED
        assert out[0].payload == {
            "source_session_id": sid,
            "through_seq": through if through is not None else s.head(),
            "forked_at": "2025-01-01T00:00:00Z",
            "message_count": len(copies),
        }
        model.record(new, out[0].seq, k.SESSION_FORKED)
        assert len(out) == len(copies) + 1
        for ev, m in zip(out[1:], copies, strict=True):
            assert ev.kind == k.MESSAGE_IMPORTED
            model.record(new, ev.seq, k.MESSAGE_IMPORTED)
            f.msgs.append(Msg(ev.seq, m.payload.copy()))
    elif name == "review":
        through = s.events[-1][0] if s.events else 0
        review: FileReviewResolved = {"action": args[1], "through_seq": through}
        ev = await store.append(EventDraft(sid, k.FILE_REVIEW_RESOLVED, review))
        model.record(sid, ev.seq, k.FILE_REVIEW_RESOLVED)
        for seq, (p, b, a, state) in list(s.changes.items()):
            if seq <= through and state == "pending":
                s.changes[seq] = (p, b, a, args[1])
    elif name == "delete":
        await store.delete_session(sid)
        del model.sessions[sid]
        model.deleted.add(sid)
    else:  # pragma: no cover
        raise AssertionError(name)

    event(f"op {name}")
    if sid in model.sessions:
        history = await store.history(sid)
        assert history == [{**m.payload, "event_seq": m.seq} for m in s.active()]


async def verify(store: Store, model: Model) -> None:
    assert await store.head_seq() == model.head
    assert {r[0] for r in rows(store, "SELECT id FROM sessions")} == set(model.sessions)
    assert {r[0] for r in rows(store, "SELECT session_id FROM deleted_sessions")} == model.deleted
    all_events = sorted(
        (seq, sid, kind) for sid, s in model.sessions.items() for seq, kind in s.events
    )
    assert [(e.seq, e.session, e.kind) for e in await store.events_after(0, 10_000)] == all_events
    referenced: set[str] = set()
    for sid, s in model.sessions.items():
        assert await store.history(sid) == [{**m.payload, "event_seq": m.seq} for m in s.active()]
        assert await store.history_head(sid) == s.head()
        assert await store.checkpoint(sid) == s.checkpoint
        got = rows(
            store,
            "SELECT route, event_seq, through_seq FROM context_accepted_boundaries"
            " WHERE session_id = ?",
            (sid,),
        )
        assert {r: (e, t) for r, e, t in got} == s.boundaries
        got = rows(
            store,
            "SELECT event_seq, model, input_tokens, output_tokens FROM usage_records"
            " WHERE session_id = ? ORDER BY event_seq",
            (sid,),
        )
        assert got == s.usage
        got = rows(
            store,
            "SELECT event_seq, path, before_blob_hash, after_blob_hash, review_state"
            " FROM file_changes WHERE session_id = ?",
            (sid,),
        )
        assert {seq: rest for seq, *rest in got} == {q: list(c) for q, c in s.changes.items()}
        for _, before, after, _ in s.changes.values():
            referenced |= {h for h in (before, after) if h is not None}
        inactive = rows(
            store,
            "SELECT event_seq FROM message_projection WHERE session_id = ? AND active = 0",
            (sid,),
        )
        assert {r[0] for r in inactive} == {m.seq for m in s.msgs if not m.active}
    # Blobs are stored once and collected when the last reference goes.
    assert {r[0] for r in rows(store, "SELECT hash FROM file_blobs")} == referenced
    # Ledgers count everything ever appended, deleted sessions included.
    [(requests, tokens)] = rows(
        store,
        "SELECT COALESCE(SUM(request_count), 0), COALESCE(SUM(total_tokens), 0)"
        " FROM usage_daily_ledger",
    )
    assert (requests, tokens) == (model.requests, model.tokens)
    [(messages,)] = rows(
        store, "SELECT COALESCE(SUM(message_count), 0) FROM usage_message_daily_ledger"
    )
    assert messages == model.user_messages


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=st.lists(OPS, min_size=25, max_size=60))
def test_random_histories_stay_consistent(ops: list[tuple[Any, ...]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="foya-prop-"))
    store = Store(tmp)
    store.open()
    try:

        async def scenario() -> None:
            model = Model()
            for _ in range(2):
                await apply(store, model, ("create",))
            for op in ops:
                await apply(store, model, op)
            await verify(store, model)
            event(f"live sessions at the end: {len(model.sessions)}")
            event(f"seqs: {'<20' if model.head < 20 else '20+'}")

        asyncio.run(scenario())
    finally:
        store.close()
    try:
        report = check(tmp / "foya.db")
        assert report.clean, report.differences
        assert report.events == len(stored_seqs(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def stored_seqs(tmp: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(tmp / "foya.db")
    try:
        return conn.execute("SELECT seq FROM events").fetchall()
    finally:
        conn.close()
