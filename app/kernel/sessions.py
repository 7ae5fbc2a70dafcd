"""Sessions: creation, settings, fork, removal, history.

Their facts leave through `app.kernel.emit.Facts`. Whether a session is busy is the runner's
business: the operations that must know (delete, fork) are composed in the `Kernel` façade.
A session's row and its client shape are `app.kernel.sessionrow`'s; the settings a client may
give, and their checks, `app.kernel.sessionsettings`'s.

Exception map (status, code — Foya's):

- `InvalidReasoningEffort` 400 `invalid_reasoning_effort`, `InvalidApprovalMode` 400
  `invalid_approval_mode`, `ProjectLocked` 409 `project_locked`, `UnknownProject` 400
  `project_not_found`, `UnknownConnection` 400 `connection_not_found`: a setting that cannot be
  (`app.kernel.sessionsettings`)
- `InvalidForkBoundary` 400 `invalid_fork_boundary`: a fork that would end at a user message
- `SessionNotFound` 404 `not_found` (from the store)
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from collections.abc import Mapping
from pathlib import Path

from app import events as k
from app.artifacts import Artifacts, forked_id
from app.errors import BadRequest
from app.events import Event, EventDraft, Message, Usage
from app.jsontypes import JSONObject
from app.kernel.connections import Connections
from app.kernel.emit import Facts
from app.kernel.ids import iso_now, new_id, now_ns
from app.kernel.projects import Projects
from app.kernel.sessionrow import Session, SessionColumns, SessionRow, session_row, wire
from app.kernel.sessionsettings import (
    InvalidApprovalMode,
    InvalidReasoningEffort,
    ProjectLocked,
    setting_columns,
)
from app.kernel.usage import payload as usage_payload
from app.store import Store
from app.store.channel_ledger import Receipt
from app.store.events import SessionNotFound
from app.store.filechanges import FileSpan

__all__ = [
    "InvalidApprovalMode",
    "InvalidForkBoundary",
    "InvalidReasoningEffort",
    "ProjectLocked",
    "Session",
    "SessionNotFound",
    "SessionRow",
    "Sessions",
    "wire",
]

FORK_SUFFIX = " copy"
DEFAULT_TITLE = "New chat"

_AFTER_ALL = 2**63 - 1  # a seq past every stored one (SQLite's largest integer)


class InvalidForkBoundary(BadRequest):
    """A fork through a user message (a fork must end after a reply)."""

    code = "invalid_fork_boundary"


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

    async def row(self, session: str) -> SessionRow:
        found = await self.store.get_session(session)
        if found is None:
            raise SessionNotFound(f"session {session} not found")
        return session_row(found)

    async def get(self, session: str) -> Session:
        return wire(await self.row(session))

    async def all(self) -> list[Session]:
        return [wire(session_row(r)) for r in await self.store.list_sessions()]

    async def children(self, session: str) -> list[Session]:
        await self.row(session)
        rows = await self.store.list_sessions(parent_id=session)
        return [wire(session_row(r)) for r in rows]

    async def history(
        self, session: str, before: int | None = None, limit: int | None = None
    ) -> list[Message]:
        """All active messages, or with `limit` the last `limit` of them before seq `before`
        (the web client opens a long session at its end and pages backwards)."""
        await self.row(session)
        if limit is None and before is None:
            return await self.store.history(session)
        newest = _AFTER_ALL if before is None else before
        return await self.store.history_page(session, newest, limit or -1)

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

    def workspace(self, row: SessionRow) -> Path:
        """The directory tools run in: the project's, or the session's managed workspace."""
        return self.workspace_of(row["id"], row.get("project_id"))

    def workspace_of(self, session: str, project_id: str | None) -> Path:
        """The directory tools run in for a session of this id and project."""
        if project_id and self.projects.exists(project_id):
            return Path(str(self.projects.get(project_id)["path"]))
        return self.workspaces / session

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

    async def create(self, fields: JSONObject) -> Session:
        """A new top-level session from a request body's settings; Foya's defaults (manual
        approvals, the default model)."""
        columns = setting_columns(fields, None, self.projects, self.connections)
        if "connection_id" not in columns:
            default = self.connections.default_language()
            if default is not None:
                columns["connection_id"] = default[0]
                columns.setdefault("model", default[1])
        elif "model" not in columns:
            models = self.connections.get(str(columns["connection_id"])).get("models") or [""]
            columns["model"] = str(models[0])
        return await self.get(await self.insert(columns))

    async def insert(self, columns: SessionColumns) -> str:
        """Store a new session row from `columns` (idle, manual approvals unless they say
        otherwise; a managed workspace of its own without a project); its id."""
        stamp = now_ns()
        row: SessionColumns = {
            "id": new_id(),
            "phase": "idle",
            "approval_mode": "manual",
            "model": "",
            **columns,
            "created_at_ns": stamp,
            "updated_at_ns": stamp,
        }
        session = row["id"]
        if not row.get("project_id"):
            workspace = self.workspaces / session
            row["workspace"] = str(workspace)
            await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True, mode=0o700)
        await self.store.create_session(dict(row))
        return session

    async def update(self, session: str, fields: JSONObject) -> Session:
        """Apply a PATCH body; stores and must-delivers `session_updated`."""
        current = await self.row(session)
        columns = setting_columns(fields, current, self.projects, self.connections)
        if "title" in fields and fields["title"] is not None:
            columns["title"] = fields["title"].strip()
            columns["title_is_manual"] = 1
        if fields.get("pinned") is not None:
            columns["pinned_at_ns"] = now_ns() if fields["pinned"] else None
        return await self.save(session, columns)

    async def save(
        self,
        session: str,
        columns: Mapping[str, object],
        then: list[EventDraft] | None = None,
        before: list[EventDraft] | None = None,
        *,
        receipt: Receipt | None = None,
    ) -> Session:
        """Write row columns (stamping `updated_at_ns`) and emit `session_updated` with the new
        Session, between the drafts in `before` and `then`, all in one transaction (with the
        `receipt` of the chat item this write makes a turn's input, if any)."""
        stamped = {**columns, "updated_at_ns": now_ns()}
        events = await self.facts.commit(
            session,
            lambda: self.store.update_session(
                session,
                stamped,
                lambda row: EventDraft(session, k.SESSION_UPDATED, wire(session_row(row))),
                then or [],
                before or [],
                receipt,
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
            raise InvalidForkBoundary("a fork must end after a reply, not at a user message")
        stamp = now_ns()
        new = new_id()
        row: SessionColumns = {
            "connection_id": source["connection_id"],
            "model": source["model"],
            "reasoning_effort": source["reasoning_effort"],
            "project_id": source["project_id"],
            "approval_mode": source["approval_mode"],
            "id": new,
            "phase": "idle",
            "title": title.strip() if title and title.strip() else fork_title(source.get("title")),
            "title_is_manual": 1,
            "created_at_ns": stamp,
            "updated_at_ns": stamp,
        }
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

        await self.store.fork(session, dict(row), through_seq, iso_now(), rename)
        # The fork must not depend on the source's directory, which goes when it is deleted.
        if ids:
            await asyncio.to_thread(self.artifacts.copy, session, new, ids)
        return await self.get(new)


def fork_title(source: str | None) -> str:
    """A fork's title when the client gives none: the source's, marked as a copy."""
    return f"{source or DEFAULT_TITLE}{FORK_SUFFIX}"
