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
from pathlib import Path
from typing import TYPE_CHECKING

from app.artifacts import Artifacts
from app.events import Event
from app.failpoints import failpoint
from app.imports.model import ImportBundle, InvalidImport
from app.kernel.connections import Connections
from app.kernel.emit import Facts
from app.kernel.import_plan import ImportSummary, Planner, Stage
from app.kernel.import_upload import UPLOADABLE, UploadForm, parse_upload, receive
from app.kernel.importcheck import validate
from app.kernel.projects import Projects
from app.kernel.sessions import Sessions
from app.kernel.usercontext import UserContext
from app.kernel.usercontext.items import MAX_RULE_CHARS, clean_content
from app.metrics import Metrics
from app.staging import new_staging
from app.store.imports import ImportPlan

if TYPE_CHECKING:
    from app.kernel.turns.runner import Turns

__all__ = ["UPLOADABLE", "ImportSummary", "Imports", "UploadForm", "parse_upload"]


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
        self.planner = Planner(sessions, connections)
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
            await receive(chunks, path)
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
        root = await asyncio.to_thread(new_staging, self.planner.data_dir, "import")
        stage = Stage(root, Artifacts(root / "artifacts"))
        try:
            async with contextlib.AsyncExitStack() as held:
                rules, new_rules = await self._rules(bundle, project_id)
                plans = []
                for session in bundle.sessions:
                    plan = await self.planner.plan(
                        session, known.get(session.source), rules, project_id, summary, stage
                    )
                    if plan is None:
                        continue
                    if plan.row is None:
                        await held.enter_async_context(self.turns.exclusive(plan.session))
                    plans.append(plan)
                failpoint("import_before_commit")
                # Only sessions that existed can have a client watching them.
                watched = {plan.session for plan in plans if plan.row is None}
                await self.facts.commit_across(
                    watched, lambda: self._store(plans, stage), must=False
                )
        finally:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, root, ignore_errors=True))
        # After the commit: a crash before it leaves no rule or connection behind, and one
        # after it is mended by importing again (rules and connections are matched by name).
        await self._create_rules(new_rules, project_id, summary)
        await self._connections(bundle, summary)

    async def _store(self, plans: list[ImportPlan], stage: Stage) -> list[Event]:
        """Commit `plans` in one transaction, then move their staged files into place. Still
        held: no turn of a session, and no client, sees its new messages before their images."""
        events = await self.sessions.store.store_import(plans)
        await asyncio.to_thread(self.planner.place, stage)
        return events

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
