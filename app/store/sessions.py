"""Session rows: the mutable metadata of a session (model binding, project, phase, title, pin)."""

from __future__ import annotations

import sqlite3
from typing import Any

COLUMNS = (
    "id",
    "parent_id",
    "spawned_by_json",
    "agent_ref",
    "agent_name",
    "agent_digest",
    "agent_instructions",
    "allowed_tools_json",
    "agent_max_turns",
    "phase",
    "agent_mode",
    "pre_plan_mode",
    "connection_id",
    "model",
    "reasoning_effort",
    "project_id",
    "approval_mode",
    "title",
    "title_is_manual",
    "pinned_at_ns",
    "tasks_json",
    "workspace",
    "import_source",
    "import_rule",
    "created_at_ns",
    "updated_at_ns",
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM sessions"


def _check(fields: dict[str, Any]) -> None:
    unknown = set(fields) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown session columns: {sorted(unknown)}")


def insert(conn: sqlite3.Connection, row: dict[str, Any]) -> None:
    """Create a session row (`id`, `created_at_ns`, `updated_at_ns` required)."""
    _check(row)
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    conn.execute(f"INSERT INTO sessions({names}) VALUES ({marks})", tuple(row.values()))


def update(conn: sqlite3.Connection, session: str, fields: dict[str, Any]) -> bool:
    """Set `fields` on a session; False if it does not exist."""
    _check(fields)
    if not fields:
        return get(conn, session) is not None
    sets = ", ".join(f"{name} = ?" for name in fields)
    cur = conn.execute(
        f"UPDATE sessions SET {sets} WHERE id = ?",
        (*fields.values(), session),
    )
    return cur.rowcount == 1


def get(conn: sqlite3.Connection, session: str) -> dict[str, Any] | None:
    """One session row as a dict."""
    row = conn.execute(f"{_SELECT} WHERE id = ?", (session,)).fetchone()
    return None if row is None else dict(zip(COLUMNS, row, strict=True))


def list_rows(
    conn: sqlite3.Connection, *, parent_id: str | None = None, project_id: str | None = None
) -> list[dict[str, Any]]:
    """Top-level sessions (or the children of `parent_id`), newest first."""
    args: tuple[str, ...] = ()
    if parent_id is None:
        where = "parent_id IS NULL"
    else:
        where, args = "parent_id = ?", (parent_id,)
    if project_id is not None:
        where += " AND project_id = ?"
        args = (*args, project_id)
    rows = conn.execute(
        f"{_SELECT} WHERE {where} ORDER BY created_at_ns DESC, id",
        args,
    )
    return [dict(zip(COLUMNS, r, strict=True)) for r in rows]


def using_connection(conn: sqlite3.Connection, connection_id: str) -> list[str]:
    """Ids of the sessions bound to a connection."""
    rows = conn.execute("SELECT id FROM sessions WHERE connection_id = ?", (connection_id,))
    return [str(r[0]) for r in rows]
