"""A session's model binding, checked when input arrives for it.

A session can exist without a usable connection: imported on a kernel that had none (its
`connection_id` empty), or its connection deleted since. Such a session is not stuck: its next
input (a turn, a queued message, a command) binds it to the default `language` model
(`Connections.default_language`: the chosen default, else the first language connection),
stored like a PATCH, with `session_updated`, before the turn starts. The model it had is kept
when the new connection lists it or lists no models at all. With no language connection at all
the input is refused, 400 `connection_not_found` (Foya's code for a connection that is not
there), and the message says what fixes it: `POST /connections`, or `PATCH /sessions/{id}` with
a connection and model.
"""

from __future__ import annotations

from app.errors import BadRequest
from app.kernel.connections import Connections
from app.kernel.sessionrow import SessionRow


class NoModelConnection(BadRequest):
    """The session has no usable connection and there is none to bind it to."""

    code = "connection_not_found"


def rebinding(connections: Connections, row: SessionRow) -> dict[str, str] | None:
    """The columns (`connection_id`, `model`) that bind session `row` to the default language
    model when its own connection is empty or gone; None when it has one. Raises
    `NoModelConnection` when there is nothing to bind it to."""
    current = str(row.get("connection_id") or "")
    if current and connections.exists(current):
        return None
    default = connections.default_language()
    if default is None:
        sid = row["id"]
        gone = f" (its connection {current} no longer exists)" if current else ""
        raise NoModelConnection(
            f"session {sid} has no model connection{gone} and this kernel has no language "
            "connection: add one with POST /connections (the session's next turn then uses the "
            f'default language model), or choose one with PATCH /sessions/{sid} {{"connection_id": '
            '"<connection id>", "model": "<model>"}'
        )
    connection_id, model = default
    kept = str(row.get("model") or "")
    listed = connections.get(connection_id).get("models") or []
    if kept and (kept in listed or not listed):
        model = kept
    return {"connection_id": connection_id, "model": model}
