"""Foya's portable archive: what `foya export` writes and `foya import foya` reads.

A ZIP (DEFLATE) of UTF-8 members, the manifest last:

    sessions/<id>/session.json      the session: id, title, title_is_manual, model, times (ns),
                                    import_source and cwd when it came from another tool
    sessions/<id>/events.jsonl      every stored fact of the session, oldest first:
                                    {seq, kind, run_id, occurred_at_ns, payload}
    sessions/<id>/history.jsonl     the active messages, as clients see them (with event_seq)
    sessions/<id>/transcript.md     the same, readable (app.imports.transcript)
    sessions/<id>/attachments/<id>  the bytes of the images the messages carry
    blobs/<sha256>                  the files' contents that file changes refer to
    rules.json, connections.json    only in archives the CLI converts from another tool's
                                    history (`foya import chatbuddy --with-keys`), never exported
    manifest.json                   {format "foya-export", version, exported_at, foya_version,
                                    sessions [{id, title, messages, events}],
                                    members {name: {sha256, size}}}

Import reads the active history back, not the facts: seqs, run ids and rewound branches belong
to the kernel that wrote them, and the new kernel gives the session new ids. `events.jsonl`
travels for audit and for tools. A member the manifest does not list, a listed one that is
missing, or one whose SHA-256 differs is tampering: the whole archive is refused.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from app.imports import safejson, transcript
from app.imports.model import (
    ImportBundle,
    ImportedConnection,
    ImportedFileChange,
    ImportedImage,
    ImportedMessage,
    ImportedRule,
    ImportedSession,
    InvalidImport,
    Progress,
    UnsupportedImportVersion,
)
from app.imports.zipsafe import ZipMembers, read_zip

FORMAT = "foya-export"
VERSION = 1
MANIFEST = "manifest.json"


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
        self.members: dict[str, dict[str, Any]] = {}
        self._sessions: list[dict[str, Any]] = []
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
        meta: dict[str, Any],
        history: list[dict[str, Any]],
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
        entry = {"id": sid, "title": meta.get("title"), "messages": len(history)}
        self._sessions.append({**entry, "events": events})

    def close(self) -> None:
        manifest = {**self._head, "sessions": self._sessions, "members": self.members}
        self.zip.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
        self.zip.close()


def write_bundle(bundle: ImportBundle, out: IO[bytes], *, exported_at: str, version: str) -> None:
    """Write another tool's parsed history as an archive (how the CLI uploads what it read)."""
    writer = ArchiveWriter(out, exported_at=exported_at, foya_version=version)
    for number, session in enumerate(bundle.sessions):
        history: list[dict[str, Any]] = []
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
        meta = {
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


def _change_ref(change: ImportedFileChange, blobs: dict[str, bytes]) -> dict[str, Any]:
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


def read(
    data: bytes | Path, *, progress: Progress | None = None, scratch: Path | None = None
) -> ImportBundle:
    """Check an archive (its bytes, or a file) whole (format, version, every member's hash)
    and return its sessions; its members are extracted under `scratch` while it is read."""
    with read_zip(data, into=scratch) as members:
        return _read(members, progress)


def _read(members: ZipMembers, progress: Progress | None) -> ImportBundle:
    manifest = _manifest(members)
    bundle = ImportBundle("foya")
    listed = manifest["sessions"]
    for done, entry in enumerate(listed, 1):
        bundle.sessions.append(_session(members, _text(entry, "id", "sessions[]")))
        if progress is not None:
            progress(done, len(listed))
    for rule in _json_member(members, "rules.json", []):
        bundle.rules.append(ImportedRule(**_fields(rule, ("key", "name", "content"), "rule")))
    for conn in _json_member(members, "connections.json", []):
        fields = _fields(conn, ("name", "base_url", "api_key", "models"), "connection")
        bundle.connections.append(ImportedConnection(**fields))
    return bundle


def _manifest(members: ZipMembers) -> dict[str, Any]:
    if MANIFEST not in members:
        raise InvalidImport("not a Foya export: manifest.json is missing")
    manifest = _loads(members[MANIFEST], MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InvalidImport(f"not a Foya export: {MANIFEST} does not say format {FORMAT!r}")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidImport(f"{MANIFEST}: version must be a number")
    if version > VERSION:
        raise UnsupportedImportVersion(
            f"this archive is format version {version}; this Foya reads up to {VERSION}"
        )
    listed = manifest.get("members")
    if not isinstance(listed, dict) or not isinstance(manifest.get("sessions"), list):
        raise InvalidImport(f"{MANIFEST}: members and sessions are required")
    extra = sorted(set(members) - set(listed) - {MANIFEST})
    if extra:
        raise InvalidImport(f"member {extra[0]} is not in the manifest (the archive was altered)")
    for name, entry in listed.items():
        if name not in members:
            raise InvalidImport(f"member {name} is missing (the archive is incomplete)")
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if members.sha256(name) != digest:
            raise InvalidImport(f"member {name} does not match its SHA-256 (damaged or altered)")
    return manifest


def _session(members: ZipMembers, sid: str) -> ImportedSession:
    base = f"sessions/{sid}/"
    meta = _loads(members.get(base + "session.json", b""), base + "session.json")
    if not isinstance(meta, dict):
        raise InvalidImport(f"{base}session.json must be an object")
    source = meta.get("import_source") or f"foya:{sid}"
    messages = [
        _message(members, base, sid, raw, line)
        for line, raw in enumerate(_lines(members, base + "history.jsonl"), 1)
    ]
    created = _int(meta, "created_at_ns", base)
    return ImportedSession(
        source=str(source),
        title=meta.get("title") if isinstance(meta.get("title"), str) else None,
        created_at_ns=created,
        updated_at_ns=_int(meta, "updated_at_ns", base),
        messages=messages,
        model=str(meta.get("model") or ""),
        rule=meta.get("rule") if isinstance(meta.get("rule"), str) else None,
        cwd=meta.get("cwd") if isinstance(meta.get("cwd"), str) else None,
    )


def _message(members: ZipMembers, base: str, sid: str, raw: Any, line: int) -> ImportedMessage:
    where = f"{base}history.jsonl line {line}"
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        raise InvalidImport(f"{where}: a message must be an object with a role")
    message = dict(raw)
    seq = message.pop("event_seq", line)
    source_id = str(message.pop("source_id", None) or f"foya:{sid}:{seq}")
    images = []
    for ref in message.pop("attachments", None) or []:
        artifact = ref.get("id") if isinstance(ref, dict) else None
        name = f"{base}attachments/{artifact}"
        if not isinstance(artifact, str) or name not in members:
            raise InvalidImport(f"{where}: attachment {artifact!r} is not in the archive")
        images.append(ImportedImage(members[name], str(ref.get("name") or artifact)))
    change = message.pop("file_change", None)
    return ImportedMessage(message, source_id, images, _file_change(members, change, where))


def _file_change(members: ZipMembers, change: Any, where: str) -> ImportedFileChange | None:
    if change is None:
        return None
    if not isinstance(change, dict) or not isinstance(change.get("path"), str):
        raise InvalidImport(f"{where}: file_change must be an object with a path")

    def blob(key: Any) -> bytes | None:
        if key is None:
            return None
        if not isinstance(key, str) or f"blobs/{key}" not in members:
            raise InvalidImport(f"{where}: file content {key!r} is not in the archive")
        return members[f"blobs/{key}"]

    before = blob(change.get("before_blob")) if change.get("before_exists") else None
    modes = change.get("before_mode"), change.get("after_mode")
    return ImportedFileChange(
        change["path"],
        before,
        blob(change.get("after_blob")),
        modes[0] if isinstance(modes[0], int) else None,
        modes[1] if isinstance(modes[1], int) else None,
    )


def _lines(members: ZipMembers, name: str) -> Iterator[Any]:
    if name not in members:
        raise InvalidImport(f"{name} is missing")
    with members.open(name) as stream:  # line by line from disk, never the member whole
        for number, line in enumerate(stream, 1):
            if line.strip():
                yield _loads(line, f"{name} line {number}")


def _json_member(members: ZipMembers, name: str, default: Any) -> Any:
    if name not in members:
        return default
    value = _loads(members[name], name)
    if not isinstance(value, list):
        raise InvalidImport(f"{name} must be a list")
    return value


def _loads(data: bytes, where: str) -> Any:
    try:
        return safejson.loads(data)
    except safejson.UnsafeJSON as exc:
        raise InvalidImport(f"{where}: {exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidImport(f"{where} is not valid JSON: {exc}") from None


def _text(value: Any, key: str, where: str) -> str:
    got = value.get(key) if isinstance(value, dict) else None
    if not isinstance(got, str) or not got:
        raise InvalidImport(f"{where}: {key} must be a non-empty string")
    return got


def _int(value: dict[str, Any], key: str, where: str) -> int:
    got = value.get(key)
    if not isinstance(got, int) or isinstance(got, bool):
        raise InvalidImport(f"{where}session.json: {key} must be an integer")
    return got


def _fields(value: Any, names: tuple[str, ...], what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or any(n not in value for n in names):
        raise InvalidImport(f"a {what} needs {', '.join(names)}")
    return {n: value[n] for n in names}
