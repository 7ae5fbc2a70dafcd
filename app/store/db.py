"""One SQLite connection, owned by one thread; every statement runs there, in order.

Callers `await Database.read(fn)` / `await Database.write(fn)`; `fn(conn)` runs on the store thread.
Writes queued while the thread is busy are committed together (group commit): each runs inside its
own SAVEPOINT, so a failing write rolls back alone, and every write's future resolves only after
the shared COMMIT returned. With `synchronous=FULL` one fsync then serves many writes (DESIGN §7:
~6k single-row commits/s vs ~200k rows/s in batches).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from app.errors import InsufficientStorage
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
#: docs/SQLITE_INTERNALS.md: `PRAGMA wal_autocheckpoint = 10000`). High, not off: should
#: Litestream be down or stuck, SQLite still checkpoints at ~40 MB and the WAL stays bounded.
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


class _Job:
    """A unit of store work and where its outcome goes: an asyncio future on `loop`, or a
    concurrent future for blocking callers."""

    __slots__ = ("fn", "future", "loop", "write")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        write: bool,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.fn = fn
        self.write = write
        self.loop = loop
        self.future: asyncio.Future[Any] | Future[Any] = (
            loop.create_future() if loop is not None else Future()
        )


Outcome = tuple[_Job, Any, BaseException | None]


def storage_error(exc: BaseException) -> BaseException:
    """SQLite's "database or disk is full" as the typed 507; any other error unchanged."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
        mapped = InsufficientStorage(
            "the disk holding the database is full: free space on it and try again"
        )
        mapped.__cause__ = exc
        return mapped
    return exc


def _resolve(outcomes: list[Outcome]) -> None:
    for job, value, error in outcomes:
        if job.future.cancelled():
            continue
        if error is not None:
            job.future.set_exception(storage_error(error))
        else:
            job.future.set_result(value)


def _settle_all(outcomes: list[Outcome]) -> None:
    """Hand outcomes back: one wake-up per event loop, not one per job (a self-pipe write and a
    GIL hand-off each, which dominated group-commit cycles)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    direct = []
    for outcome in outcomes:
        loop = outcome[0].loop
        if loop is None:
            direct.append(outcome)
        else:
            by_loop.setdefault(loop, []).append(outcome)
    _resolve(direct)
    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed while we worked
            loop.call_soon_threadsafe(_resolve, items)


class Database:
    """The store thread and its connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
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

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` on the store thread outside any transaction."""
        return await self._submit(fn, write=False)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` atomically; resolves after the COMMIT that includes it returned."""
        return await self._submit(fn, write=True)

    def call(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        """Blocking variant for threads without an event loop (CLI tools, tests)."""
        if self._closed:
            raise StoreClosed("the store is closed")
        job = _Job(fn, write)
        self._jobs.put(job)
        assert isinstance(job.future, Future)
        result: T = job.future.result()
        return result

    async def _submit(self, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        if self._closed:
            raise StoreClosed("the store is closed")
        job = _Job(fn, write, asyncio.get_running_loop())
        self._jobs.put(job)
        assert isinstance(job.future, asyncio.Future)
        result: T = await job.future
        return result

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
                    _settle(job, conn)
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
                        self._commit(conn, batch)
                        batch = []
                        _settle(nxt, conn)
                        continue
                    batch.append(nxt)
                self._commit(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    @staticmethod
    def _commit(conn: sqlite3.Connection, batch: list[_Job]) -> None:
        if not batch:
            return
        if len(batch) == 1:
            _settle_all([_run_alone(conn, batch[0])])
            return
        try:
            _settle_all(_run_batch(conn, batch, isolate=False))
        except _Retry:
            _settle_all(_run_batch(conn, batch, isolate=True))


class _Retry(Exception):
    """A write failed in an optimistic batch; run the batch again with savepoints."""


def _run_batch(conn: sqlite3.Connection, batch: list[_Job], *, isolate: bool) -> list[Outcome]:
    """Run `batch` in one transaction. Optimistically (no savepoints: failures are rare and a
    savepoint pair costs as much as a small insert), or isolated, each write in a SAVEPOINT so
    one failure rolls back alone. Store functions only touch the database, so re-running a
    batch after a rollback is safe."""
    results: list[Outcome] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
        for job in batch:
            if not isolate:
                try:
                    results.append((job, job.fn(conn), None))
                except Exception as exc:
                    raise _Retry from exc
                continue
            conn.execute("SAVEPOINT w")
            try:
                value = job.fn(conn)
            except Exception as exc:
                if not conn.in_transaction:
                    raise  # SQLite rolled the whole transaction back (e.g. disk full)
                conn.execute("ROLLBACK TO w")
                conn.execute("RELEASE w")
                results.append((job, None, exc))
            else:
                conn.execute("RELEASE w")
                results.append((job, value, None))
        conn.execute("COMMIT")
    except _Retry:
        _rollback(conn)
        raise
    except Exception as exc:  # the transaction failed as a whole: nothing in it is durable
        _rollback(conn)
        results = [(job, None, exc) for job in batch]
    return results


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is still open (SQLite ends some failed ones by itself)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _run_alone(conn: sqlite3.Connection, job: _Job) -> Outcome:
    """One write in its own transaction (no savepoint needed: a failure rolls it all back)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        value = job.fn(conn)
        conn.execute("COMMIT")
    except Exception as exc:
        _rollback(conn)
        return (job, None, exc)
    return (job, value, None)


def _settle(job: _Job, conn: sqlite3.Connection) -> None:
    try:
        outcome: Outcome = (job, job.fn(conn), None)
    except Exception as exc:
        outcome = (job, None, exc)
    _settle_all([outcome])
