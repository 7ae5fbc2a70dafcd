"""`foya import` and `foya export`: moving histories into and out of a running kernel.

Import reads the source on this machine (a ChatBuddy backup is decrypted here, so its
passphrase never travels; agent-CLI transcripts are directories here), writes what it read as
a Foya archive (app.imports.archive) in a private temporary file and uploads that to
`POST /imports` with a progress bar; a Foya archive is uploaded as it is. The kernel stores it
all or nothing and answers with a summary, to which the local parse's skips are added.
Export streams `GET /export` (or one session's transcript) into DEST under a temporary name,
renamed when complete.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from app import __version__
from app.imports.model import ImportBundle, Progress
from app.jsontypes import JSONObject
from app.ops.client import checked, http_client
from app.ops.rest import Target

CHUNK = 1024 * 1024
UPLOAD_TIMEOUT = 600.0


def bundle_file(bundle: ImportBundle, scratch: Path | None = None) -> IO[bytes]:
    """`bundle` as a Foya archive in an unnamed private temporary file, at its start."""
    from app.imports.archive import write_bundle

    out = tempfile.TemporaryFile(dir=scratch)  # noqa: SIM115 (the caller closes it)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    write_bundle(bundle, out, exported_at=stamp, version=__version__)
    out.seek(0)
    return out


def upload(
    target: Target,
    file: IO[bytes],
    fields: dict[str, str],
    progress: Progress | None,
) -> JSONObject:
    """POST `file` and `fields` to /imports as multipart/form-data; the kernel's summary."""
    size = file.seek(0, os.SEEK_END)
    file.seek(0)
    boundary = secrets.token_hex(16)
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    )
    head += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="import.zip"'
        "\r\nContent-Type: application/zip\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Iterator[bytes]:
        yield head
        sent = 0
        while chunk := file.read(CHUNK):
            sent += len(chunk)
            if progress is not None:
                progress(sent, size)
            yield chunk
        yield tail

    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(len(head) + size + len(tail)),
    }
    with http_client(target) as client:
        response = client.post("/imports", content=body(), headers=headers, timeout=UPLOAD_TIMEOUT)
        answer: JSONObject = checked(response).json()
        return answer


def download(target: Target, path: str, dest: Path, progress: Progress | None) -> int:
    """Stream GET `path` into `dest` (complete or absent, 0600); the bytes written."""
    partial = dest.with_name(f".{dest.name}.partial")
    written = 0
    try:
        with http_client(target) as client, client.stream("GET", path, timeout=UPLOAD_TIMEOUT) as r:
            if r.status_code >= 400:
                r.read()
                checked(r)
            total = int(r.headers.get("content-length") or 0)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                for chunk in r.iter_bytes(CHUNK):
                    out.write(chunk)
                    written += len(chunk)
                    if progress is not None:
                        progress(written, max(total, written))
                out.flush()
                os.fsync(out.fileno())
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    return written


def merge_report(summary: JSONObject, bundle: ImportBundle | None) -> JSONObject:
    """The kernel's summary with what the local parse skipped and warned about."""
    if bundle is None:
        return summary
    skipped = dict(summary.get("skipped") or {})
    for reason, count in bundle.report.skipped.items():
        skipped[reason] = skipped.get(reason, 0) + count
    warnings = [*bundle.report.warnings, *(summary.get("warnings") or [])]
    return {**summary, "skipped": skipped, "warnings": warnings}


def describe(summary: JSONObject) -> list[str]:
    """The summary as lines for a person."""
    lines = [
        f"sessions: {summary['sessions_created']} new, {summary['sessions_updated']} updated, "
        f"{summary['sessions_unchanged']} unchanged",
        f"messages: {summary['messages_imported']} imported, "
        f"{summary['messages_already_present']} already present",
    ]
    extras = [
        f"{label} {summary[key]}"
        for key, label in (
            ("images", "images"),
            ("file_changes", "file changes"),
            ("rules_created", "rules"),
            ("connections_created", "connections"),
        )
        if summary.get(key)
    ]
    if extras:
        lines.append("also: " + ", ".join(extras))
    for reason, count in sorted((summary.get("skipped") or {}).items()):
        lines.append(f"skipped: {count} {reason}")
    lines.extend(f"warning: {w}" for w in summary.get("warnings") or [])
    return lines
