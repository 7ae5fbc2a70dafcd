"""How an import builds what it stores: each session's row and messages as drafts, their images
and new workspaces in a staging directory, placed once the store has committed them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ConfigDict, with_config

from app import events as k
from app.artifacts import Artifacts, ImageTooLarge, UnsupportedImage
from app.events import EventDraft, FileChange, iso_time
from app.imports.model import (
    ImportedFileChange,
    ImportedImage,
    ImportedMessage,
    ImportedSession,
)
from app.kernel.connections import Connections
from app.kernel.ids import new_id
from app.kernel.sessionrow import SessionColumns
from app.kernel.sessions import Sessions
from app.staging import place
from app.store.imports import ImportPlan
from app.text.surrogates import scrub
from app.tools.base import change as file_change


# Every field is in every answer: the schema says so, although the fields have defaults.
@with_config(ConfigDict(json_schema_serialization_defaults_required=True))
@dataclass
class ImportSummary:
    """What an import stored and what it skipped (and why): the answer of `POST /imports`."""

    source: str
    sessions_created: int = 0
    sessions_updated: int = 0
    sessions_unchanged: int = 0
    messages_imported: int = 0
    messages_already_present: int = 0
    images: int = 0
    file_changes: int = 0
    rules_created: int = 0
    connections_created: int = 0
    session_ids: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


@dataclass
class Stage:
    """Where an import builds its files before its commit (`<data-dir>/.staging/import-…`)."""

    root: Path
    artifacts: Artifacts
    new: list[str] = field(default_factory=list)  # new sessions: their whole directories
    added: dict[str, list[str]] = field(default_factory=dict)  # existing session → artifact ids

    def workspace(self, sid: str) -> Path:
        return self.root / "workspaces" / sid


class Planner:
    """Builds each session's share of an import (`ImportPlan`) and its files."""

    def __init__(self, sessions: Sessions, connections: Connections) -> None:
        self.sessions = sessions
        self.connections = connections

    @property
    def data_dir(self) -> Path:
        return self.sessions.workspaces.parent  # the data directory both live in

    async def plan(
        self,
        session: ImportedSession,
        known: tuple[str, set[str]] | None,
        rules: dict[str, str],
        project_id: str | None,
        summary: ImportSummary,
        stage: Stage,
    ) -> ImportPlan | None:
        present = known[1] if known else set()
        messages = [m for m in session.messages if m.source_id not in present]
        summary.messages_already_present += len(session.messages) - len(messages)
        if known is not None and not messages:
            summary.sessions_unchanged += 1
            summary.session_ids.append(known[0])
            return None
        row: SessionColumns | None
        if known is None:
            sid = new_id()
            stage.new.append(sid)
            row = await self._row(sid, session, rules, project_id, stage)
            cwd = self.sessions.workspace_of(sid, row.get("project_id"))
            summary.sessions_created += 1
        else:
            sid, row = known[0], None
            cwd = self.sessions.workspace(await self.sessions.row(sid))
            summary.sessions_updated += 1
        summary.session_ids.append(sid)
        # Building the drafts (images re-encoded, files diffed) is work for a thread: a long
        # history would hold the event loop for its whole length.
        drafts = await asyncio.to_thread(
            self._drafts, sid, iso_time(session.created_at_ns), messages, cwd, summary, stage
        )
        return ImportPlan(sid, None if row is None else dict(row), drafts)

    def _drafts(
        self,
        sid: str,
        created_at: str,
        messages: list[ImportedMessage],
        cwd: Path,
        summary: ImportSummary,
        stage: Stage,
    ) -> list[EventDraft]:
        drafts = []
        for imported in messages:
            # A lone surrogate (a JSON escape in the source) cannot be stored as UTF-8.
            payload = scrub({**imported.message, "source_id": imported.source_id})
            payload.setdefault("created_at", created_at)
            payload.pop("attachments", None)
            payload.pop("file_change", None)
            refs = self._images(sid, imported.images, summary, stage)
            if refs:
                payload["attachments"] = refs
            blobs: dict[str, bytes] = {}
            if imported.file_change is not None:
                made = _file_change(imported.file_change, cwd)
                if made is None:
                    summary.skip("file change with an unsafe path")
                else:
                    payload["file_change"], blobs, diff = made
                    payload.setdefault("diff", diff)
                    summary.file_changes += 1
            drafts.append(EventDraft(sid, k.MESSAGE_IMPORTED, payload, blobs=blobs))
        summary.messages_imported += len(drafts)
        return drafts

    async def _row(
        self,
        sid: str,
        session: ImportedSession,
        rules: dict[str, str],
        project_id: str | None,
        stage: Stage,
    ) -> SessionColumns:
        row: SessionColumns = {
            "id": sid,
            "phase": "idle",
            "approval_mode": "manual",
            "model": "",
            "title": session.title,
            "title_is_manual": 1 if session.title else 0,
            "import_source": session.source,
            "import_rule": rules.get(session.rule or ""),
            "created_at_ns": session.created_at_ns,
            "updated_at_ns": max(session.updated_at_ns, session.created_at_ns),
        }
        # Continuing an imported conversation uses the default connection; the source's own
        # model stays on each message (`model`).
        default = self.connections.default_language()
        if default is not None:
            row["connection_id"], row["model"] = default
        if project_id is not None:
            row["project_id"] = project_id
        else:
            # Its final place; it is made in the staging directory and moved there on commit.
            row["workspace"] = str(self.sessions.workspaces / sid)
            await asyncio.to_thread(
                stage.workspace(sid).mkdir, parents=True, exist_ok=True, mode=0o700
            )
        return row

    def _images(
        self, sid: str, images: list[ImportedImage], summary: ImportSummary, stage: Stage
    ) -> list[dict[str, Any]]:
        """A message's images as committed artifacts of the session, made in the staging
        directory (in a thread: re-encoding is slow) and moved into place on commit."""
        refs: list[dict[str, Any]] = []
        if not images:
            return refs
        for image in images:
            try:
                refs.append(stage.artifacts.add(sid, image.name, image.data))
            except (UnsupportedImage, ImageTooLarge):
                summary.skip("image that is not a supported picture")
        summary.images += len(refs)
        if sid not in stage.new:
            stage.added.setdefault(sid, []).extend(r["id"] for r in refs)
        return stage.artifacts.commit(sid, [r["id"] for r in refs])

    def place(self, stage: Stage) -> None:
        """Move what `stage` built into place, once its sessions are committed: a new session's
        artifact directory and workspace whole, an existing session's images file by file (each
        image before its metadata, which says the image is complete). Recorded first
        (`staging.place`): a crash midway is finished by the next start."""
        artifacts = self.data_dir / "artifacts"
        workspaces = self.sessions.workspaces
        moves: list[tuple[Path, Path]] = []
        for sid in stage.new:
            moves.append((stage.root / "artifacts" / sid, artifacts / sid))
            moves.append((stage.workspace(sid), workspaces / sid))
        for sid in stage.added:
            staged = stage.root / "artifacts" / sid
            if staged.is_dir():
                (artifacts / sid).mkdir(mode=0o700, parents=True, exist_ok=True)
                files = sorted(staged.iterdir(), key=lambda p: p.suffix == ".json")
                moves.extend((path, artifacts / sid / path.name) for path in files)
        artifacts.mkdir(mode=0o700, parents=True, exist_ok=True)
        workspaces.mkdir(mode=0o700, parents=True, exist_ok=True)
        place(stage.root, moves)


def _file_change(
    change: ImportedFileChange, cwd: Path
) -> tuple[FileChange, dict[str, bytes], str] | None:
    """An imported change as the session's own (its file under the session's working
    directory); None when its path is not a plain relative one, so that a rewind can never
    write outside the session's directory."""
    path = PurePosixPath(change.path)
    if not change.path or path.is_absolute() or ".." in path.parts or "\\" in change.path:
        return None
    before_mode = change.before_mode if change.before is not None else None
    after_mode = change.after_mode if change.after is not None else None
    return file_change(cwd / path, change.before, before_mode, change.after, after_mode)
