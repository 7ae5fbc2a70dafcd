"""Continuous replication for `foya serve --replicate URL`: Litestream as a supervised child.

`Replicator.start()` (before the kernel serves) snapshots the files once, writes the config
(app.ops.replica_config), starts `litestream replicate` and waits until its control socket
answers: a binary that cannot run or a config it refuses is a `ConfigError`, so `foya serve`
exits 2 with Litestream's own words. Then three threads:

- the supervisor restarts Litestream when it exits (backoff 0.5 s doubling to 30 s, reset after
  a minute of running) and, every second, asks its control socket where each database stands;
- the files thread runs `filesnap.sync_tree` every FOYA_REPLICA_FILES_INTERVAL seconds;
- one reader per child turns Litestream's JSON log lines into ours (logger `foya.replication`:
  its errors and warnings at warning level, the rest at debug).

Lag, measured per database to within the 1 s poll: `POST /sync {"path"}` (without `wait`)
makes Litestream turn the WAL into its next local transaction and answers `txid` (the newest
local one) and `replicated_txid` (the newest on the replica: 0 after a failed upload, so we
keep the highest seen). The lag is how long ago we first saw the oldest local txid the
replica does not have yet: 0 when idle or caught up, growing while the replica is unreachable.
When Litestream does not answer, or refuses the sync (it cannot learn the replica's position),
the lag counts from the first such poll; until a sync succeeded again (`last_sync_at` moved
past it) we ask only every 30 s, not to reach for an unreachable replica every second.
`last_success` is the older of the two databases' `last_sync_at` from `GET /list`: Litestream's
"last successful replica sync", which also advances while idle.

The child gets PR_SET_PDEATHSIG=SIGTERM (it goes when the thread that started it goes, so only
long-lived threads start it: the caller of `start` and the supervisor), its own session (a
Ctrl-C on the terminal reaches the kernel only) and umask 077. `stop()` runs after the kernel
closed its store: SIGTERM by PID, at most 10 s (Litestream's last upload attempt is capped at
5 s by the config), then SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from app.errors import ConfigError
from app.jsontypes import JSONObject
from app.logs import Throttle, get_logger
from app.metrics import ReplicationStatus
from app.ops import replica_config
from app.ops.replica_control import UNANSWERED, Lag, request
from app.settings import Settings
from app.store import DB_NAME
from app.store.filesnap import FILES_DB, sync_tree

START_DEADLINE = 15.0
STOP_DEADLINE = 10.0
POLL_INTERVAL = 1.0
BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_RESET = 0.5, 30.0, 60.0
_PR_SET_PDEATHSIG = 1
# Shipping the WAL is background work: it yields the CPU to the kernel's own writer.
NICENESS = 10
log = get_logger("foya.replication")


def _pdeathsig() -> None:
    """In the child before exec: die with the thread that started us; private new files."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    os.umask(0o077)
    os.nice(NICENESS)


class Replicator:
    """Litestream and the files scan, supervised; `status` is read by /metrics and /readyz."""

    def __init__(self, settings: Settings, url: str) -> None:
        """Check everything that can be checked without starting (raises `ConfigError`)."""
        self.settings = settings
        self.url = url
        replica_config.parse_url(url, settings.protected_paths[:2])
        self.binary = replica_config.litestream_binary(settings.litestream_bin)
        self.socket = replica_config.socket_path(settings.data_dir)
        replica_config.replica_options(url, settings)
        self.databases = {"db": settings.data_dir / DB_NAME, "files": settings.data_dir / FILES_DB}
        self.roots = {"data": settings.data_dir, "home": Path.home() / ".foya"}
        self._lags = {name: Lag() for name in self.databases}
        self._answered = False
        self._child: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._too_large: set[str] = set()
        self._errors = Throttle(30.0)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Snapshot the files, start Litestream and wait for its control socket."""
        self._scan()
        self.config = replica_config.write_config(self.settings, self.url)
        self._spawn(self.config)
        end = time.monotonic() + START_DEADLINE
        while not self._poll():
            child = self._child
            assert child is not None
            if child.poll() is not None or time.monotonic() > end:
                self._kill()
                raise ConfigError(
                    f"--replicate: litestream ({self.binary}) did not start: "
                    f"exit {child.returncode}; see its log lines above"
                )
            time.sleep(0.1)
        log.info(
            "replicating",
            replica=replica_config.redact(self.url),
            litestream=str(self.binary),
            files_interval=self.settings.replica_files_interval,
        )
        for target, name in ((self._supervise, "supervisor"), (self._scan_loop, "files")):
            thread = threading.Thread(target=target, name=f"foya-replica-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """End the threads and Litestream (after the kernel's store is closed)."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=STOP_DEADLINE)
        self._kill()
        log.info("replication stopped")

    def status(self) -> ReplicationStatus:
        """Now: Litestream up, the replica's last successful sync, and the lag."""
        now = time.time()
        child = self._child
        syncs = [lag.last_sync for lag in self._lags.values()]
        return ReplicationStatus(
            up=child is not None and child.poll() is None and self._answered,
            last_success=None if None in syncs else min(s for s in syncs if s is not None),
            lag_seconds=max(lag.seconds(now) for lag in self._lags.values()),
        )

    # -- the child ---------------------------------------------------------------------------

    def _spawn(self, config: Path) -> None:
        args = [str(self.binary), "replicate", "-config", str(config), "-no-expand-env"]
        self._child = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_pdeathsig,  # only prctl and umask: nothing that takes a lock
            start_new_session=True,
            close_fds=True,
            env=replica_config.child_env(),
        )
        assert self._child.stdout is not None
        reader = threading.Thread(
            target=_forward, args=(self._child.stdout,), name="foya-replica-log", daemon=True
        )
        reader.start()

    def _kill(self) -> None:
        child = self._child
        if child is None or child.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            log.warning("litestream did not stop in time; killing it", pid=child.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.wait()

    def _supervise(self) -> None:
        backoff, started = BACKOFF_FIRST, time.monotonic()
        while not self._stopping.wait(POLL_INTERVAL):
            child = self._child
            assert child is not None
            if child.poll() is None:
                if time.monotonic() - started > BACKOFF_RESET:
                    backoff = BACKOFF_FIRST
                self._poll()
                continue
            self._answered = False
            log.warning("litestream exited; restarting", code=child.returncode, delay=backoff)
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, BACKOFF_MAX)
            try:
                self._spawn(self.config)
            except OSError as exc:
                log.warning("cannot restart litestream", error=str(exc))
            started = time.monotonic()

    def _poll(self) -> bool:
        """Ask the control socket where each database stands; False if it does not answer."""
        now = time.time()
        try:
            listed = request(self.socket, "GET", "/list")
            synced = {d["path"]: d.get("last_sync_at") for d in listed["databases"]}
        except UNANSWERED:
            self._answered = False
            for lag in self._lags.values():
                lag.fail(now)
            return False
        self._answered = True
        for name, path in self.databases.items():
            lag = self._lags[name]
            with contextlib.suppress(KeyError, ValueError, TypeError):
                lag.last_sync = datetime.fromisoformat(synced[str(path)]).timestamp()
            if not lag.should_ask(now):
                continue
            try:
                answer = request(self.socket, "POST", "/sync", {"path": str(path)})
                lag.observe(int(answer["txid"]), int(answer["replicated_txid"]), now)
            except UNANSWERED:
                lag.fail(now)
        return True

    # -- files -------------------------------------------------------------------------------

    def _scan_loop(self) -> None:
        while not self._stopping.wait(self.settings.replica_files_interval):
            try:
                self._scan()
            except Exception as exc:  # a scan that failed is retried at the next interval
                if self._errors.allow("scan") is not None:
                    log.warning("files snapshot failed", error=f"{type(exc).__name__}: {exc}")

    def _scan(self) -> None:
        stats = sync_tree(self.databases["files"], self.roots)
        for path in set(stats.skipped) - self._too_large:
            log.warning("file too large to replicate; skipped", path=path)
        self._too_large = set(stats.skipped)
        if stats.changed or stats.removed:
            log.debug("files snapshot", changed=stats.changed, removed=stats.removed)


def _forward(stream: IO[bytes]) -> None:
    """Log Litestream's lines as ours: errors and warnings at warning level (each message at
    most every 30 s, with the count held back), the rest at debug."""
    throttle = Throttle(30.0)
    for raw in stream:
        line = raw.decode(errors="replace").strip()
        try:
            # Its lines may repeat a key ("level" is also a compaction level): first one wins.
            pairs: list[tuple[str, Any]] = json.loads(line, object_pairs_hook=list)
            record: JSONObject = {}
            for key, value in pairs:
                record.setdefault(key, value)
            level, msg = str(record.pop("level", "")), str(record.pop("msg", ""))
        except (ValueError, TypeError):
            record, level, msg = {}, "ERROR", line  # not JSON: a startup failure's own words
        if not msg:
            continue
        fields = {f"ls_{k}": v for k, v in record.items() if k != "time"}
        if level not in ("ERROR", "WARN"):
            log.debug(f"litestream: {msg}", **fields)
        elif (held := throttle.allow(msg)) is not None:
            log.warning(f"litestream: {msg}", held_back=held, **fields)
