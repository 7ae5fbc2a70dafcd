"""The kernel façade: every decision the service makes goes through here.

HTTP routes make one call on `Kernel` and shape the answer; the kernel never sees HTTP. The
services are built, started and stopped by the composition root (`app.kernel.wiring`); the
operations spanning them are in `app.kernel.operations`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from app.errors import Unavailable
from app.kernel.automations import Clock
from app.kernel.operations import Operations
from app.kernel.readiness import (
    Check,
    CheckFn,
    data_dir_writable,
    database,
    free_disk,
    replication_check,
)
from app.kernel.wiring import EAGER, Observer
from app.metrics import Metrics, ReplicationStatus
from app.settings import Settings

__all__ = ["Check", "Kernel", "NotReady"]

READINESS_TTL = 1.0


class NotReady(Unavailable):
    """At least one readiness check failed."""

    code = "not_ready"

    def __init__(self, checks: list[Check]) -> None:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok)
        super().__init__(f"not ready: {failed}")
        self.checks = checks
        self.extra = {"checks": [vars(c) for c in checks]}


class Kernel(Operations):
    """Owns the service's state and rules. Built by the app factory, closed by its lifespan;
    `start`, `begin_shutdown`, `close` and `delete_session` run the capabilities' declared
    list (`app.kernel.wiring`)."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        replication: Callable[[], ReplicationStatus] | None = None,
        observe: Observer | None = None,
    ) -> None:
        """`clock` is the automations scheduler's (tests drive their own); `replication` the
        status of the replicator `foya serve --replicate` runs beside the kernel; `observe` is
        told each step of the kernel's life as it begins (tests watch the order with it)."""
        super().__init__(settings, metrics, clock=clock, replication=replication, observe=observe)
        metrics.watch_backups(settings.data_dir)
        # Builds what the list's steps need at start (the store, projects, connections, ...);
        # every other service waits for its first use.
        self.capabilities()
        for name in EAGER:
            getattr(self, name)
        self._readiness: tuple[float, list[Check]] | None = None
        self._checks: list[CheckFn] = [
            database(self.store.ping),
            data_dir_writable(settings.data_dir),
            free_disk(settings.data_dir, settings.min_free_disk_mb),
        ]
        if replication is not None:
            metrics.watch_replication(replication)
            self._checks.append(replication_check(replication, settings.replica_max_lag))

    async def readiness(self) -> list[Check]:
        """Run every readiness check; raise `NotReady` listing the failures.

        Results are reused for `READINESS_TTL` seconds so a busy prober costs no disk work; each
        new result also sets the `foya_ready{check}` gauge."""
        now = time.monotonic()
        if self._readiness is None or now - self._readiness[0] > READINESS_TTL:
            self._readiness = (now, [await check() for check in self._checks])
            self.metrics.record_readiness(self._readiness[1])
        checks = self._readiness[1]
        if not all(c.ok for c in checks):
            raise NotReady(checks)
        return checks
