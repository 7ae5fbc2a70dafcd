"""One SQLite connection, owned by one thread; every statement runs there, in order.

Callers `await Database.read(fn)` / `await Database.write(fn)`; `fn(conn)` runs on the store thread.
Writes queued while the thread is busy are committed together (group commit, `app.store.commit`):
every write's future resolves only after the shared COMMIT returned.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar, cast

from app.store.commit import Job, commit, settle
from app.store.schema import check_version

T = TypeVar("T")

PRAGMAS = (
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
)
MAX_BATCH = 256
#: `wal_autocheckpoint` while Litestream replicates the database (app.ops.replicate). Litestream
#: checkpoints itself (PASSIVE at 1,000 WAL pages and every minute; its db.go
#: `checkpointIfNeeded`) around its own read lock, and its documentation advises the application
#: to disable its autocheckpoints or set them high so they do not interfere (litestream.io/tips;
#: Litestream's docs/SQLITE_INTERNALS.md: `PRAGMA wal_autocheckpoint = 10000`). High, not off:
#: should Litestream be down or stuck, SQLite still checkpoints at ~40 MB and the WAL stays
#: bounded.
REPLICATED_AUTOCHECKPOINT = 10_000


def connect(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open `path` with the house pragmas; the only place a connection is made."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=check_same_thread, cached_statements=256
    )
    try:
        check_version(conn)  # before any pragma that could write to a newer database
    except BaseException:
        conn.close()
        raise
    # auto_vacuum only takes effect before the first table exists; harmless afterwards.
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    for pragma in PRAGMAS:
        conn.execute(pragma)
    path.chmod(0o600)
    return conn


class StoreClosed(RuntimeError):
    """Work was submitted after `Database.close()`."""


class Database:
    """The store thread and its connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="foya-store", daemon=True)
        self._ready: Future[None] = Future()
        self._closed = False

    def start(self, init: Callable[[sqlite3.Connection], None]) -> None:
        """Open the connection on the store thread and run `init` (migrations) there."""
        self._init = init
        self._thread.start()
        self._ready.result()

    async def defer_checkpoints(self) -> None:
        """Leave WAL checkpoints to Litestream, keeping SQLite's as a far backstop."""
        await self.read(
            lambda c: c.execute(f"PRAGMA wal_autocheckpoint={REPLICATED_AUTOCHECKPOINT}")
        )

    def close(self) -> None:
        """Finish queued work, then close the connection."""
        self._closed = True
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Run `fn` on the store thread outside any transaction; await the returned future."""
        return self._submit(fn, False)

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Run `fn` atomically; the returned future resolves after the COMMIT that includes it
        returned."""
        return self._submit(fn, True)

    def call(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        """Blocking variant for threads without an event loop (CLI tools, tests)."""
        if self._closed:
            raise StoreClosed("the store is closed")
        job = Job(fn, write)
        self._jobs.put(job)
        assert isinstance(job.future, Future)
        result: T = job.future.result()
        return result

    def _submit(self, fn: Callable[[sqlite3.Connection], T], write: bool) -> asyncio.Future[T]:
        # A plain function handing back the job's future, not a coroutine: every append would
        # otherwise build and unwind two more coroutine frames on the event loop, which the
        # store thread waits for while writers are in a group commit.
        if self._closed:
            raise StoreClosed("the store is closed")
        job = Job(fn, write, asyncio.get_running_loop())
        self._jobs.put(job)
        return cast("asyncio.Future[T]", job.future)

    def _run(self) -> None:
        try:
            conn = connect(self.path)
            self._init(conn)
        except BaseException as exc:
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                if not job.write:
                    settle(job, conn)
                    continue
                batch = [job]
                stop = False
                while len(batch) < MAX_BATCH:
                    try:
                        nxt = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    if not nxt.write:
                        # A read must not see writes that may still roll back: commit first.
                        commit(conn, batch)
                        batch = []
                        settle(nxt, conn)
                        continue
                    batch.append(nxt)
                commit(conn, batch)
                if stop:
                    return
        finally:
            conn.close()
