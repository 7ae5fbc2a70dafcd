"""A session's row as the store keeps it (`SessionRow`), the columns a write sets
(`SessionColumns`), and the session as clients see it (`Session`, made by `wire`).

The row is the store's `sessions` table, every column present (None where a nullable one is
empty); the store hands rows out as plain dicts, and `session_row` is the one place that names
such a dict a row. A `Session` leaves out the optionals a row leaves empty.
"""

from __future__ import annotations

import json
from typing import Any, Final, NotRequired, cast

from typing_extensions import TypedDict

from app.events import iso_time

__all__ = ["Session", "SessionColumns", "SessionRow", "session_row", "wire"]


class SessionRow(TypedDict):
    """One row of the store's `sessions` table."""

    id: str
    parent_id: str | None
    spawned_by_json: str | None  # a child's `spawned_by`, as JSON
    agent_ref: str | None
    agent_name: str | None
    agent_digest: str | None
    agent_instructions: str | None
    allowed_tools_json: str | None  # a child's tool list, as JSON
    agent_max_turns: int | None
    phase: str
    agent_mode: str | None
    pre_plan_mode: str | None
    connection_id: str | None
    model: str
    reasoning_effort: str | None
    project_id: str | None
    approval_mode: str
    title: str | None
    title_is_manual: int
    pinned_at_ns: int | None
    tasks_json: str | None  # the session's task list, as JSON
    workspace: str | None
    import_source: str | None
    import_rule: str | None
    created_at_ns: int
    updated_at_ns: int


class SessionColumns(TypedDict, total=False):
    """Some columns of a session row, as a write sets them."""

    id: str
    parent_id: str | None
    spawned_by_json: str | None
    agent_ref: str | None
    agent_name: str | None
    agent_digest: str | None
    agent_instructions: str | None
    allowed_tools_json: str | None
    agent_max_turns: int | None
    phase: str
    agent_mode: str | None
    pre_plan_mode: str | None
    connection_id: str | None
    model: str
    reasoning_effort: str | None
    project_id: str | None
    approval_mode: str
    title: str | None
    title_is_manual: int
    pinned_at_ns: int | None
    tasks_json: str | None
    workspace: str | None
    import_source: str | None
    import_rule: str | None
    created_at_ns: int
    updated_at_ns: int


def session_row(found: dict[str, Any]) -> SessionRow:
    """A row as the store returned it: every column of the table, by name."""
    return cast(SessionRow, found)


class Session(TypedDict):
    """A session as clients see it (Foya's Session object); absent optionals omitted."""

    id: str
    phase: str
    connection_id: str
    model: str
    approval_mode: str
    created_at: str
    updated_at: str
    pinned: bool
    pinned_at: NotRequired[str]
    parent_id: NotRequired[str]
    project_id: NotRequired[str]
    title: NotRequired[str]
    title_is_manual: NotRequired[bool]
    agent_ref: NotRequired[str]
    agent_name: NotRequired[str]
    agent_digest: NotRequired[str]
    reasoning_effort: NotRequired[str]
    spawned_by: NotRequired[dict[str, Any]]
    agent_mode: NotRequired[str]
    pre_plan_mode: NotRequired[str]
    tasks: NotRequired[list[dict[str, Any]]]


_OPTIONAL_TEXT: Final = (
    "parent_id",
    "project_id",
    "title",
    "agent_ref",
    "agent_name",
    "agent_digest",
    "agent_mode",
    "pre_plan_mode",
)


def wire(row: SessionRow) -> Session:
    """A session row as Foya's Session object (absent optionals omitted)."""
    out: Session = {
        "id": row["id"],
        "phase": row["phase"],
        "connection_id": row["connection_id"] or "",
        "model": row["model"],
        "approval_mode": row["approval_mode"],
        "created_at": iso_time(row["created_at_ns"]),
        "updated_at": iso_time(row["updated_at_ns"]),
        "pinned": row.get("pinned_at_ns") is not None,
    }
    # Text optionals appear only when set (an empty string counts as unset), in this order.
    for key in _OPTIONAL_TEXT:
        text = row.get(key)
        if isinstance(text, str) and text:
            out[key] = text
    spawned_by, tasks = row.get("spawned_by_json"), row.get("tasks_json")
    if spawned_by:
        out["spawned_by"] = json.loads(spawned_by)
    if tasks:
        out["tasks"] = json.loads(tasks)
    effort = row.get("reasoning_effort")
    if effort is not None:
        out["reasoning_effort"] = effort
    if row.get("title"):
        out["title_is_manual"] = bool(row["title_is_manual"])
    pinned_at = row.get("pinned_at_ns")
    if pinned_at is not None:
        out["pinned_at"] = iso_time(pinned_at)
    return out
