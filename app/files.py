"""Atomic file writes for JSON/Markdown/secrets that live outside SQLite.

Write a temp file in the same directory, fsync it, rename it over the target, then fsync the
directory, so a crash leaves either the old or the new file and never a torn one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.errors import ConfigError


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


def restore_file(path: Path, *, exists: bool, mode: int | None, content: bytes | None) -> None:
    """Make `path` absent, or present with `content` and `mode`; idempotent, atomic per file."""
    if not exists:
        path.unlink(missing_ok=True)
        if path.parent.exists():
            fsync_dir(path.parent)
        return
    write_bytes_atomic(path, content or b"", mode=mode if mode is not None else 0o644)


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """Hold a non-blocking exclusive flock on `<data-dir>/kernel.lock` (one kernel per data dir)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / "kernel.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise ConfigError(
                f"--data-dir {data_dir}: another foya kernel (pid {holder}) is using it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
