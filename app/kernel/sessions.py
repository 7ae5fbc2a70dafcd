"""Sessions: creation, settings, fork, removal, history.

Their facts leave through `app.kernel.emit.Facts`. Whether a session is busy is the runner's
business: the operations that must know (delete, fork) are composed in the `Kernel` façade.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Final, NotRequired

from typing_extensions import TypedDict

from app import events as k
from app.artifacts import Artifacts, forked_id
from app.errors import BadRequest, Conflict
from app.events import Event, EventDraft, Message, Usage, iso_time
from app.kernel.connections import Connections
from app.kernel.emit import Facts
from app.kernel.ids import iso_now, new_id, now_ns
from app.kernel.projects import Projects
from app.kernel.usage import payload as usage_payload
from app.store import Store
from app.store.events import SessionNotFound
from app.store.filechanges import FileSpan

__all__ = ["Session", "SessionNotFound", "Sessions", "wire"]

EFFORTS = ("", "low", "medium", "high")
APPROVAL_MODES = ("manual", "auto", "full_access")
FORK_SUFFIX = " copy"
DEFAULT_TITLE = "New chat"


class Session(TypedDict):
    """A session as clients see it (reference §1 "Session object"); absent optionals omitted."""

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


def wire(row: dict[str, Any]) -> Session:
    """A session row as the reference's Session object (absent optionals omitted)."""
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
    for key in _OPTIONAL_TEXT:
        if row.get(key):
            out[key] = row[key]
    if row.get("spawned_by_json"):
        out["spawned_by"] = json.loads(row["spawned_by_json"])
    if row.get("tasks_json"):
        out["tasks"] = json.loads(row["tasks_json"])
    if row.get("reasoning_effort") is not None:
        out["reasoning_effort"] = row["reasoning_effort"]
    if row.get("title"):
        out["title_is_manual"] = bool(row["title_is_manual"])
    if out["pinned"]:
        out["pinned_at"] = iso_time(row["pinned_at_ns"])
    return out


class Sessions:
    """Session rules."""

    def __init__(
        self,
        store: Store,
        facts: Facts,
        projects: Projects,
        connections: Connections,
        data_dir: Path,
    ) -> None:
        self.store = store
        self.facts = facts
        self.projects = projects
        self.connections = connections
        self.workspaces = data_dir / "workspaces"
        self.artifacts = Artifacts(data_dir / "artifacts")

    # -- reads ---------------------------------------------------------------------------------

    async def row(self, session: str) -> dict[str, Any]:
        found = await self.store.get_session(session)
        if found is None:
            raise SessionNotFound(f"session {session} not found")
        return found

    async def get(self, session: str) -> Session:
        return wire(await self.row(session))

    async def all(self) -> list[Session]:
        return [wire(r) for r in await self.store.list_sessions()]

    async def children(self, session: str) -> list[Session]:
        await self.row(session)
        return [wire(r) for r in await self.store.list_sessions(parent_id=session)]

    async def history(self, session: str) -> list[Message]:
        await self.row(session)
        return await self.store.history(session)

    async def last_usage(self, session: str) -> Usage:
        """The last model request's usage (zeros, with the session's model, before any)."""
        row = await self.row(session)
        found = await self.store.last_usage(session)
        if found is None:
            return usage_payload(row["model"], None)
        return {
            "model": str(found["model"]),
            "input_tokens": int(found["input_tokens"]),
            "output_tokens": int(found["output_tokens"]),
            "total_tokens": int(found["total_tokens"]),
            "cached_tokens": int(found["cached_tokens"]),
        }

    def workspace(self, row: dict[str, Any]) -> Path:
        """The directory tools run in: the project's, or the session's managed workspace."""
        if row.get("project_id") and self.projects.exists(row["project_id"]):
            return Path(str(self.projects.get(row["project_id"])["path"]))
        return self.workspaces / str(row["id"])

    def local_path(self, session: str, path: str) -> str:
        """A recorded file path as it is here. Paths inside a managed workspace were recorded
        absolute; after a restore into (or a move to) another data dir they name the old one,
        so they are rebased onto this data dir's workspace of the session."""
        marker = f"/workspaces/{session}/"
        at = path.find(marker)
        if at < 0 or path.startswith(f"{self.workspaces}/"):
            return path
        return str(self.workspaces / session / path[at + len(marker) :])

    async def file_spans(
        self, session: str, *, from_seq: int = 0, pending_only: bool = False
    ) -> list[FileSpan]:
        """The store's file spans of `session` (see `Store.file_spans`), with local paths."""
        spans = await self.store.file_spans(session, from_seq=from_seq, pending_only=pending_only)
        return [dataclasses.replace(s, path=self.local_path(session, s.path)) for s in spans]

    # -- writes --------------------------------------------------------------------------------

    def _settings(self, fields: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
        """Validate session settings; return the row columns they set."""
        out: dict[str, Any] = {}
        if "reasoning_effort" in fields:
            if fields["reasoning_effort"] not in EFFORTS:
                raise BadRequest(
                    "reasoning_effort: must be one of low, medium, high or empty",
                    code="invalid_reasoning_effort",
                )
            out["reasoning_effort"] = fields["reasoning_effort"]
        if "approval_mode" in fields:
            if fields["approval_mode"] not in APPROVAL_MODES:
                raise BadRequest(
                    "approval_mode: must be one of manual, auto, full_access",
                    code="invalid_approval_mode",
                )
            out["approval_mode"] = fields["approval_mode"]
        if fields.get("project_id") is not None:
            pid = fields["project_id"]
            if current is not None and current.get("project_id") not in (None, pid):
                raise Conflict("a session's project cannot change once set", code="project_locked")
            if not self.projects.exists(pid):
                raise BadRequest(f"project {pid} not found", code="project_not_found")
            out["project_id"] = pid
        if fields.get("connection_id") is not None:
            cid = fields["connection_id"]
            if not self.connections.exists(cid):
                raise BadRequest(f"connection {cid} not found", code="connection_not_found")
            if self.connections.get(cid).get("type") != "language":
                raise BadRequest(f"connection {cid} is not a language connection")
            out["connection_id"] = cid
        if fields.get("model") is not None:
            out["model"] = fields["model"]
        return out

    async def create(self, fields: dict[str, Any]) -> Session:
        """A new top-level session; defaults per reference (manual approvals, default model)."""
        columns = self._settings(fields, None)
        if "connection_id" not in columns:
            default = self.connections.default_language()
            if default is not None:
                columns["connection_id"] = default[0]
                columns.setdefault("model", default[1])
        elif "model" not in columns:
            models = self.connections.get(columns["connection_id"]).get("models") or [""]
            columns["model"] = str(models[0])
        return await self.get(await self.insert(columns))

    async def insert(self, columns: dict[str, Any]) -> str:
        """Store a new session row from `columns` (idle, manual approvals unless they say
        otherwise; a managed workspace of its own without a project); its id."""
        stamp = now_ns()
        row = {
            "id": new_id(),
            "phase": "idle",
            "approval_mode": "manual",
            "model": "",
            **columns,
            "created_at_ns": stamp,
            "updated_at_ns": stamp,
        }
        if not row.get("project_id"):
            workspace = self.workspaces / row["id"]
            row["workspace"] = str(workspace)
            await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True, mode=0o700)
        await self.store.create_session(row)
        return str(row["id"])

    async def update(self, session: str, fields: dict[str, Any]) -> Session:
        """Apply a PATCH; stores and must-delivers `session_updated`."""
        current = await self.row(session)
        columns = self._settings(fields, current)
        if "title" in fields and fields["title"] is not None:
            columns["title"] = fields["title"].strip()
            columns["title_is_manual"] = 1
        if fields.get("pinned") is not None:
            columns["pinned_at_ns"] = now_ns() if fields["pinned"] else None
        return await self.save(session, columns)

    async def save(
        self,
        session: str,
        columns: dict[str, Any],
        then: list[EventDraft] | None = None,
        before: list[EventDraft] | None = None,
    ) -> Session:
        """Write row columns (stamping `updated_at_ns`) and emit `session_updated` with the new
        Session, between the drafts in `before` and `then`, all in one transaction."""
        stamped = {**columns, "updated_at_ns": now_ns()}
        events = await self.facts.commit(
            session,
            lambda: self.store.update_session(
                session,
                stamped,
                lambda row: EventDraft(session, k.SESSION_UPDATED, wire(row)),
                then or [],
                before or [],
            ),
        )
        updated: Session = events[len(before or [])].payload
        return updated

    async def remove(self, session: str) -> None:
        """Delete the session's facts, data and managed workspace (its work must be stopped
        and its children removed first), then tell its subscribers."""
        job = await self.store.delete_session(session)
        await self.remove_files(session)
        await self.store.job_done(job)  # a crash before this leaves the job for the next start
        gone = Event(0, k.SESSION_DELETED, session, None, now_ns(), {"id": session})
        await self.facts.announce(session, gone)

    async def remove_files(self, session: str) -> None:
        """Remove a deleted session's managed workspace and artifacts. Keyed by the session id,
        never a project's directory: also right if a project was set after the managed
        workspace was made."""
        await asyncio.to_thread(shutil.rmtree, self.workspaces / session, ignore_errors=True)
        await asyncio.to_thread(self.artifacts.remove_session, session)

    async def fork(self, session: str, title: str | None, through_seq: int | None) -> Session:
        """A new top-level session with copies of the active messages (up to `through_seq`),
        titled `title`, or `<source title> copy`; its attachments are copies under new ids."""
        source = await self.row(session)
        # One message's role, not the whole history (raises message_not_found if inactive).
        if through_seq is not None and await self.store.active_role(session, through_seq) == "user":
            raise BadRequest(
                "a fork must end after a reply, not at a user message",
                code="invalid_fork_boundary",
            )
        stamp = now_ns()
        new = new_id()
        row = {
            key: source[key]
            for key in ("connection_id", "model", "reasoning_effort", "project_id", "approval_mode")
        }
        row.update(
            id=new,
            phase="idle",
            title=title.strip() if title and title.strip() else fork_title(source.get("title")),
            title_is_manual=1,
            created_at_ns=stamp,
            updated_at_ns=stamp,
        )
        if not source.get("project_id"):
            row["workspace"] = str(self.workspaces / new)
            src = self.workspaces / session
            if src.is_dir():
                await asyncio.to_thread(shutil.copytree, src, self.workspaces / new, symlinks=True)
            else:
                (self.workspaces / new).mkdir(parents=True, exist_ok=True, mode=0o700)
        ids: list[str] = []  # the source's artifact ids, as the store renames them

        def rename(artifact_id: str) -> str:
            ids.append(artifact_id)
            return forked_id(new, artifact_id)

        await self.store.fork(session, row, through_seq, iso_now(), rename)
        # The fork must not depend on the source's directory, which goes when it is deleted.
        if ids:
            await asyncio.to_thread(self.artifacts.copy, session, new, ids)
        return await self.get(new)


def fork_title(source: str | None) -> str:
    """A fork's title when the client gives none: the source's, marked as a copy."""
    return f"{source or DEFAULT_TITLE}{FORK_SUFFIX}"
