"""Event-store benchmark: `app.store.Store` against raw sqlite3 with the same pragmas.

Run from the repository root:

    .venv/bin/python -m bench.store            # table
    .venv/bin/python -m bench.store --json     # machine-readable results on stdout
    .venv/bin/python -m bench.store --quick    # fewer rows and rounds, a 30k-event session

What it measures, all in one run so the ratios compare like with like. Every run gets a fresh
data directory under the system temp dir (the same filesystem as /tmp), removed afterwards.

1. Sequential appends. The store side awaits `Store.append(EventDraft(session, "message_end",
   {"role": "user"|"assistant", "content": ...}))` one at a time: a ~300-byte payload, stored
   with its projections (message_projection; daily ledgers for user messages), each write its
   own group-commit batch of one. The baseline is a bare sqlite3 connection made by
   `app.store.db.connect()` (so the same pragmas: WAL, synchronous=FULL, foreign keys,
   auto_vacuum) running `BEGIN; INSERT INTO t(...) VALUES (...); COMMIT` per row of the same
   JSON. Each round opens both sides fresh and alternates between them every `--block` rows
   (A/B, B/A, ...) after a short warm-up, so drift in fsync latency hits both alike; the table
   shows medians over rounds. Commits are fsync-bound, so counts are kept small. The baseline
   is stricter than the store's work: one row in one unindexed table, where the store writes
   two to four rows in indexed tables (more WAL pages per fsync). So after each pair of blocks
   a third, informational side writes the store's rows in the store's schema by plain
   statements, one transaction per append; the table shows the store against it as well.
2. Group commit. 16 asyncio tasks, each appending N events one at a time to its own session,
   against the raw limit: plain sqlite3 writing the rows the store writes for the same events
   (event, projection row, usage-ledger rows of user messages) in the store's own schema, 16 per
   transaction; and against the sequential store figure of (1). Because fsync latency on a
   shared machine drifts by several x within a minute, each round also re-measures sequential
   store appends right next to the group run (order alternating), and that ratio is shown too.
   One extra round runs with an SQL trace callback on the store connection (installed from the
   store thread; nothing in `app` is wrapped) to count COMMITs and the writes each one carried;
   its throughput is shown but not used.
3. A 100k-event session, built in one transaction (`Store.db.call` running
   `app.store.events.append` in a loop), then the store is closed. Fresh worker processes then
   reopen it and measure (a) open + the first page `history(session, 0, 200)`, (b) the full
   active history read page by page (1000 per page by after_seq, keeping only a count), and
   (c) the full history in one `history(session)` call. Memory growth is the ru_maxrss delta
   of the timed pass plus the tracemalloc peak of a second, traced pass (tracemalloc slows
   Python down, so it never overlaps a timing). The OS page cache is warm: the file was just
   written.

No assertion is made on any figure: targets are printed next to the results.
MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.events import MESSAGE_END, EventDraft, Message
from app.store import Store, sessions
from app.store import events as log
from app.store.db import PRAGMAS, connect
from app.store.projections import day_of, dumps
from app.store.schema import migrate
from bench.harness import ROOT, say
from bench.report import Row, finish, python, rows_of, table, verdicts

TARGET_SEQ_RATIO = 0.8  # store / raw sqlite, at least
# 16 concurrent appenders / raw sqlite3 writing the same rows in the same schema in 16-row
# transactions: the most group commit could reach.
TARGET_RAW_LIMIT_RATIO = 0.8
TARGET_OPEN_MS = 200.0  # open + first page of a 100k session, at most
TARGET_MEM_MB = 50.0  # memory growth while paging through 100k messages, at most

PAYLOAD_BYTES = 300  # encoded JSON size of every appended payload
FIRST_PAGE = 200
PAGE = 1000

MB = 1_000_000


# ---------------------------------------------------------------------------------------------
# Fixtures


_FILLER = (
    "The quick brown fox jumps over the lazy dog while the kernel appends another fact to "
    "the log; every message is stored once, projected once and read back by seq. "
) * 4


def payload(i: int) -> Message:
    """Message `i`: user/assistant alternating, content padded so the JSON is ~300 bytes."""
    role = "user" if i % 2 == 0 else "assistant"
    head = f"#{i:07d} "
    empty = len(dumps({"role": role, "content": head}).encode())
    return {"role": role, "content": head + _FILLER[: PAYLOAD_BYTES - empty]}


def draft(session: str, i: int) -> EventDraft:
    return EventDraft(session=session, kind=MESSAGE_END, payload=payload(i))


def session_row(session: str) -> dict[str, Any]:
    now = time.time_ns()
    return {"id": session, "created_at_ns": now, "updated_at_ns": now}


@contextlib.contextmanager
def fresh_dir(tag: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"foya-bench-store-{tag}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


# ---------------------------------------------------------------------------------------------
# 1. Sequential appends


RAW_TABLE = (
    "CREATE TABLE t(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " occurred_at_ns INTEGER NOT NULL, payload_json TEXT)"
)
RAW_INSERT = "INSERT INTO t(session_id, kind, occurred_at_ns, payload_json) VALUES (?, ?, ?, ?)"


# The store's statements for a `message_end` (app/store/events.py, app/store/projections.py).
RAW_EVENT = (
    "INSERT INTO events(session_id, run_id, kind, occurred_at_ns, payload_json)"
    " VALUES (?, NULL, ?, ?, ?)"
)
RAW_MESSAGE = (
    "INSERT INTO message_projection(event_seq, session_id, role, active) VALUES (?, ?, ?, 1)"
)
RAW_MESSAGES_DAY = (
    "INSERT INTO usage_message_daily_ledger(day, message_count) VALUES (?, 1)"
    " ON CONFLICT(day) DO UPDATE SET message_count = message_count + 1"
)
RAW_SESSION_DAY = "INSERT OR IGNORE INTO usage_session_days(day, session_id) VALUES (?, ?)"


def raw_rows(conn: sqlite3.Connection, session: str, i: int) -> None:
    """The rows the store writes for `message_end` `i`, as plain statements (no transaction)."""
    body = payload(i)
    now = time.time_ns()
    cur = conn.execute(RAW_EVENT, (session, MESSAGE_END, now, dumps(body)))
    conn.execute(RAW_MESSAGE, (cur.lastrowid, session, body["role"]))
    if body["role"] == "user":
        conn.execute(RAW_MESSAGES_DAY, (day_of(now),))
        conn.execute(RAW_SESSION_DAY, (day_of(now), session))


def raw_batches(data_dir: Path, writers: int, per_writer: int) -> float:
    """The raw limit of group commit: the rows the store writes for each `message_end` (the
    event, its projection row and, for a user message, the two usage-ledger rows), in the
    store's own schema (same tables, indexes and AUTOINCREMENT), committed `writers` at a
    time by plain sqlite3 statements; rows/s."""
    conn = connect(data_dir / "raw16.db", check_same_thread=False)
    migrate(conn)
    began = time.perf_counter()
    for i in range(1, per_writer + 1):
        conn.execute("BEGIN")
        for w in range(writers):
            raw_rows(conn, f"w{w}", i)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - began
    conn.close()
    return writers * per_writer / elapsed


def raw_append(conn: sqlite3.Connection, i: int) -> None:
    """The baseline write: one row of the same JSON, its own transaction."""
    conn.execute("BEGIN")
    conn.execute(RAW_INSERT, ("s", MESSAGE_END, time.time_ns(), dumps(payload(i))))
    conn.execute("COMMIT")


def raw_rows_append(conn: sqlite3.Connection, i: int) -> None:
    """The informational side: the store's rows in the store's schema, its own transaction."""
    conn.execute("BEGIN")
    raw_rows(conn, "s", i)
    conn.execute("COMMIT")


async def _sequential_round(
    store_dir: Path, raw_dir: Path, rows: int, warmup: int, block: int, store_first: bool
) -> dict[str, Any]:
    """One round: both sides fresh, alternating in blocks of `block` rows (drift hits both).
    After each pair of blocks, an informational block of raw sqlite3 writing the store's rows."""
    store = Store(store_dir)
    store.open()
    raw = connect(raw_dir / "raw.db")
    same = connect(raw_dir / "rows.db")
    try:
        raw.execute(RAW_TABLE)
        migrate(same)
        await store.create_session(session_row("s"))
        for i in range(warmup):
            await store.append(draft("s", i))
            raw_append(raw, i)
            raw_rows_append(same, i)
        store_blocks: list[float] = []
        raw_blocks: list[float] = []
        rows_blocks: list[float] = []

        async def store_block(lo: int, hi: int) -> None:
            began = time.perf_counter()
            for i in range(lo, hi):
                await store.append(draft("s", i))
            store_blocks.append(time.perf_counter() - began)

        def raw_block(lo: int, hi: int) -> None:
            began = time.perf_counter()
            for i in range(lo, hi):
                raw_append(raw, i)
            raw_blocks.append(time.perf_counter() - began)

        def rows_block(lo: int, hi: int) -> None:
            began = time.perf_counter()
            for i in range(lo, hi):
                raw_rows_append(same, i)
            rows_blocks.append(time.perf_counter() - began)

        for n, lo in enumerate(range(warmup, warmup + rows, block)):
            hi = min(lo + block, warmup + rows)
            if (n % 2 == 0) == store_first:
                await store_block(lo, hi)
                raw_block(lo, hi)
            else:
                raw_block(lo, hi)
                await store_block(lo, hi)
            rows_block(lo, hi)
    finally:
        same.close()
        raw.close()
        store.close()
    return {
        "store_per_s": rows / sum(store_blocks),
        "raw_per_s": rows / sum(raw_blocks),
        "raw_rows_per_s": rows / sum(rows_blocks),
        "block_ratios": [r / s for s, r in zip(store_blocks, raw_blocks, strict=True)],
    }


def sequential(args: argparse.Namespace) -> dict[str, Any]:
    store_runs: list[float] = []
    raw_runs: list[float] = []
    rows_runs: list[float] = []
    block_ratios: list[float] = []
    for r in range(args.rounds):
        with fresh_dir("seq-store") as sd, fresh_dir("seq-raw") as rd:
            res = asyncio.run(
                _sequential_round(sd, rd, args.rows, args.warmup, args.block, r % 2 == 0)
            )
        store_runs.append(res["store_per_s"])
        raw_runs.append(res["raw_per_s"])
        rows_runs.append(res["raw_rows_per_s"])
        block_ratios += res["block_ratios"]
        say(
            f"  round {r + 1}/{args.rounds}: store {store_runs[-1]:,.0f}/s, "
            f"raw {raw_runs[-1]:,.0f}/s, raw with the store's rows {rows_runs[-1]:,.0f}/s"
        )
    store_med, raw_med = statistics.median(store_runs), statistics.median(raw_runs)
    return {
        "rows_per_round": args.rows,
        "warmup_rows": args.warmup,
        "block_rows": args.block,
        "rounds": args.rounds,
        "payload_bytes": len(dumps(payload(0)).encode()),
        "store_runs_per_s": [round(x, 1) for x in store_runs],
        "raw_runs_per_s": [round(x, 1) for x in raw_runs],
        "round_ratios": [round(s / b, 3) for s, b in zip(store_runs, raw_runs, strict=True)],
        "median_block_ratio": round(statistics.median(block_ratios), 3),
        "store_median_per_s": round(store_med, 1),
        "raw_median_per_s": round(raw_med, 1),
        "store_ms_per_append": round(1000 / store_med, 3),
        "raw_ms_per_commit": round(1000 / raw_med, 3),
        "ratio": round(store_med / raw_med, 3),
        "raw_rows_runs_per_s": [round(x, 1) for x in rows_runs],
        "raw_rows_median_per_s": round(statistics.median(rows_runs), 1),
        "ratio_vs_raw_rows": round(store_med / statistics.median(rows_runs), 3),
    }


# ---------------------------------------------------------------------------------------------
# 2. Group commit


class CommitTrace:
    """Counts appends per COMMIT from the store connection's trace callback: one
    `INSERT INTO events` per append, one `COMMIT` per batch."""

    def __init__(self) -> None:
        self.current = 0
        self.batches: list[int] = []

    def __call__(self, sql: str) -> None:
        if sql.startswith("INSERT INTO events("):
            self.current += 1
        elif sql == "COMMIT":
            self.batches.append(self.current)
            self.current = 0


async def _concurrent(data_dir: Path, writers: int, per_writer: int, trace: bool) -> dict[str, Any]:
    store = Store(data_dir)
    store.open()
    tracer = CommitTrace()
    try:
        names = [f"w{w}" for w in range(writers)]
        for s in names:
            await store.create_session(session_row(s))
        for s in names:  # warm-up: one event each, so every session has its projection rows
            await store.append(draft(s, 0))
        if trace:
            await store.db.read(lambda c: c.set_trace_callback(tracer))

        async def writer(session: str) -> None:
            for i in range(1, per_writer + 1):
                await store.append(draft(session, i))

        began = time.perf_counter()
        await asyncio.gather(*(writer(s) for s in names))
        elapsed = time.perf_counter() - began
        if trace:
            await store.db.read(lambda c: c.set_trace_callback(None))
        count = await store.db.read(lambda c: c.execute("SELECT COUNT(*) FROM events").fetchone())
    finally:
        store.close()
    total = writers * per_writer
    assert count[0] == total + writers, count  # correctness, not timing
    out: dict[str, Any] = {"events": total, "seconds": elapsed, "per_s": total / elapsed}
    if trace:
        out["batches"] = tracer.batches
    return out


async def _store_sequential(data_dir: Path, rows: int, warmup: int) -> float:
    """Store appends one at a time (the figure of scenario 1, re-measured next to scenario 2)."""
    store = Store(data_dir)
    store.open()
    try:
        await store.create_session(session_row("s"))
        for i in range(warmup):
            await store.append(draft("s", i))
        began = time.perf_counter()
        for i in range(warmup, warmup + rows):
            await store.append(draft("s", i))
        elapsed = time.perf_counter() - began
    finally:
        store.close()
    return rows / elapsed


def concurrent(args: argparse.Namespace, seq_store_per_s: float) -> dict[str, Any]:
    runs: list[float] = []
    adjacent: list[float] = []
    raw: list[float] = []
    for r in range(args.rounds):
        sides = ("group", "raw", "seq") if r % 2 == 0 else ("seq", "raw", "group")
        for side in sides:
            with fresh_dir(side) as d:
                if side == "group":
                    res = asyncio.run(_concurrent(d, args.writers, args.per_writer, trace=False))
                    runs.append(res["per_s"])
                elif side == "raw":
                    raw.append(raw_batches(d, args.writers, args.per_writer))
                else:
                    adjacent.append(asyncio.run(_store_sequential(d, args.adjacent, args.warmup)))
        say(
            f"  round {r + 1}/{args.rounds}: {runs[-1]:,.0f} events/s "
            f"(raw {args.writers}-row transactions {raw[-1]:,.0f}/s, "
            f"adjacent sequential store run {adjacent[-1]:,.0f}/s)"
        )
    with fresh_dir("group-trace") as d:
        traced = asyncio.run(_concurrent(d, args.writers, args.per_writer, trace=True))
    batches: list[int] = traced["batches"]
    say(
        f"  traced round: {traced['per_s']:,.0f} events/s, {len(batches)} commits, "
        f"mean batch {statistics.fmean(batches):.2f}"
    )
    med = statistics.median(runs)
    hist: dict[str, int] = {}
    for b in batches:
        key = str(b) if b < 16 else "16+"
        hist[key] = hist.get(key, 0) + 1
    return {
        "writers": args.writers,
        "events_per_writer": args.per_writer,
        "rounds": args.rounds,
        "runs_per_s": [round(x, 1) for x in runs],
        "median_per_s": round(med, 1),
        "ratio_vs_sequential_store": round(med / seq_store_per_s, 2),
        "raw_limit_runs_per_s": [round(x, 1) for x in raw],
        "ratio_vs_raw_limit": round(med / statistics.median(raw), 2),
        "adjacent_sequential_runs_per_s": [round(x, 1) for x in adjacent],
        "ratio_vs_adjacent_sequential": round(med / statistics.median(adjacent), 2),
        "traced_round": {
            "per_s": round(traced["per_s"], 1),
            "commits": len(batches),
            "writes": sum(batches),
            "mean_batch": round(statistics.fmean(batches), 2),
            "median_batch": statistics.median(batches),
            "max_batch": max(batches),
            "batch_histogram": dict(sorted(hist.items(), key=lambda kv: (len(kv[0]), kv[0]))),
            "commits_per_s": round(len(batches) / traced["seconds"], 1),
        },
    }


# ---------------------------------------------------------------------------------------------
# 3. A 100k-event session


def build_big(data_dir: Path, events: int) -> dict[str, Any]:
    """One session of `events` message_end events, appended in a single transaction."""
    store = Store(data_dir)
    store.open()
    try:
        store.db.call(lambda c: sessions.insert(c, session_row("big")))

        def fill(conn: sqlite3.Connection) -> int:
            for i in range(events):
                log.append(conn, draft("big", i))
            return events

        began = time.perf_counter()
        store.db.call(fill)
        elapsed = time.perf_counter() - began
    finally:
        store.close()
    size = sum(p.stat().st_size for p in data_dir.iterdir() if p.is_file())
    return {"events": events, "build_s": round(elapsed, 2), "db_bytes": size}


async def _w_open(data_dir: Path, trials: int) -> dict[str, Any]:
    opens: list[float] = []
    firsts: list[float] = []
    for _ in range(trials):
        began = time.perf_counter()
        store = Store(data_dir)
        store.open()
        opened = time.perf_counter()
        page = await store.history("big", 0, FIRST_PAGE)
        done = time.perf_counter()
        store.close()
        assert len(page) == FIRST_PAGE, len(page)
        opens.append(opened - began)
        firsts.append(done - opened)
    return {"open_s": opens, "first_page_s": firsts}


async def _read_paged(store: Store) -> int:
    count, after = 0, 0
    while True:
        page = await store.history("big", after, PAGE)
        if not page:
            return count
        count += len(page)
        after = page[-1]["event_seq"]


async def _read_full(store: Store) -> int:
    return len(await store.history("big"))


async def _w_read(data_dir: Path, mode: str) -> dict[str, Any]:
    read = _read_paged if mode == "paged" else _read_full
    store = Store(data_dir)
    store.open()
    try:
        await store.ping()
        gc.collect()
        rss0 = maxrss_kib()
        began = time.perf_counter()
        count = await read(store)
        elapsed = time.perf_counter() - began
        rss1 = maxrss_kib()
        gc.collect()
        tracemalloc.start()
        count2 = await read(store)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        store.close()
    assert count == count2, (count, count2)
    return {
        "messages": count,
        "seconds": elapsed,
        "maxrss_before_kib": rss0,
        "maxrss_delta_bytes": (rss1 - rss0) * 1024,
        "tracemalloc_peak_bytes": peak,
    }


def worker(spec: dict[str, Any]) -> None:
    data_dir = Path(spec["dir"])
    if spec["mode"] == "open":
        result = asyncio.run(_w_open(data_dir, spec["trials"]))
    else:
        result = asyncio.run(_w_read(data_dir, spec["mode"]))
    print(json.dumps(result))


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter (clean ru_maxrss, no warm store)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.store", "--worker", json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {spec['mode']} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def big_session(args: argparse.Namespace) -> dict[str, Any]:
    with fresh_dir("big") as d:
        say(f"  building {args.big:,} events in one transaction...")
        built = build_big(d, args.big)
        say(f"  built in {built['build_s']} s ({built['db_bytes'] / MB:.0f} MB on disk)")
        opened = run_worker({"mode": "open", "dir": str(d), "trials": args.open_trials})
        total = [o + f for o, f in zip(opened["open_s"], opened["first_page_s"], strict=True)]
        say(
            "  open + first page: "
            + " ".join(f"{t * 1000:.1f}" for t in total)
            + f" ms (first {total[0] * 1000:.1f})"
        )
        paged = run_worker({"mode": "paged", "dir": str(d)})
        say(f"  paged read: {paged['seconds']:.2f} s, {paged['messages']:,} messages")
        full = run_worker({"mode": "full", "dir": str(d)})
        say(f"  single-call read: {full['seconds']:.2f} s, {full['messages']:,} messages")
    return {
        **built,
        "open_first_page": {
            "trials_ms": [round(t * 1000, 2) for t in total],
            "first_ms": round(total[0] * 1000, 2),
            "median_ms": round(statistics.median(total) * 1000, 2),
            "open_median_ms": round(statistics.median(opened["open_s"]) * 1000, 2),
            "first_page_median_ms": round(statistics.median(opened["first_page_s"]) * 1000, 2),
        },
        "paged": _read_summary(paged),
        "single_call": _read_summary(full),
        "page_size": PAGE,
    }


def _read_summary(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": r["messages"],
        "seconds": round(r["seconds"], 3),
        "messages_per_s": round(r["messages"] / r["seconds"]),
        "maxrss_delta_mb": round(r["maxrss_delta_bytes"] / MB, 1),
        "tracemalloc_peak_mb": round(r["tracemalloc_peak_bytes"] / MB, 1),
        "maxrss_before_mb": round(r["maxrss_before_kib"] * 1024 / MB, 1),
    }


# ---------------------------------------------------------------------------------------------
# Output


def table_rows(results: dict[str, Any]) -> list[Row]:
    return [Row(**r) for r in _rows(results)]


def _rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    seq, grp, big = results["sequential"], results["group_commit"], results["big_session"]
    paged, full = big["paged"], big["single_call"]
    mem = max(paged["maxrss_delta_mb"], paged["tracemalloc_peak_mb"])
    ofp = big["open_first_page"]
    open_worst = max(ofp["first_ms"], ofp["median_ms"])
    return [
        {
            "metric": "1. sequential appends/s (store vs raw sqlite)",
            "value": f"{seq['store_median_per_s']:,.0f}/s",
            "baseline": f"{seq['raw_median_per_s']:,.0f}/s",
            "ratio": f"{seq['ratio']:.2f}x",
            "target": f">= {TARGET_SEQ_RATIO}x",
            "meets": seq["ratio"] >= TARGET_SEQ_RATIO,
        },
        {
            "metric": "   same, vs raw sqlite writing the store's rows",
            "value": f"{seq['store_median_per_s']:,.0f}/s",
            "baseline": f"{seq['raw_rows_median_per_s']:,.0f}/s",
            "ratio": f"{seq['ratio_vs_raw_rows']:.2f}x",
            "target": "",
            "meets": None,
        },
        {
            "metric": f"2. {grp['writers']} concurrent appenders vs raw {grp['writers']}-row txns",
            "value": f"{grp['median_per_s']:,.0f}/s",
            "baseline": f"{statistics.median(grp['raw_limit_runs_per_s']):,.0f}/s",
            "ratio": f"{grp['ratio_vs_raw_limit']:.2f}x",
            "target": f">= {TARGET_RAW_LIMIT_RATIO}x",
            "meets": grp["ratio_vs_raw_limit"] >= TARGET_RAW_LIMIT_RATIO,
        },
        {
            "metric": f"   {grp['writers']} concurrent vs 1 (sequential store, 1.)",
            "value": f"{grp['median_per_s']:,.0f}/s",
            "baseline": f"{seq['store_median_per_s']:,.0f}/s",
            "ratio": f"{grp['ratio_vs_sequential_store']:.1f}x",
            "target": "",
            "meets": None,
        },
        {
            "metric": "   same, vs sequential store runs adjacent in time",
            "value": f"{grp['median_per_s']:,.0f}/s",
            "baseline": f"{statistics.median(grp['adjacent_sequential_runs_per_s']):,.0f}/s",
            "ratio": f"{grp['ratio_vs_adjacent_sequential']:.1f}x",
            "target": "",
            "meets": None,
        },
        {
            "metric": "   mean writes per COMMIT (traced round)",
            "value": f"{grp['traced_round']['mean_batch']:.1f}",
            "baseline": "",
            "ratio": "",
            "target": "",
            "meets": None,
        },
        {
            "metric": f"3a. open + history(0, {FIRST_PAGE}), {big['events'] // 1000}k session",
            "value": f"{ofp['first_ms']:.1f} ms first, {ofp['median_ms']:.1f} med",
            "baseline": "",
            "ratio": "",
            "target": f"<= {TARGET_OPEN_MS:.0f} ms",
            "meets": open_worst <= TARGET_OPEN_MS,
        },
        {
            "metric": f"3b. paged read ({PAGE}/page), time",
            "value": f"{paged['seconds'] * 1000:,.0f} ms",
            "baseline": f"{full['seconds'] * 1000:,.0f} ms (one call)",
            "ratio": f"{paged['seconds'] / full['seconds']:.2f}x",
            "target": "",
            "meets": None,
        },
        {
            "metric": "3b. paged read, memory growth",
            "value": (
                f"rss +{paged['maxrss_delta_mb']:.1f} MB, "
                f"tracemalloc {paged['tracemalloc_peak_mb']:.1f} MB"
            ),
            "baseline": "",
            "ratio": "",
            "target": f"<= {TARGET_MEM_MB:.0f} MB",
            "meets": mem <= TARGET_MEM_MB,
        },
        {
            "metric": "3c. single-call history(), memory growth",
            "value": (
                f"rss +{full['maxrss_delta_mb']:.1f} MB, "
                f"tracemalloc {full['tracemalloc_peak_mb']:.1f} MB"
            ),
            "baseline": "",
            "ratio": "",
            "target": "(comparison)",
            "meets": None,
        },
    ]


def render(results: dict[str, Any]) -> str:
    meta, seq, grp, big = (
        results["meta"],
        results["sequential"],
        results["group_commit"],
        results["big_session"],
    )
    rows = rows_of(results)
    tr = grp["traced_round"]
    out = [
        f"Foya event-store benchmark  ({meta['python']}, SQLite {meta['sqlite']}, "
        f"{meta['cpus']} CPUs, temp dir {meta['tmpdir']})",
        f"pragmas: {'; '.join(p.removeprefix('PRAGMA ') for p in PRAGMAS)}",
        "",
        *table(rows),
        "",
        f"1. {seq['rounds']} rounds x {seq['rows_per_round']} rows per side "
        f"(+{seq['warmup_rows']} warm-up), alternating every {seq['block_rows']} rows, "
        f"{seq['payload_bytes']}-byte payload",
        "   store/s per round: " + " ".join(f"{x:,.0f}" for x in seq["store_runs_per_s"]),
        "   raw/s per round:   " + " ".join(f"{x:,.0f}" for x in seq["raw_runs_per_s"]),
        "   raw with the store's rows/s per round: "
        + " ".join(f"{x:,.0f}" for x in seq["raw_rows_runs_per_s"]),
        f"   per-append: store {seq['store_ms_per_append']:.3f} ms, "
        f"raw commit {seq['raw_ms_per_commit']:.3f} ms; "
        f"median store/raw ratio of adjacent blocks {seq['median_block_ratio']:.2f}x",
        f"2. {grp['writers']} writers x {grp['events_per_writer']} events, per round: "
        + " ".join(f"{x:,.0f}" for x in grp["runs_per_s"])
        + "/s",
        "   adjacent sequential store runs: "
        + " ".join(f"{x:,.0f}" for x in grp["adjacent_sequential_runs_per_s"])
        + f"/s -> group/sequential {grp['ratio_vs_adjacent_sequential']:.1f}x",
        f"   traced round: {tr['per_s']:,.0f}/s, {tr['commits']} commits "
        f"({tr['commits_per_s']:,.0f}/s) for {tr['writes']} writes, batch mean "
        f"{tr['mean_batch']}, median {tr['median_batch']}, max {tr['max_batch']}",
        f"   batch sizes: {tr['batch_histogram']}",
        f"3. {big['events']:,} events built in {big['build_s']} s "
        f"({big['db_bytes'] / MB:.0f} MB); open+first page per trial (ms): "
        + " ".join(f"{t:.1f}" for t in big["open_first_page"]["trials_ms"]),
        f"   open {big['open_first_page']['open_median_ms']:.1f} ms + first page "
        f"{big['open_first_page']['first_page_median_ms']:.1f} ms (medians)",
    ]
    for name, r in (("paged", big["paged"]), ("single call", big["single_call"])):
        out.append(
            f"   {name:<11}: {r['messages']:,} messages in {r['seconds']:.3f} s "
            f"({r['messages_per_s']:,}/s), ru_maxrss +{r['maxrss_delta_mb']} MB "
            f"(from {r['maxrss_before_mb']} MB), tracemalloc peak {r['tracemalloc_peak_mb']} MB"
        )
    out += ["", *verdicts(rows), f"total {meta['elapsed_s']:.0f} s"]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------


QUICK = {"rows": 1000, "rounds": 2, "per_writer": 150, "big": 30_000, "open_trials": 3}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    p.add_argument("--quick", action="store_true", help=f"a short run: {QUICK}")
    p.add_argument("--rows", type=int, default=2000, help="sequential rows per side per round")
    p.add_argument("--warmup", type=int, default=50, help="untimed rows before each run")
    p.add_argument("--block", type=int, default=50, help="rows per side before switching")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (scenarios 1, 2)")
    p.add_argument("--writers", type=int, default=16, help="concurrent appenders")
    p.add_argument("--per-writer", type=int, default=400, help="events per appender")
    p.add_argument(
        "--adjacent", type=int, default=300, help="sequential store rows next to each group run"
    )
    p.add_argument("--big", type=int, default=100_000, help="events in the large session")
    p.add_argument("--open-trials", type=int, default=5, help="open + first page trials")
    p.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    if args.quick:
        vars(args).update(QUICK)
    began = time.perf_counter()
    results: dict[str, Any] = {}
    say(f"1. sequential appends ({args.rounds} rounds x {args.rows} rows per side):")
    results["sequential"] = sequential(args)
    say(f"2. group commit ({args.writers} writers x {args.per_writer} events):")
    results["group_commit"] = concurrent(args, results["sequential"]["store_median_per_s"])
    say(f"3. {args.big:,}-event session:")
    results["big_session"] = big_session(args)
    results["meta"] = {
        "python": python(),
        "quick": args.quick,
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "tmpdir": tempfile.gettempdir(),
        "pragmas": list(PRAGMAS),
        "elapsed_s": round(time.perf_counter() - began, 1),
    }
    finish(results, table_rows(results), render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
