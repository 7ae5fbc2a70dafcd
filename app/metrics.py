"""Prometheus metrics in an app-owned registry (never the global default one).

`Metrics` is built once by the app factory and passed to whoever records; later layers add their
own series to the same registry.
"""

from __future__ import annotations

import asyncio
import json
import math
import platform
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from app import __version__

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Written to the data dir by `foya backup` on success; read at every scrape.
BACKUP_STATUS_FILE = "backup-status.json"
#: Seconds between two samples of the event loop's lag (`Metrics.watch_loop_lag`).
LAG_INTERVAL = 0.1


class _BackupAge(Collector):
    """The last successful backup's time and age, from the status file `foya backup` writes
    (another process: the file is the only channel). Never backed up: age +Inf."""

    def __init__(self, status: Path) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        try:
            last = float(json.loads(self.status.read_bytes())["last_success_unix"])
        except (OSError, ValueError, KeyError, TypeError):
            last = None
        stamp = GaugeMetricFamily(
            "foya_backup_last_success_timestamp_seconds",
            "Unix time of the last successful foya backup (0: never).",
            value=last or 0.0,
        )
        age = GaugeMetricFamily(
            "foya_backup_age_seconds",
            "Seconds since the last successful foya backup (+Inf: never).",
            value=time.time() - last if last else math.inf,
        )
        yield from (stamp, age)


@dataclass(frozen=True)
class ReplicationStatus:
    """Where continuous replication stands (app.ops.replicate): Litestream running, the Unix
    time of the replica's last successful sync (None: none yet), and how many seconds the
    oldest change not yet on the replica has waited (0: the replica holds everything)."""

    up: bool
    last_success: float | None
    lag_seconds: float


class _Replication(Collector):
    """The replication gauges, read from the replicator at every scrape."""

    def __init__(self, status: Callable[[], ReplicationStatus]) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        now = self.status()
        yield GaugeMetricFamily(
            "foya_replication_up",
            "1 while Litestream runs and answers, else 0.",
            value=1.0 if now.up else 0.0,
        )
        yield GaugeMetricFamily(
            "foya_replication_lag_seconds",
            "Seconds the oldest change not yet on the replica has waited (0: all replicated).",
            value=now.lag_seconds,
        )
        yield GaugeMetricFamily(
            "foya_replication_last_success_timestamp_seconds",
            "Unix time of the replica's last successful sync (0: none yet).",
            value=now.last_success or 0.0,
        )


class CheckOutcome(Protocol):
    """A readiness check's outcome, as `foya_ready` reports it."""

    @property
    def name(self) -> str: ...

    @property
    def ok(self) -> bool: ...


class Metrics:
    """The service's metric series."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._runtime()
        self._http()
        self._turns()
        self._capabilities()

    def _runtime(self) -> None:
        """The process, its garbage collector, the build and the event loop's lag."""
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        Info("foya_build", "Build information.", registry=self.registry).info(
            {"version": __version__, "python": platform.python_version()}
        )
        self.loop_lag = Histogram(
            "foya_event_loop_lag_seconds",
            f"How late the event loop woke a timer, sampled every {LAG_INTERVAL} s.",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1),
            registry=self.registry,
        )

    def _http(self) -> None:
        """Requests served, their duration, those in flight, and readiness."""
        self.requests = Counter(
            "foya_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "foya_http_request_duration_seconds",
            "HTTP request duration by method and route template.",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "foya_http_requests_in_flight", "HTTP requests being served.", registry=self.registry
        )
        self.ready = Gauge(
            "foya_ready",
            "Readiness check outcome by check: 1 passes, 0 fails (what GET /readyz reports).",
            ["check"],
            registry=self.registry,
        )

    def _turns(self) -> None:
        """What turns spend and decide: model tokens, ignored approvals, sub-agent runs."""
        self.tokens = Counter(
            "foya_model_tokens",
            "Model tokens by model and kind (input, output, cached).",
            ["model", "kind"],
            registry=self.registry,
        )
        self.approval_decisions_ignored = Counter(
            "foya_approval_decisions_ignored",
            "Approval decisions that matched no pending request of their session (answered 204).",
            registry=self.registry,
        )
        self.subagent_runs = Counter(
            "foya_subagent_runs",
            "Sub-agent runs by how they ended: completed, failed, cancelled, interrupted.",
            ["status"],
            registry=self.registry,
        )
        self.subagents = Gauge(
            "foya_subagents",
            "Sub-agent runs now queued or running.",
            ["state"],
            registry=self.registry,
        )

    def _capabilities(self) -> None:
        """The capabilities' own work: canvas, terminals, automations, imports."""
        self.canvas_generations = Counter(
            "foya_canvas_generations",
            "Canvas image generations by outcome (success, error, interrupted).",
            ["outcome"],
            registry=self.registry,
        )
        self.terminals_open = Gauge(
            "foya_terminals_open", "Terminal shells running.", registry=self.registry
        )
        self.terminal_bytes = Counter(
            "foya_terminal_bytes",
            "Terminal bytes by direction: output read from PTYs, input written to them.",
            ["direction"],
            registry=self.registry,
        )
        self.automation_runs = Counter(
            "foya_automation_runs",
            "Automation runs by outcome: started, skipped (a due time came while the previous "
            "run was going), completed, failed, cancelled.",
            ["outcome"],
            registry=self.registry,
        )
        self.imports = Counter(
            "foya_imports",
            "Uploaded imports (POST /imports) by source and outcome: imported, failed.",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.imported_messages = Counter(
            "foya_imported_messages",
            "Messages stored by imports, by source.",
            ["source"],
            registry=self.registry,
        )
        self.channel_messages = Counter(
            "foya_channel_messages",
            "Chat channel messages by kind (text, command, button, duplicate; reply, notice, "
            "decision), direction (in, out) and outcome (in: started, queued, refused, failed, "
            "a command's name, a press's result; out: sent, edited, failed).",
            ["kind", "direction", "outcome"],
            registry=self.registry,
        )

    def record_readiness(self, checks: Iterable[CheckOutcome]) -> None:
        """Set `foya_ready{check}` from an evaluation of the readiness checks."""
        for check in checks:
            self.ready.labels(check=check.name).set(1 if check.ok else 0)

    def watch_backups(self, data_dir: Path) -> None:
        """Export the age of the last successful backup of `data_dir`."""
        self.registry.register(_BackupAge(data_dir / BACKUP_STATUS_FILE))

    def watch_replication(self, status: Callable[[], ReplicationStatus]) -> None:
        """Export the replication gauges from `status`."""
        self.registry.register(_Replication(status))

    async def watch_loop_lag(self) -> None:
        """Sample the event loop's lag until cancelled: how much later than due a timer of
        `LAG_INTERVAL` fires is how long the loop was busy with something else."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LAG_INTERVAL
            await asyncio.sleep(LAG_INTERVAL)
            self.loop_lag.observe(max(0.0, loop.time() - due))

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
