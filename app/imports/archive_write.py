"""Writing Foya's portable archive (`foya export`, and the CLI's upload of another tool's
history): members hashed as they are written, the manifest last. The format is described in
`app.imports.archive`, which reads it back."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterable
from typing import IO, Any, NotRequired, TypedDict

from app.imports import transcript
from app.imports.model import ImportBundle, ImportedFileChange
from app.jsontypes import JSONObject

FORMAT = "foya-export"
VERSION = 1
MANIFEST = "manifest.json"


class MemberDigest(TypedDict):
    """A member as the manifest lists it."""

    sha256: str
    size: int


class ManifestSession(TypedDict):
    """A session as the manifest lists it."""

    id: str
    title: str | None
    messages: int
    events: int


class SessionMeta(TypedDict):
    """A session's `session.json`."""

    id: str
    title: str | None
    title_is_manual: bool
    model: str
    created_at_ns: int
    updated_at_ns: int
    import_source: NotRequired[str]
    cwd: NotRequired[str | None]
    rule: NotRequired[str | None]


class FileChangeRef(TypedDict):
    """A message's `file_change` in an archive: the file's contents are `blobs/<sha256>`."""

    path: str
    before_exists: bool
    before_mode: int | None
    after_mode: int | None
    before_blob: str | None
    after_blob: str | None


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class LineMember:
    """A JSON-lines member being written; rows may come in several `write` calls."""

    def __init__(self, owner: ArchiveWriter, name: str) -> None:
        self._owner, self._name = owner, name
        self._file = owner.zip.open(name, "w", force_zip64=True)
        self._digest, self._size, self.count = hashlib.sha256(), 0, 0

    def write(self, rows: Iterable[Any]) -> None:
        """Add `rows`, each as one line of JSON."""
        lines = [dumps(row) for row in rows]
        self.write_lines(lines)

    def write_lines(self, lines: list[str]) -> None:
        """Add lines that are already JSON (without their line ends), in one write."""
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode()
        self._file.write(data)
        self._digest.update(data)
        self._size += len(data)
        self.count += len(lines)

    def close(self) -> None:
        self._file.close()
        self._owner.members[self._name] = {"sha256": self._digest.hexdigest(), "size": self._size}


class ArchiveWriter:
    """Writes an archive member by member, hashing as it goes; `close` adds the manifest."""

    def __init__(self, out: IO[bytes], *, exported_at: str, foya_version: str) -> None:
        self.zip = zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1)
        self.members: dict[str, MemberDigest] = {}
        self._sessions: list[ManifestSession] = []
        self._head = {"format": FORMAT, "version": VERSION, "exported_at": exported_at}
        self._head["foya_version"] = foya_version

    def add(self, name: str, data: bytes) -> None:
        self.zip.writestr(name, data)
        self.members[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}

    def add_json(self, name: str, value: Any) -> None:
        self.add(name, (dumps(value) + "\n").encode())

    def lines(self, name: str) -> LineMember:
        """Open JSON-lines member `name` (close it before adding another member)."""
        return LineMember(self, name)

    def session(
        self,
        meta: SessionMeta,
        history: list[JSONObject],
        attachments: dict[str, bytes],
        blobs: dict[str, bytes],
        events: int,
    ) -> None:
        """Add a session's files; its `events.jsonl` (`events` facts) is already written."""
        sid = str(meta["id"])
        base = f"sessions/{sid}/"
        self.add_json(base + "session.json", meta)
        member = self.lines(base + "history.jsonl")
        member.write(history)
        member.close()
        self.add(base + "transcript.md", transcript.render(meta, history).encode())
        for artifact, data in attachments.items():
            self.add(f"{base}attachments/{artifact}", data)
        for key, data in blobs.items():
            if f"blobs/{key}" not in self.members:
                self.add(f"blobs/{key}", data)
        entry: ManifestSession = {
            "id": sid,
            "title": meta["title"],
            "messages": len(history),
            "events": events,
        }
        self._sessions.append(entry)

    def close(self) -> None:
        manifest = {**self._head, "sessions": self._sessions, "members": self.members}
        self.zip.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
        self.zip.close()


def write_bundle(bundle: ImportBundle, out: IO[bytes], *, exported_at: str, version: str) -> None:
    """Write another tool's parsed history as an archive (how the CLI uploads what it read)."""
    writer = ArchiveWriter(out, exported_at=exported_at, foya_version=version)
    for number, session in enumerate(bundle.sessions):
        history: list[JSONObject] = []
        attachments: dict[str, bytes] = {}
        blobs: dict[str, bytes] = {}
        for m_index, imported in enumerate(session.messages):
            message = {**imported.message, "source_id": imported.source_id}
            refs = []
            for i_index, image in enumerate(imported.images):
                artifact = f"{m_index}-{i_index}"
                attachments[artifact] = image.data
                refs.append({"id": artifact, "name": image.name})
            if refs:
                message["attachments"] = refs
            if imported.file_change is not None:
                message["file_change"] = _change_ref(imported.file_change, blobs)
            history.append(message)
        meta: SessionMeta = {
            "id": f"import-{number}",
            "title": session.title,
            "title_is_manual": session.title is not None,
            "model": session.model,
            "created_at_ns": session.created_at_ns,
            "updated_at_ns": session.updated_at_ns,
            "import_source": session.source,
            "cwd": session.cwd,
            "rule": session.rule,
        }
        events = writer.lines(f"sessions/{meta['id']}/events.jsonl")
        events.close()
        writer.session(meta, history, attachments, blobs, 0)
    if bundle.rules:
        writer.add_json("rules.json", [vars(r) for r in bundle.rules])
    if bundle.connections:
        writer.add_json("connections.json", [vars(c) for c in bundle.connections])
    writer.close()


def _change_ref(change: ImportedFileChange, blobs: dict[str, bytes]) -> FileChangeRef:
    def key(data: bytes | None) -> str | None:
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    return {
        "path": change.path,
        "before_exists": change.before is not None,
        "before_mode": change.before_mode,
        "after_mode": change.after_mode,
        "before_blob": key(change.before),
        "after_blob": key(change.after),
    }
