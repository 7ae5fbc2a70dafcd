"""Readiness checks behind `GET /readyz`: can this kernel do its job right now?"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.metrics import ReplicationStatus

CheckName = Literal["database", "data_dir", "disk", "replication"]


@dataclass(frozen=True)
class Check:
    """One readiness check's outcome."""

    name: CheckName
    ok: bool
    detail: str


CheckFn = Callable[[], Awaitable[Check]]


def database(ping: Callable[[], Awaitable[int]]) -> CheckFn:
    """The database answers a query."""

    async def check() -> Check:
        try:
            head = await ping()
        except Exception as exc:
            return Check("database", False, f"query failed: {type(exc).__name__}")
        return Check("database", True, f"head seq {head}")

    return check


def data_dir_writable(data_dir: Path) -> CheckFn:
    """The data directory accepts a new file."""

    async def check() -> Check:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".readyz.", dir=data_dir)
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            return Check("data_dir", False, f"{data_dir} is not writable: {exc.strerror}")
        return Check("data_dir", True, "writable")

    return check


def free_disk(data_dir: Path, floor_mb: int) -> CheckFn:
    """The data directory's file system has at least `floor_mb` MiB free."""

    async def check() -> Check:
        try:
            free_mb = shutil.disk_usage(data_dir).free // (1024 * 1024)
        except OSError as exc:
            return Check("disk", False, f"cannot stat {data_dir}: {exc.strerror}")
        ok = free_mb >= floor_mb
        return Check("disk", ok, f"{free_mb} MiB free (floor {floor_mb} MiB)")

    return check


def replication_check(status: Callable[[], ReplicationStatus], max_lag: float | None) -> CheckFn:
    """The replica keeps up: reports the lag and last success; fails only when `max_lag`
    (FOYA_REPLICA_MAX_LAG) is set and exceeded."""

    async def check() -> Check:
        now = status()
        last = (
            dt.datetime.fromtimestamp(now.last_success, dt.UTC).isoformat(timespec="seconds")
            if now.last_success
            else "none yet"
        )
        detail = (
            f"{'running' if now.up else 'litestream not running'}, lag {now.lag_seconds:.1f} s, "
            f"last success {last.replace('+00:00', 'Z')}"
        )
        if max_lag is not None:
            detail += f" (max {max_lag:g} s)"
        return Check("replication", max_lag is None or now.lag_seconds <= max_lag, detail)

    return check
