"""The kernel façade: every decision the service makes goes through here.

HTTP routes make one call on `Kernel` and shape the answer; the kernel never sees HTTP.
"""

from __future__ import annotations

from app.errors import Unavailable
from app.kernel.readiness import Check, CheckFn, data_dir_writable, free_disk
from app.metrics import Metrics
from app.settings import Settings

__all__ = ["Check", "Kernel", "NotReady"]


class NotReady(Unavailable):
    """At least one readiness check failed."""

    code = "not_ready"

    def __init__(self, checks: list[Check]) -> None:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok)
        super().__init__(f"not ready: {failed}")
        self.checks = checks
        self.extra = {"checks": [vars(c) for c in checks]}


class Kernel:
    """Owns the service's state and rules. Built by the app factory, closed by its lifespan."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self._checks: list[CheckFn] = [
            data_dir_writable(settings.data_dir),
            free_disk(settings.data_dir, settings.min_free_disk_mb),
        ]

    async def start(self) -> None:
        """Open what the kernel owns. Called once by the app's lifespan."""
        self.settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def begin_shutdown(self) -> None:
        """First step of a graceful stop: end long-lived work so streams close themselves."""

    async def close(self) -> None:
        """Release what `start` opened."""

    async def readiness(self) -> list[Check]:
        """Run every readiness check; raise `NotReady` listing the failures."""
        checks = [await check() for check in self._checks]
        if not all(c.ok for c in checks):
            raise NotReady(checks)
        return checks
