"""Atomic file writes for JSON/Markdown/secrets that live outside SQLite.

Write a temp file in the same directory, fsync it, rename it over the target, then fsync the
directory, so a crash leaves either the old or the new file and never a torn one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically; the file is created with `mode` from the start."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, value: Any, *, mode: int = 0o600) -> None:
    """Serialize `value` as indented JSON and write it atomically."""
    data = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).encode() + b"\n"
    write_bytes_atomic(path, data, mode=mode)


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
