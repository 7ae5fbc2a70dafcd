"""Exporting sessions as a portable archive (app.imports.archive) that `foya import foya` reads.

A session's facts are read in pages and written as they come, so a session of any length is
exported in bounded memory; the ZIP work runs off the event loop. The archive goes to a private
temporary file that the caller streams and removes.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from app import __version__
from app.errors import FoyaError
from app.events import iso_time
from app.imports import transcript
from app.imports.archive import ArchiveWriter, SessionMeta
from app.jsontypes import JSONObject
from app.kernel.ids import now_ns
from app.kernel.messageshape import servable
from app.kernel.sessions import Sessions
from app.kernel.usercontext import UserContext
from app.logs import get_logger

PAGE = 5000
log = get_logger("foya.exports")


class Exports:
    """Writes archives of stored sessions."""

    def __init__(self, sessions: Sessions, user_context: UserContext, scratch: Path) -> None:
        self.sessions = sessions
        self.user_context = user_context
        self.scratch = scratch  # temporary archives, on the data dir's disk

    async def archive(self, ids: list[str] | None = None) -> IO[bytes]:
        """An archive of `ids` (every top-level session when None) in an unnamed temporary
        file, rewound to its start; the caller closes it."""
        if ids is None:
            ids = [str(r["id"]) for r in await self.sessions.store.list_sessions()]
        for sid in ids:
            await self.sessions.row(sid)  # 404 before any work
        await asyncio.to_thread(self.scratch.mkdir, mode=0o700, exist_ok=True)
        out = tempfile.TemporaryFile(dir=self.scratch)  # noqa: SIM115 (the caller closes it)
        try:
            writer = ArchiveWriter(out, exported_at=iso_time(now_ns()), foya_version=__version__)
            rules: dict[str, str] = {}
            for sid in ids:
                await self._session(writer, sid, rules)
            if rules:  # the rules imported sessions apply travel with them
                linked = [{"key": n, "name": n, "content": c} for n, c in rules.items()]
                writer.add_json("rules.json", linked)
            await asyncio.to_thread(writer.close)
            out.seek(0)
        except BaseException:
            out.close()
            raise
        return out

    async def transcript(self, sid: str) -> str:
        """The readable Markdown transcript of one session."""
        row = await self.sessions.row(sid)
        history = await self.sessions.store.history(sid)
        return transcript.render(_meta(row), [dict(servable(m, session=sid)) for m in history])

    async def _session(self, writer: ArchiveWriter, sid: str, rules: dict[str, str]) -> None:
        store = self.sessions.store
        row = await self.sessions.row(sid)
        meta = _meta(row)
        if row.get("import_rule"):
            scope, project = (
                ("project", row["project_id"]) if row.get("project_id") else ("global", None)
            )
            found = [
                r
                for r in await self.user_context.rules(scope, project)
                if r.name == row["import_rule"]
            ]
            if found:
                rules[found[0].name] = found[0].content
                meta["rule"] = found[0].name
        events = writer.lines(f"sessions/{sid}/events.jsonl")
        after, page = await store.fact_lines(sid, 0, PAGE)
        while page:
            await asyncio.to_thread(events.write_lines, page)
            after, page = await store.fact_lines(sid, after, PAGE)
        await asyncio.to_thread(events.close)
        # One bad stored record never breaks an export: what cannot be rendered is left out.
        history: list[JSONObject] = [
            dict(servable(m, session=sid)) for m in await store.history(sid)
        ]
        cwd = self.sessions.workspace(row)
        for message in history:
            if isinstance(change := message.get("file_change"), dict):
                message["file_change"] = {**change, "path": self._relative(sid, cwd, change)}
        keys = {
            str(key)
            for m in history
            if isinstance(change := m.get("file_change"), dict)
            for key in (change.get("before_blob"), change.get("after_blob"))
            if key
        }
        blobs = await store.blobs(sorted(keys))
        attachments: dict[str, bytes] = {}
        artifacts = self.sessions.artifacts
        for message in history:
            kept = []
            for ref in message.get("attachments") or []:
                artifact = str(ref.get("id"))
                try:
                    data, _ = await asyncio.to_thread(artifacts.read, sid, artifact)
                except (FoyaError, OSError) as exc:  # missing, damaged: the message travels
                    log.warning("export left out an attachment", session=sid, why=str(exc))
                    continue
                attachments[artifact] = data
                kept.append(ref)
            if "attachments" in message:
                message["attachments"] = kept
        await asyncio.to_thread(writer.session, meta, history, attachments, blobs, events.count)

    def _relative(self, sid: str, cwd: Path, change: JSONObject) -> str:
        """A changed file's path relative to the session's directory, which is where an
        import puts it back; a path outside stays absolute (an import skips it)."""
        path = Path(self.sessions.local_path(sid, str(change.get("path", ""))))
        return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else str(path)


def _meta(row: Mapping[str, Any]) -> SessionMeta:
    # The row fields an archive keeps; the rest (phase, connection, workspace) is local.
    meta: SessionMeta = {
        "id": row["id"],
        "title": row.get("title"),
        "title_is_manual": bool(row.get("title_is_manual")),
        "model": row["model"],
        "created_at_ns": row["created_at_ns"],
        "updated_at_ns": row["updated_at_ns"],
    }
    if row.get("import_source"):
        meta["import_source"] = row["import_source"]
    return meta
