"""What `bench.soak` samples of the kernel as it goes: /proc figures, database and log sizes,
and the kernel's own event-loop lag histogram.

Each `Sample` is taken between two turns (nothing of ours is in flight then): VmRSS and
Threads from /proc/PID/status, open descriptors from /proc/PID/fd, the sizes of foya.db and
foya.db-wal, the bytes of the JSON log so far, and the cumulative buckets of
`foya_event_loop_lag_seconds` (the kernel times a 0.1 s timer against the clock), so the lag
of any stretch of the run is the difference of two samples.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from bench.harness import KernelProcess

_BUCKET = re.compile(r'^foya_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.MULTILINE)


@dataclass(frozen=True)
class Sample:
    """The kernel after `turns` turns, `seconds` into the run."""

    turns: int
    seconds: float
    rss_mb: float
    fds: int
    threads: int
    db_mb: float
    wal_mb: float
    log_bytes: int
    lag: dict[float, float] = field(repr=False)


def status_fields(pid: int) -> dict[str, str]:
    """/proc/PID/status as a dict of its fields."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def lag_buckets(kernel: KernelProcess) -> dict[float, float]:
    """Cumulative counts of the kernel's loop-lag histogram, by upper bound (s)."""
    text = kernel.http.get("/metrics").text
    return {float(le): float(n) for le, n in _BUCKET.findall(text)}


def _mb(path: str) -> float:
    try:
        return os.path.getsize(path) / 1e6
    except OSError:
        return 0.0


def take(kernel: KernelProcess, turns: int, seconds: float) -> Sample:
    pid = kernel.proc.pid
    status = status_fields(pid)
    db = os.path.join(kernel.data_dir, "foya.db")
    return Sample(
        turns=turns,
        seconds=round(seconds, 1),
        rss_mb=round(int(status["VmRSS"].split()[0]) / 1024, 1),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(status["Threads"]),
        db_mb=round(_mb(db), 2),
        wal_mb=round(_mb(db + "-wal"), 2),
        log_bytes=os.path.getsize(kernel.stdout_path),
        lag=lag_buckets(kernel),
    )


def lag_p99_ms(before: dict[float, float], after: dict[float, float]) -> tuple[float, int, int]:
    """Between two samples: the upper bound (ms) of the bucket holding the p99, the samples,
    and how many were above 20 ms."""
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts.get(float("inf"), 0.0)
    if not total:
        return float("nan"), 0, 0
    p99 = next((le for le, n in counts.items() if n >= 0.99 * total), float("inf"))
    return p99 * 1e3, int(total), int(total - counts.get(0.02, 0.0))


def smaps_rollup(pid: int) -> dict[str, int]:
    """The kernel's /proc/PID/smaps_rollup, in kB (anonymous vs file-backed memory)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        pass
    return out


def row(s: Sample) -> str:
    """One progress / detail line."""
    return (
        f"turn {s.turns:>6}  {s.seconds:>7.1f} s  RSS {s.rss_mb:6.1f} MB  fds {s.fds:>4}  "
        f"threads {s.threads:>3}  db {s.db_mb:7.2f} MB  wal {s.wal_mb:6.2f} MB  "
        f"log {s.log_bytes / 1e6:7.2f} MB"
    )
