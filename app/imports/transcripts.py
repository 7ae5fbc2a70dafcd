"""What the agent-CLI transcript parsers (`claude_code`, `codex`, `opencode`) share, besides
`app.imports.conversation`:

- Bounded reading (`read_file`, `json_lines`), the file walk, times (ISO-8601 ↔ ns) and making
  a file change's path relative to the session's working directory.
- Small typed getters over untrusted JSON (`text`, `obj`, `items`): a transcript is foreign
  input, any field may be missing or of another type.
"""

from __future__ import annotations

import base64
import binascii
import ntpath
import os
import posixpath
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.imports import safejson
from app.imports.model import (
    ImportBundle,
    ImportedFileChange,
    ImportedImage,
    ImportedSession,
    ImportReport,
    InvalidImport,
    Progress,
)
from app.jsontypes import JSONObject

# A stray multi-gigabyte file must not exhaust memory: larger files are skipped and reported.
MAX_FILE_BYTES = 512 * 1024 * 1024

OUTSIDE_CWD = "file change outside the working directory"
NOT_IN_FULL = "file change the transcript does not carry in full"

_IMAGE_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(;[^,]*)?,(.*)", re.DOTALL)
_WINDOWS_ROOT = re.compile(r"^[A-Za-z]:[\\/]")
_NAME = re.compile(r"[\w./:-]{1,40}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TITLE_CHARS = 80


def text(value: Any, key: str) -> str:
    """`value[key]` when `value` is an object and that field a string, else ""."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, str) else ""


def obj(value: Any, key: str) -> JSONObject:
    """`value[key]` when it is an object, else {}."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def items(value: Any, key: str) -> list[Any]:
    """`value[key]` when it is an array, else []."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, list) else []


def skip_unknown(report: ImportReport, what: str, kind: Any) -> None:
    """Count a record or part of an unknown type. Odd names, and names past the twentieth,
    are counted together, so a hostile file cannot grow the report without bound."""
    name = kind if isinstance(kind, str) and _NAME.fullmatch(kind) else "(other)"
    reason = f"unknown {what} {name}"
    if reason not in report.skipped and sum(k.startswith("unknown ") for k in report.skipped) >= 20:
        reason = f"unknown {what} (other)"
    report.skip(reason)


def parse_arguments(raw: Any) -> Any:
    """A tool call's input: parsed JSON when the string is JSON, else the string itself."""
    if not isinstance(raw, str):
        return raw
    try:
        return safejson.loads(raw)
    except (ValueError, RecursionError):
        return raw


def kind_of(path: Path) -> str:
    """ "file", "dir", or InvalidImport when `path` is neither or cannot be looked at."""
    try:
        if path.is_file():
            return "file"
        if path.is_dir():
            return "dir"
    except OSError as error:  # e.g. a directory on the way that may not be read
        raise InvalidImport(f"{path} cannot be read: {error.strerror}") from None
    raise InvalidImport(f"{path} does not exist or is not a file or directory")


def find_files(path: Path, match: Callable[[str], bool], what: str) -> list[Path]:
    """`path` itself when it is a file, else every file below it whose name `match`es, sorted.
    Symbolic links to directories are not followed (no loops)."""
    if kind_of(path) == "file":
        return [path]
    found = [
        Path(root) / name for root, _dirs, names in os.walk(path) for name in names if match(name)
    ]
    if not found:
        raise InvalidImport(f"{path} holds no {what}")
    return sorted(found)


def read_sessions(
    path: Path,
    files: list[Path],
    bundle: ImportBundle,
    read: Callable[[Path, bytes], ImportedSession | None],
    what: str,
    progress: Progress | None,
) -> ImportBundle:
    """`bundle` with the session `read` finds in each of `files` (the first file of a session
    wins; a copy of it in another file is counted); `InvalidImport` when there is none."""
    seen: set[str] = set()
    for done, file in enumerate(files, start=1):
        data = read_file(file, bundle.report)
        found = read(file, data) if data is not None else None
        if found is not None and found.source in seen:
            bundle.report.skip("session already read from another file")
        elif found is not None:
            seen.add(found.source)
            bundle.sessions.append(found)
        if progress is not None:
            progress(done, len(files))
    if not bundle.sessions:
        raise InvalidImport(f"{path} holds no readable {what}")
    return bundle


def read_file(path: Path, report: ImportReport) -> bytes | None:
    """The file's bytes, or None (reported) when it is too large or unreadable."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            report.skip(f"file larger than {MAX_FILE_BYTES >> 20} MiB")
            return None
        return path.read_bytes()
    except OSError:
        report.skip("unreadable file")
        return None


def load_json(data: bytes) -> Any:
    """One JSON document, or None when `data` is not one."""
    try:
        return safejson.loads(data)
    except (ValueError, RecursionError):
        return None


def json_lines(data: bytes, report: ImportReport) -> Iterator[tuple[int, JSONObject]]:
    """(line number, object) for each JSON-object line; other lines are counted and skipped."""
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        value = load_json(line)
        if isinstance(value, dict):
            yield number, value
        else:
            report.skip("line that is not a JSON object")


def time_ns(value: Any) -> int | None:
    """ns since the epoch from an ISO-8601 string or a number of ms; None when neither."""
    try:
        if isinstance(value, str) and value:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            ns = (moment - _EPOCH) // timedelta(microseconds=1) * 1000
            iso(ns)  # in range for a date
            return ns
        if isinstance(value, int | float) and not isinstance(value, bool):
            ns = int(value * 1_000_000)
            iso(ns)  # in range for a date
            return ns
    except (ValueError, OverflowError, OSError):
        return None
    return None


def iso(ns: int) -> str:
    """ISO-8601 UTC with milliseconds and "Z", the kernel's `created_at` form."""
    seconds, rest = divmod(ns, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{rest // 1_000_000:03d}Z"


def relative_path(cwd: str | None, path: str) -> str | None:
    """`path` relative to `cwd` ("/" separated), or None when it is not inside `cwd`."""
    if not cwd or not path:
        return None
    flavour: Any = ntpath if _WINDOWS_ROOT.match(cwd) else posixpath
    full = flavour.normpath(flavour.join(cwd, path))
    base = flavour.normpath(cwd)
    try:
        if flavour.commonpath([full, base]) != base:
            return None
    except ValueError:  # different drives, or a relative cwd against an absolute path
        return None
    relative = flavour.relpath(full, base).replace("\\", "/")
    if relative in ("", ".") or relative.startswith("../"):
        return None
    return str(relative)


def file_change(
    cwd: str | None, path: str, before: str | None, after: str | None, report: ImportReport
) -> ImportedFileChange | None:
    """A change with its path made relative to `cwd`; None (counted) when it lies outside."""
    relative = relative_path(cwd, path)
    if relative is None:
        report.skip(OUTSIDE_CWD)
        return None
    return ImportedFileChange(
        relative,
        None if before is None else before.encode(),
        None if after is None else after.encode(),
    )


def image(data: str, media_type: str, number: int, report: ImportReport) -> ImportedImage | None:
    """Base64 image bytes as an `ImportedImage`; None (counted) when they do not decode."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        report.skip("image that does not decode")
        return None
    extension = _IMAGE_EXTENSIONS.get(media_type.lower(), "img")
    return ImportedImage(raw, f"image-{number}.{extension}")


def data_url_image(url: str, number: int, report: ImportReport) -> ImportedImage | None:
    """An image from a `data:<type>;base64,<data>` URL; None (counted) for anything else."""
    match = _DATA_URL.fullmatch(url)
    if match is None or "base64" not in (match.group(2) or ""):
        report.skip("image without inline data")
        return None
    return image(match.group(3), match.group(1) or "", number, report)


def title_from(content: str) -> str | None:
    """A title from a message's text: its first non-empty line, cut to `TITLE_CHARS`."""
    for line in content.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"
    return None
