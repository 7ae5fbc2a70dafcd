"""Importing other tools' histories: a parsed `ImportBundle` stored all-or-nothing, once.

Every session of a bundle is keyed by its source ("chatbuddy:<id>", …) and every message by its
`source_id`; a session already imported gets only the messages it lacks, so importing the same
archive twice stores nothing the second time. Messages are `message_imported` facts in source
order, their images session artifacts, their file changes reviewable (under the session's own
directory). A system prompt becomes one manual rule (global, or the project's with
`project_id`) that the sessions it came with apply (`sessions.import_rule`); providers become
connections when the bundle carries them.

All or nothing, on disk too: the whole bundle is checked first (`importcheck.validate`: every
session, message, rule and connection), so a bad part refuses the import before anything is
written. Images and new workspaces are then built under `<data-dir>/.staging/import-<random>/`
(app.staging), the sessions and their messages committed in one store transaction, and only
then the staged files moved into place; a failure before the commit removes the staging
directory, and a crash leaves nothing but it, which the next start sweeps. Rules and
connections are written after the commit, matched by name, so a crash in between is mended by
importing again. A session that gets new messages is held exclusively (`session_busy` if it is
running a turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ConfigDict, with_config

from app import events as k
from app.artifacts import Artifacts, ImageTooLarge, UnsupportedImage
from app.errors import BadRequest
from app.events import EventDraft, FileChange, iso_time
from app.failpoints import failpoint
from app.imports import sources
from app.imports.model import (
    ImportBundle,
    ImportedFileChange,
    ImportedImage,
    ImportedMessage,
    ImportedSession,
    InvalidImport,
)
from app.kernel.connections import Connections
from app.kernel.emit import Facts
from app.kernel.ids import new_id
from app.kernel.importcheck import validate
from app.kernel.projects import Projects
from app.kernel.sessions import Sessions
from app.kernel.turns.runner import Turns
from app.kernel.usercontext import UserContext
from app.kernel.usercontext.items import MAX_RULE_CHARS, clean_content
from app.metrics import Metrics
from app.staging import new_staging, place
from app.store.imports import ImportPlan
from app.text.surrogates import scrub
from app.tools.base import change as file_change


@dataclass(frozen=True)
class UploadForm:
    """What `POST /imports` sends beside its file."""

    source: str
    passphrase: str | None = None
    with_keys: bool = False
    project_id: str | None = None


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
class _Stage:
    """Where an import builds its files before its commit (`<data-dir>/.staging/import-…`)."""

    root: Path
    artifacts: Artifacts
    new: list[str] = field(default_factory=list)  # new sessions: their whole directories
    added: dict[str, list[str]] = field(default_factory=dict)  # existing session → artifact ids

    def workspace(self, sid: str) -> Path:
        return self.root / "workspaces" / sid


class Imports:
    """Stores parsed bundles (app.imports) as sessions."""

    def __init__(
        self,
        facts: Facts,
        sessions: Sessions,
        turns: Turns,
        projects: Projects,
        user_context: UserContext,
        connections: Connections,
        metrics: Metrics,
        scratch: Path,
    ) -> None:
        """`scratch`: where an uploaded transcript is put for its parser."""
        self.facts = facts
        self.sessions = sessions
        self.turns = turns
        self.projects = projects
        self.user_context = user_context
        self.connections = connections
        self.metrics = metrics
        self.scratch = scratch
        # One import at a time: two copies of one archive must not both see a session as new.
        self._lock = asyncio.Lock()

    async def upload_stream(
        self, chunks: AsyncIterator[bytes], form: Callable[[], UploadForm]
    ) -> ImportSummary:
        """`upload` of a file that arrives in `chunks` (`POST /imports`): written to a private
        temporary file as it comes, never held whole in memory. `form` is asked once the file
        has ended, since a form's other fields may follow its file."""
        self.scratch.mkdir(mode=0o700, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.scratch) as folder:
            path = Path(folder) / "upload"
            with path.open("xb") as out:
                async for chunk in chunks:
                    await asyncio.to_thread(out.write, chunk)
            fields = form()
            return await self.upload(
                fields.source,
                path,
                passphrase=fields.passphrase,
                with_keys=fields.with_keys,
                project_id=fields.project_id,
            )

    async def upload(
        self,
        source: str,
        data: bytes | Path,
        *,
        passphrase: str | None = None,
        with_keys: bool = False,
        project_id: str | None = None,
    ) -> ImportSummary:
        """Parse an uploaded file (`POST /imports`) off the event loop and store it."""
        try:
            bundle = await asyncio.to_thread(parse_upload, source, data, passphrase, self.scratch)
            if not with_keys and bundle.connections:
                reason = "provider (a connection only when keys are asked for: --with-keys)"
                bundle.report.skip(reason, len(bundle.connections))
                bundle.connections.clear()
            summary = await self.run(bundle, project_id=project_id)
        except BaseException:
            self.metrics.imports.labels(source if source in UPLOADABLE else "other", "failed").inc()
            raise
        self.metrics.imports.labels(source, "imported").inc()
        self.metrics.imported_messages.labels(source).inc(summary.messages_imported)
        return summary

    async def run(self, bundle: ImportBundle, *, project_id: str | None = None) -> ImportSummary:
        """Store what `bundle` holds that is not stored yet; a summary of what happened."""
        summary = ImportSummary(bundle.source, skipped=dict(bundle.report.skipped))
        summary.warnings = list(bundle.report.warnings)
        if project_id is not None:
            self.projects.get(project_id)
        sources = [s.source for s in bundle.sessions]
        if len(set(sources)) != len(sources):
            raise InvalidImport("the archive holds the same session twice")
        # Everything first: a bad part refuses the import before anything is written.
        await asyncio.to_thread(validate, bundle)
        async with self._lock:
            await self._run(bundle, project_id, summary)
        return summary

    async def _run(
        self, bundle: ImportBundle, project_id: str | None, summary: ImportSummary
    ) -> None:
        store = self.sessions.store
        known = await store.imported([s.source for s in bundle.sessions])
        root = await asyncio.to_thread(new_staging, self._data_dir, "import")
        stage = _Stage(root, Artifacts(root / "artifacts"))
        try:
            async with contextlib.AsyncExitStack() as held:
                rules, new_rules = await self._rules(bundle, project_id)
                plans = []
                for session in bundle.sessions:
                    plan = await self._plan(
                        session, known.get(session.source), rules, project_id, summary, stage
                    )
                    if plan is None:
                        continue
                    if plan.row is None:
                        await held.enter_async_context(self.turns.exclusive(plan.session))
                    plans.append(plan)
                failpoint("import_before_commit")
                events = await store.store_import(plans)
                # Still held: no turn of a session sees its new messages before their images.
                await asyncio.to_thread(self._place, stage)
        finally:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, root, ignore_errors=True))
        # After the commit: a crash before it leaves no rule or connection behind, and one
        # after it is mended by importing again (rules and connections are matched by name).
        await self._create_rules(new_rules, project_id, summary)
        await self._connections(bundle, summary)
        # Only sessions that existed can have a client watching them.
        watched = {plan.session for plan in plans if plan.row is None}
        for event in events:
            if event.session in watched:
                self.facts.broker.publish(f"session:{event.session}", event)

    @property
    def _artifacts(self) -> Artifacts:
        return self.sessions.artifacts

    @property
    def _data_dir(self) -> Path:
        return self.sessions.workspaces.parent  # the data directory both live in

    def _place(self, stage: _Stage) -> None:
        """Move what `stage` built into place, once its sessions are committed: a new session's
        artifact directory and workspace whole, an existing session's images file by file (each
        image before its metadata, which says the image is complete). Recorded first
        (`staging.place`): a crash midway is finished by the next start."""
        artifacts = self._data_dir / "artifacts"
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

    async def _plan(
        self,
        session: ImportedSession,
        known: tuple[str, set[str]] | None,
        rules: dict[str, str],
        project_id: str | None,
        summary: ImportSummary,
        stage: _Stage,
    ) -> ImportPlan | None:
        present = known[1] if known else set()
        messages = [m for m in session.messages if m.source_id not in present]
        summary.messages_already_present += len(session.messages) - len(messages)
        if known is not None and not messages:
            summary.sessions_unchanged += 1
            summary.session_ids.append(known[0])
            return None
        row: dict[str, Any] | None
        if known is None:
            sid = new_id()
            stage.new.append(sid)
            row = current = await self._row(sid, session, rules, project_id, stage)
            summary.sessions_created += 1
        else:
            sid, row = known[0], None
            current = await self.sessions.row(sid)
            summary.sessions_updated += 1
        cwd = self.sessions.workspace(current)
        summary.session_ids.append(sid)
        # Building the drafts (images re-encoded, files diffed) is work for a thread: a long
        # history would hold the event loop for its whole length.
        drafts = await asyncio.to_thread(
            self._drafts, sid, iso_time(session.created_at_ns), messages, cwd, summary, stage
        )
        return ImportPlan(sid, row, drafts)

    def _drafts(
        self,
        sid: str,
        created_at: str,
        messages: list[ImportedMessage],
        cwd: Path,
        summary: ImportSummary,
        stage: _Stage,
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
        stage: _Stage,
    ) -> dict[str, Any]:
        row: dict[str, Any] = {
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
        self, sid: str, images: list[ImportedImage], summary: ImportSummary, stage: _Stage
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

    async def _rules(
        self, bundle: ImportBundle, project_id: str | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The name each of the bundle's rules has as a manual rule (key → name), and those
        not stored yet (name → content). A rule of the same name and text is the same rule;
        another text under a taken name gets a numbered name."""
        scope = "global" if project_id is None else "project"
        stored = {r.name: r.content for r in await self.user_context.rules(scope, project_id)}
        names: dict[str, str] = {}
        new: dict[str, str] = {}
        for rule in bundle.rules:
            content = clean_content(rule.content, MAX_RULE_CHARS)
            name, n = rule.name, 1
            while (taken := stored.get(name, new.get(name))) is not None and taken != content:
                n += 1
                name = f"{rule.name} ({n})"
            if taken is None:
                new[name] = content
            names[rule.key] = name
        return names, new

    async def _create_rules(
        self, new: dict[str, str], project_id: str | None, summary: ImportSummary
    ) -> None:
        scope = "global" if project_id is None else "project"
        for name, content in new.items():
            fields = {"name": name, "content": content, "trigger": "manual"}
            await self.user_context.create_rule(scope, project_id, fields)
            summary.rules_created += 1

    async def _connections(self, bundle: ImportBundle, summary: ImportSummary) -> None:
        have = {(c.get("name"), c.get("base_url")) for c in self.connections.all()}
        for conn in bundle.connections:
            if (conn.name, conn.base_url) in have:
                summary.skip("connection already present")
                continue
            await self.connections.create(
                {
                    "name": conn.name,
                    "type": "language",
                    "base_url": conn.base_url,
                    "api_key": conn.api_key,
                    "models": conn.models,
                }
            )
            have.add((conn.name, conn.base_url))
            summary.connections_created += 1


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


# What `POST /imports` takes (opencode's history is a directory), and the name an upload gets
# for its parser: the transcript parsers pick their files by name.
UPLOAD_NAMES = {
    "chatbuddy": "backup.zip",
    "foya": "archive.zip",
    "claude-code": "transcript.jsonl",
    "codex": "rollout-upload.jsonl",
}
UPLOADABLE = tuple(UPLOAD_NAMES)


def parse_upload(
    source: str, data: bytes | Path, passphrase: str | None, scratch: Path
) -> ImportBundle:
    """The bundle an uploaded file (its bytes, or a file, which is moved) holds, read from a
    private temporary file; an archive's members are extracted beside it. Runs in a thread."""
    if source not in UPLOAD_NAMES:
        raise BadRequest(
            f"source must be one of {', '.join(UPLOADABLE)} (opencode's history is a "
            "directory: import it with `foya import opencode`)",
            code="invalid_import_source",
        )
    scratch.mkdir(mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        path = Path(folder) / UPLOAD_NAMES[source]
        if isinstance(data, Path):
            data.replace(path)
        else:
            path.write_bytes(data)
        return sources.parse(source, path, passphrase=passphrase, scratch=Path(folder))
