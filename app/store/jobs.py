"""Deferred cleanup work (`cleanup_jobs`).

Some work happens outside the database after a commit (removing a deleted session's directories)
or on a schedule (file-change retention). A job is written in the transaction that makes it
necessary, so a crash before it runs only delays it: startup and the periodic sweep run every
job that is due.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from app.jsontypes import JSONObject
from app.store.projections import dumps


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    payload: JSONObject
    attempts: int


def schedule(
    conn: sqlite3.Connection,
    kind: str,
    run_after_ns: int,
    payload: JSONObject | None = None,
    *,
    unique: bool = False,
) -> int | None:
    """Add a job; with `unique`, none if a job of `kind` is already waiting. Returns its id."""
    if unique and conn.execute("SELECT 1 FROM cleanup_jobs WHERE kind = ?", (kind,)).fetchone():
        return None
    cur = conn.execute(
        "INSERT INTO cleanup_jobs(kind, payload_json, run_after_ns) VALUES (?, ?, ?)",
        (kind, dumps(payload or {}), run_after_ns),
    )
    return cur.lastrowid


def due(conn: sqlite3.Connection, now_ns: int) -> list[Job]:
    """Jobs whose time has come, oldest first."""
    rows = conn.execute(
        "SELECT id, kind, payload_json, attempts FROM cleanup_jobs WHERE run_after_ns <= ?"
        " ORDER BY run_after_ns, id",
        (now_ns,),
    ).fetchall()
    return [
        Job(i, kind, json.loads(payload or "{}"), attempts) for i, kind, payload, attempts in rows
    ]


def next_due(conn: sqlite3.Connection) -> int | None:
    """When the next job is due (ns), if any is waiting."""
    row = conn.execute("SELECT MIN(run_after_ns) FROM cleanup_jobs").fetchone()
    return None if row[0] is None else int(row[0])


def done(conn: sqlite3.Connection, job: int) -> None:
    conn.execute("DELETE FROM cleanup_jobs WHERE id = ?", (job,))


def retry(conn: sqlite3.Connection, job: int, run_after_ns: int) -> None:
    """A failed job is tried again later."""
    conn.execute(
        "UPDATE cleanup_jobs SET attempts = attempts + 1, run_after_ns = ? WHERE id = ?",
        (run_after_ns, job),
    )
