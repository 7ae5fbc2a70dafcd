"""`foya check`: rebuild every projection from the event log and compare it with the stored one.

The rebuild replays `events` through the same `project()` that `append` uses, into an in-memory
database that has the live one attached as `live`. Exact projections must match row for row.
Daily ledgers outlive deleted sessions, so they must be at least what the remaining events give.
The checkpoint table is a checked cache (`checkpoints.load` may drop or replace a row): a stored
row must be a valid checkpoint that some `compaction_completed` event of the session carries.
File changes may be missing only where retention pruned them. Every referenced blob must exist
and hash correctly. `repair=True` rewrites the stored projections from the rebuild.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from app import events as k
from app.store import blobs, checkpoints, schema
from app.store.events import row_event
from app.store.projections import project
from app.store.retention import EXPIRED, cutoff_ns

PAGE = 5000
_REBUILT = (
    "message_projection",
    "usage_records",
    "compaction_checkpoints",
    "context_accepted_boundaries",
    "file_changes",
    "usage_daily_ledger",
    "usage_message_daily_ledger",
    "usage_session_days",
)
_EXACT = ("message_projection", "usage_records", "context_accepted_boundaries")
_LEDGERS = {
    "usage_daily_ledger": (
        ("day", "model"),
        ("input_tokens", "output_tokens", "total_tokens", "cached_tokens", "request_count"),
    ),
    "usage_message_daily_ledger": (("day",), ("message_count",)),
    "usage_session_days": (("day", "session_id"), ()),
}


@dataclass
class Report:
    """What `check` found."""

    events: int = 0
    blobs: int = 0
    differences: list[str] = field(default_factory=list)
    repaired: bool = False

    @property
    def clean(self) -> bool:
        return not self.differences


def _scratch(path: Path, repair: bool) -> sqlite3.Connection:
    mem = sqlite3.connect(":memory:", isolation_level=None, uri=True)
    mode = "rw" if repair else "ro"
    mem.execute("ATTACH DATABASE ? AS live", (f"{path.resolve().as_uri()}?mode={mode}",))
    mem.execute("PRAGMA busy_timeout=5000")
    schema.check_version(mem, "live")
    # The scratch tables are created from the live database's own DDL, whatever its version.
    names = (*_REBUILT, "events")
    ddl = mem.execute(
        f"SELECT sql FROM live.sqlite_master WHERE type = 'table'"
        f" AND name IN ({', '.join('?' for _ in names)})",
        names,
    ).fetchall()
    for (statement,) in ddl:
        mem.execute(statement)
    return mem


def _replay(mem: sqlite3.Connection, report: Report) -> None:
    after = 0
    while True:
        rows = mem.execute(
            "SELECT seq, session_id, run_id, kind, occurred_at_ns, payload_json FROM live.events"
            " WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, PAGE),
        ).fetchall()
        if not rows:
            return
        for row in rows:
            event = row_event(row)
            # Only seq, session and time are needed here (retention's expiry test).
            mem.execute(
                "INSERT INTO events(seq, session_id, kind, occurred_at_ns) VALUES (?, ?, ?, ?)",
                (event.seq, event.session, event.kind, event.time_ns),
            )
            project(mem, event, verify_blobs=False)
        report.events += len(rows)
        after = rows[-1][0]


def _diff(mem: sqlite3.Connection, table: str, a: str, b: str) -> list[tuple[object, ...]]:
    return mem.execute(f"SELECT * FROM {a}.{table} EXCEPT SELECT * FROM {b}.{table}").fetchall()


def _compare(mem: sqlite3.Connection, report: Report, now_ns: int) -> None:
    out = report.differences
    for table in _EXACT:
        out += [
            f"{table}: stored row {r} is not in the rebuild"
            for r in _diff(mem, table, "live", "main")
        ]
        out += [f"{table}: rebuilt row {r} is missing" for r in _diff(mem, table, "main", "live")]
    out += [f"compaction_checkpoints: {p}" for _, p in _bad_checkpoints(mem)]
    out += [
        f"file_changes: stored row {r} differs from the rebuild"
        for r in _diff(mem, "file_changes", "live", "main")
    ]
    missing = mem.execute(
        f"SELECT fc.* FROM main.file_changes AS fc WHERE fc.event_seq NOT IN"
        f" (SELECT event_seq FROM live.file_changes) AND NOT {EXPIRED}",
        {"cutoff_ns": cutoff_ns(now_ns)},
    ).fetchall()
    out += [f"file_changes: rebuilt row {r} is missing and not expired" for r in missing]
    for table, (keys, counts) in _LEDGERS.items():
        on = " AND ".join(f"l.{c} = r.{c}" for c in keys)
        short = " OR ".join([f"l.{keys[0]} IS NULL", *(f"l.{c} < r.{c}" for c in counts)])
        rows = mem.execute(
            f"SELECT r.* FROM main.{table} r LEFT JOIN live.{table} l ON {on} WHERE {short}"
        ).fetchall()
        out += [f"{table}: stored ledger is below the events for {r}" for r in rows]


def _bad_checkpoints(mem: sqlite3.Connection) -> list[tuple[str, str]]:
    """(session, problem) for stored checkpoint rows that are not a valid event's checkpoint.

    Validity is judged against the rebuilt `message_projection` (unqualified names resolve to the
    scratch database first)."""
    bad = []
    for session, seq, stored in mem.execute(
        "SELECT session_id, event_seq, checkpoint_json FROM live.compaction_checkpoints"
    ).fetchall():
        source = mem.execute(
            "SELECT payload_json FROM live.events WHERE seq = ? AND session_id = ? AND kind = ?",
            (seq, session, k.COMPACTION_COMPLETED),
        ).fetchone()
        try:
            checkpoint = json.loads(stored)
            same = source is not None and json.loads(source[0]) == checkpoint
        except (ValueError, TypeError):
            checkpoint, same = None, False
        if not same:
            bad.append((session, f"row of {session} is not the checkpoint of event {seq}"))
        elif not checkpoints.is_valid(mem, session, checkpoint):
            bad.append((session, f"row of {session} holds an invalid checkpoint"))
    return bad


def _check_blobs(mem: sqlite3.Connection, report: Report) -> None:
    keys = mem.execute(
        "SELECT before_blob_hash FROM live.file_changes UNION SELECT after_blob_hash"
        " FROM live.file_changes UNION SELECT original_blob_hash"
        " FROM live.file_rewind_journal_files"
        " UNION SELECT target_blob_hash FROM live.file_rewind_journal_files"
    ).fetchall()
    for (key,) in keys:
        if key is None:
            continue
        row = mem.execute("SELECT data FROM live.file_blobs WHERE hash = ?", (key,)).fetchone()
        report.blobs += 1
        if row is None:
            report.differences.append(f"file_blobs: referenced blob {key} is missing")
        elif not blobs.matches(key, row[0]):
            report.differences.append(f"file_blobs: blob {key} does not match its hash")


def _repair(mem: sqlite3.Connection, now_ns: int) -> None:
    for session, _ in _bad_checkpoints(mem):
        # Dropped: the next `Store.checkpoint()` rebuilds it from the events if it can.
        mem.execute("DELETE FROM live.compaction_checkpoints WHERE session_id = ?", (session,))
    for table in _EXACT:
        mem.execute(f"DELETE FROM live.{table}")
        mem.execute(f"INSERT INTO live.{table} SELECT * FROM main.{table}")
    # Keep pruned file changes pruned; restore the rest exactly as the events say.
    mem.execute(
        "DELETE FROM live.file_changes"
        " WHERE event_seq NOT IN (SELECT event_seq FROM main.file_changes)"
    )
    mem.execute(
        f"INSERT OR REPLACE INTO live.file_changes SELECT fc.* FROM main.file_changes AS fc"
        f" WHERE fc.event_seq IN (SELECT event_seq FROM live.file_changes) OR NOT {EXPIRED}",
        {"cutoff_ns": cutoff_ns(now_ns)},
    )
    for table, (keys, counts) in _LEDGERS.items():
        if not counts:
            mem.execute(f"INSERT OR IGNORE INTO live.{table} SELECT * FROM main.{table}")
            continue
        cols = (*keys, *counts)
        on = " AND ".join(f"l.{c} = r.{c}" for c in keys)
        best = ", ".join(f"MAX(r.{c}, COALESCE(l.{c}, 0))" for c in counts)
        mem.execute(
            f"INSERT OR REPLACE INTO live.{table}({', '.join(cols)})"
            f" SELECT {', '.join('r.' + c for c in keys)}, {best}"
            f" FROM main.{table} r LEFT JOIN live.{table} l ON {on}"
        )


def check(path: Path, *, repair: bool = False, now_ns: int | None = None) -> Report:
    """Compare (and with `repair`, rewrite) the projections of the database at `path`."""
    now = now_ns if now_ns is not None else time.time_ns()
    report = Report()
    mem = _scratch(path, repair)
    try:
        # One transaction: the replay and every comparison see one snapshot of a live database.
        mem.execute("BEGIN IMMEDIATE" if repair else "BEGIN")
        _replay(mem, report)
        _compare(mem, report, now)
        _check_blobs(mem, report)
        if repair and report.differences:
            _repair(mem, now)
            report.repaired = True
        mem.execute("COMMIT")
    finally:
        mem.close()
    return report
