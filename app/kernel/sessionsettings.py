"""What a client may set on a session (`POST /sessions`, `PATCH /sessions/{id}`), checked.

Exception map (status, code — Foya's):

- `InvalidReasoningEffort` 400 `invalid_reasoning_effort`, `InvalidApprovalMode` 400
  `invalid_approval_mode`: a setting outside its values
- `ProjectLocked` 409 `project_locked`: a session's project cannot change once set
- `UnknownProject` 400 `project_not_found`, `UnknownConnection` 400 `connection_not_found`: the
  body names a project or connection that does not exist
- `BadRequest` 400: the connection named is not a language connection
"""

from __future__ import annotations

from app.errors import BadRequest, Conflict
from app.jsontypes import JSONObject
from app.kernel.connections import Connections, UnknownConnection
from app.kernel.projects import Projects, UnknownProject
from app.kernel.sessionrow import SessionColumns, SessionRow

EFFORTS = ("", "low", "medium", "high")
APPROVAL_MODES = ("manual", "auto", "full_access")


class InvalidReasoningEffort(BadRequest):
    """A `reasoning_effort` other than low, medium, high or empty."""

    code = "invalid_reasoning_effort"


class InvalidApprovalMode(BadRequest):
    """An `approval_mode` other than manual, auto or full_access."""

    code = "invalid_approval_mode"


class ProjectLocked(Conflict):
    """A session's `project_id` changed once it was set."""

    code = "project_locked"


def setting_columns(
    fields: JSONObject,
    current: SessionRow | None,
    projects: Projects,
    connections: Connections,
) -> SessionColumns:
    """The row columns a request body's settings set (`current`: the session's row, None for
    a new one); raises the errors above for a setting that cannot be."""
    out: SessionColumns = {}
    if "reasoning_effort" in fields:
        if fields["reasoning_effort"] not in EFFORTS:
            raise InvalidReasoningEffort(
                "reasoning_effort: must be one of low, medium, high or empty"
            )
        out["reasoning_effort"] = fields["reasoning_effort"]
    if "approval_mode" in fields:
        if fields["approval_mode"] not in APPROVAL_MODES:
            raise InvalidApprovalMode("approval_mode: must be one of manual, auto, full_access")
        out["approval_mode"] = fields["approval_mode"]
    if fields.get("project_id") is not None:
        pid = fields["project_id"]
        if current is not None and current.get("project_id") not in (None, pid):
            raise ProjectLocked("a session's project cannot change once set")
        if not projects.exists(pid):
            raise UnknownProject(f"project {pid} not found")
        out["project_id"] = pid
    if fields.get("connection_id") is not None:
        cid = fields["connection_id"]
        if not connections.exists(cid):
            raise UnknownConnection(f"connection {cid} not found")
        if connections.get(cid).get("type") != "language":
            raise BadRequest(f"connection {cid} is not a language connection")
        out["connection_id"] = cid
    if fields.get("model") is not None:
        out["model"] = fields["model"]
    return out
