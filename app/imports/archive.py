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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.imports import safejson
from app.imports.archive_write import (
    FORMAT,
    MANIFEST,
    VERSION,
    ArchiveWriter,
    FileChangeRef,
    LineMember,
    ManifestSession,
    MemberDigest,
    SessionMeta,
    dumps,
    write_bundle,
)
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
from app.jsontypes import JSONObject

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VERSION",
    "ArchiveWriter",
    "FileChangeRef",
    "LineMember",
    "ManifestSession",
    "MemberDigest",
    "SessionMeta",
    "dumps",
    "read",
    "write_bundle",
]


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


def _manifest(members: ZipMembers) -> JSONObject:
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


def _int(value: JSONObject, key: str, where: str) -> int:
    got = value.get(key)
    if not isinstance(got, int) or isinstance(got, bool):
        raise InvalidImport(f"{where}session.json: {key} must be an integer")
    return got


def _fields(value: Any, names: tuple[str, ...], what: str) -> JSONObject:
    if not isinstance(value, dict) or any(n not in value for n in names):
        raise InvalidImport(f"a {what} needs {', '.join(names)}")
    return {n: value[n] for n in names}
