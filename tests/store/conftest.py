"""Shared helpers for the event-store tests: a real `Store` on a real SQLite file in tmp_path.

Nothing of our own is mocked. `Store` is async; tests drive it with `asyncio.run` (`run`) or the
blocking `Store.db.call`. Test modules import the plain helpers with `from .conftest import ...`.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from app import events as k
from app.events import Checkpoint, Event, EventDraft, FileChange, Kind, Message
from app.store import Store
from app.store.checkpoints import CHECKPOINT_VERSION, source_digest

T = TypeVar("T")
P = TypeVar("P")

REPO = Path(__file__).resolve().parents[2]
FOYA = (sys.executable, "-m", "app")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Drive one store coroutine to completion."""
    return asyncio.run(coro)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def session_row(sid: str, **fields: Any) -> dict[str, Any]:
    now = time.time_ns()
    return {"id": sid, "created_at_ns": now, "updated_at_ns": now, **fields}


def user(text: str = "hi") -> Message:
    return {"role": "user", "content": text}


def assistant(text: str = "ok") -> Message:
    return {"role": "assistant", "content": text}


def tool_change(
    path: str,
    after: bytes | None,
    before: bytes | None = None,
    *,
    before_mode: int | None = 0o644,
    after_mode: int | None = 0o644,
    text: str = "edited",
) -> tuple[Message, dict[str, bytes]]:
    """A tool Message carrying a `file_change`, and the blobs it references."""
    blobs = {sha(b): b for b in (before, after) if b is not None}
    change: FileChange = {
        "path": path,
        "before_exists": before is not None,
        "before_mode": before_mode if before is not None else None,
        "after_mode": after_mode if after is not None else None,
        "before_blob": sha(before) if before is not None else None,
        "after_blob": sha(after) if after is not None else None,
    }
    return {"role": "tool", "content": text, "file_change": change}, blobs


def draft(
    session: str,
    kind: Kind[P],
    payload: P,
    run_id: str | None = None,
    blobs: dict[str, bytes] | None = None,
) -> EventDraft:
    return EventDraft(session, kind, payload, run_id, blobs)


def say(
    store: Store,
    session: str,
    message: Message,
    run_id: str | None = None,
    blobs: dict[str, bytes] | None = None,
) -> Event:
    """Append one `message_end`."""
    return run(store.append(EventDraft(session, k.MESSAGE_END, message, run_id, blobs)))


def checkpoint_for(store: Store, session: str, through: int, cid: str = "c1") -> Checkpoint:
    """A valid checkpoint payload for the session's current active history up to `through`."""
    digest = store.db.call(lambda c: source_digest(c, session, through), write=False)
    # Only the fields the store checks: it keeps a checkpoint without the summary's figures.
    return cast(
        Checkpoint,
        {
            "version": CHECKPOINT_VERSION,
            "id": cid,
            "through_seq": through,
            "source_digest": digest,
            "summary": f"summary {cid}",
        },
    )


def rows(store: Store, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run a read query on the store's own connection."""
    return store.db.call(lambda c: c.execute(sql, args).fetchall(), write=False)


def count(store: Store, table: str, where: str = "1", args: tuple[Any, ...] = ()) -> int:
    return int(rows(store, f"SELECT COUNT(*) FROM {table} WHERE {where}", args)[0][0])


def raw(path: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a separate plain connection (foreign keys off) and commit."""
    conn = sqlite3.connect(path)
    try:
        out = conn.execute(sql, args).fetchall()
        conn.commit()
        return out
    finally:
        conn.close()


def gz(data: bytes) -> bytes:
    return gzip.compress(data)


def cli_env() -> dict[str, str]:
    """This environment without FOYA_* variables (XDG_CONFIG_HOME is isolated by tests/)."""
    env = {key: v for key, v in os.environ.items() if not key.startswith("FOYA_")}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="200", TERM="dumb", FOYA_LOG_FORMAT="json")
    return env


def foya(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real `foya` CLI as a subprocess."""
    return subprocess.run(
        [*FOYA, *args],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[Store]:
    """An open store on `<tmp>/data/foya.db`; closed at teardown."""
    s = Store(data_dir)
    s.open()
    try:
        yield s
    finally:
        s.close()
