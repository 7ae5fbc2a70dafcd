"""Automations benchmark: scheduler overhead with 1,000 automations defined, against
croniter alone computing the same 1,000 next times in the same run.

Run from the repository root:

    .venv/bin/python -m bench.automations            # table on stdout, progress on stderr
    .venv/bin/python -m bench.automations --json     # machine-readable results on stdout
    .venv/bin/python -m bench.automations --quick    # 3 rounds, 10 s idle windows

Everything runs in this process (no HTTP: the scheduler is kernel work). The 1,000 automations
mix eight expression shapes (every 5 minutes, weekdays at 09:00, nightly, monthly, …) with a
minute of their own and five time zones (UTC, Berlin, New York, Tokyo, Sydney).

1. Next due times of the 1,000, from one instant. Cold (as at load or create): ours parses
   each (`Schedule`: checks, croniter's parse, a first next time) and computes the next due
   time; croniter alone builds `croniter(expr, start)` and calls `get_next`. Warm (as in a
   scheduler pass): ours calls `next_after` on the parsed schedules (DST rules included);
   croniter alone calls `get_next(start_time=…)` on built iterators. Median of the rounds.
2. One scheduler pass of a real kernel (in a temp data dir) holding 1,000 automations of the
   same shapes, moved to a month at least four months away so none falls due while measured
   (written to `automations.json` before start): nothing due (the scan every wake-up does),
   and all 1,000 due with a run still going each (so the pass computes and records 1,000 next
   due times, and writes the file, without starting 1,000 sessions), with the longest time the
   event loop was held meanwhile (a task yielding in a loop measures it). Baseline: croniter
   alone computing those 1,000 next times on built iterators.
3. CPU of the idle scheduler: process CPU time over an idle window (60 s; quick 10 s) of a
   kernel with the 1,000 (none due within the window), against a kernel with none, and the
   scheduler's wake-ups in it (it sleeps until the next due time, at most a minute).

Nothing asserts on a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
from croniter import croniter  # type: ignore[import-untyped]

from app.kernel import Kernel
from app.kernel.automations import AutomationInput, SystemClock
from app.kernel.automations.schedule import Schedule, schedule_of, zone
from app.kernel.automations.store import FILE, VERSION, Automation
from app.metrics import Metrics
from app.settings import Settings
from bench.harness import say
from bench.report import Row, finish, python, text

COUNT = 1000
SHAPES = (
    "{m}/5 * * * *",
    "{m} 9 * * 1-5",
    "{m} 2 * * *",
    "{m} 0 1 * *",
    "{m} 8-18/2 * * *",
    "{m} */6 * * *",
    "{m} 12 * * 0",
    "{m} 7 1,15 * *",
)
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney")


def specs() -> list[tuple[str, str]]:
    """1,000 (cron, timezone) pairs of varied shapes."""
    return [
        (SHAPES[i % len(SHAPES)].format(m=(i * 7) % 60 if i % 8 else (i * 7) % 5), ZONES[i % 5])
        for i in range(COUNT)
    ]


def timed(fn: Any) -> float:
    started = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - started) / 1e6


# ----------------------------------------------------------------------------- next due times


def next_times(rounds: int) -> dict[str, Any]:
    pairs = specs()
    start = dt.datetime.now(dt.UTC)
    local = [start.astimezone(Schedule(c, z).zone) for c, z in pairs]

    def ours_cold() -> None:
        for cron, tz in pairs:
            Schedule(cron, tz).next_after(start)

    def croniter_cold() -> None:
        for (cron, _), begin in zip(pairs, local, strict=True):
            croniter(cron, begin).get_next(dt.datetime)

    parsed = [schedule_of(c, z) for c, z in pairs]
    built = [croniter(c, b) for (c, _), b in zip(pairs, local, strict=True)]

    def ours_warm() -> None:
        for schedule in parsed:
            schedule.next_after(start)

    def croniter_warm() -> None:
        for it, begin in zip(built, local, strict=True):
            it.get_next(dt.datetime, start_time=begin)

    out: dict[str, list[float]] = {
        "ours_cold": [],
        "croniter_cold": [],
        "ours_warm": [],
        "croniter_warm": [],
    }
    for _ in range(rounds):  # alternate, so drift hits both sides alike
        out["ours_cold"].append(timed(ours_cold))
        out["croniter_cold"].append(timed(croniter_cold))
        out["ours_warm"].append(timed(ours_warm))
        out["croniter_warm"].append(timed(croniter_warm))
    return {k: round(statistics.median(v), 2) for k, v in out.items()} | {"rounds": rounds}


# --------------------------------------------------------------------------------- the kernel


class CountingClock(SystemClock):
    """The host's clock, counting the scheduler's sleeps (one per wake-up)."""

    def __init__(self) -> None:
        self.sleeps = 0

    async def sleep_until(self, moment: dt.datetime) -> None:
        self.sleeps += 1
        await super().sleep_until(moment)


def seed(data_dir: Path, count: int) -> None:
    """`count` enabled automations of `specs()`'s shapes in a far month (none due for months),
    written as the kernel stores them."""
    now = dt.datetime.now(dt.UTC)
    far = (now.month + 5) % 12 + 1  # a month at least four months away
    tasks = []
    for i, (cron, tz) in enumerate(specs()[:count]):
        fields = cron.split()
        fields[3] = str(far)
        spec = AutomationInput(
            name=f"automation {i}",
            prompt="Summarize what changed.",
            cron=" ".join(fields),
            timezone=tz,
            enabled=True,
            approval_mode="auto",
        )
        tasks.append(Automation(f"automation-{i:016x}", spec, now, now).wire())
    data_dir.mkdir(parents=True, mode=0o700)
    (data_dir / FILE).write_text(json.dumps({"version": VERSION, "tasks": tasks}))


class LoopProbe:
    """The longest the event loop went without running this task (a `sleep(0)` loop)."""

    def __init__(self) -> None:
        self.longest_ms = 0.0
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        last = time.perf_counter_ns()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter_ns()
            self.longest_ms = max(self.longest_ms, (now - last) / 1e6)
            last = now

    def stop(self) -> float:
        self.task.cancel()
        return self.longest_ms


async def passes(kernel: Kernel, rounds: int) -> dict[str, Any]:
    automations = kernel.automations
    items = automations._items
    now = dt.datetime.now(dt.UTC)
    later = now + dt.timedelta(days=800)  # every automation is due
    built = [
        (croniter(a.spec.cron, now.astimezone(zone(a.spec.timezone))), zone(a.spec.timezone))
        for a in items.values()
    ]
    idle, due, blocked, alone = [], [], [], []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for it, tz in built:
            it.get_next(dt.datetime, start_time=later.astimezone(tz))
        alone.append((time.perf_counter_ns() - started) / 1e6)

        started = time.perf_counter_ns()
        await automations._pass(now)
        automations._next_due()
        idle.append((time.perf_counter_ns() - started) / 1e6)

        saved = dict(items)
        going = asyncio.ensure_future(asyncio.sleep(3600))  # a run "still going" for each
        automations._running._running.update((key, going) for key in items)
        try:
            probe = LoopProbe()
            started = time.perf_counter_ns()
            await automations._pass(later)
            due.append((time.perf_counter_ns() - started) / 1e6)
            blocked.append(probe.stop())
        finally:
            automations._running._running.clear()
            going.cancel()
            automations._items = saved
    await automations.file.save(items.values())
    return {
        "idle_pass_ms": round(statistics.median(idle), 3),
        "due_pass_ms": round(statistics.median(due), 2),
        "due_pass_blocked_ms": round(statistics.median(blocked), 2),
        "croniter_same_ms": round(statistics.median(alone), 2),
        "file_bytes": (kernel.settings.data_dir / FILE).stat().st_size,
    }


async def idle_cpu(kernel: Kernel, clock: CountingClock, window: float) -> dict[str, float]:
    await asyncio.sleep(1.0)  # start-up work (recovery, first passes) settles
    sleeps, cpu, wall = clock.sleeps, time.process_time(), time.monotonic()
    await asyncio.sleep(window)
    used = time.process_time() - cpu
    seconds = time.monotonic() - wall
    return {
        "cpu_ms_per_min": round(used / seconds * 60 * 1000, 2),
        "wakeups_per_min": round((clock.sleeps - sleeps) / seconds * 60, 2),
        "window_s": round(seconds, 1),
    }


async def with_kernel(count: int, rounds: int, window: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-automations-") as root:
        data_dir = Path(root) / "data"
        seed(data_dir, count)
        clock = CountingClock()
        kernel = Kernel(Settings(data_dir=data_dir), Metrics(), clock=clock)
        started = time.perf_counter_ns()
        await kernel.start()
        result: dict[str, Any] = {"start_ms": round((time.perf_counter_ns() - started) / 1e6, 1)}
        try:
            assert len(kernel.automations.all()) == count
            if count:
                result |= await passes(kernel, rounds)
            result |= await idle_cpu(kernel, clock, window)
        finally:
            await kernel.begin_shutdown()
            await kernel.close()
        return result


def measure(rounds: int, window: float) -> dict[str, Any]:
    say(f"next due times of {COUNT} automations, {rounds} rounds")
    out: dict[str, Any] = {"next_times": next_times(rounds)}
    say(f"a kernel with no automations, idle for {window:g} s")
    out["none"] = asyncio.run(with_kernel(0, rounds, window))
    say(f"a kernel with {COUNT} automations: passes, then idle for {window:g} s")
    out["thousand"] = asyncio.run(with_kernel(COUNT, rounds, window))
    return out


def table_rows(results: dict[str, Any]) -> list[Row]:
    n, none, full = (
        results["measure"]["next_times"],
        results["measure"]["none"],
        results["measure"]["thousand"],
    )
    return [
        Row(
            f"next due times of {COUNT}, parse included, ms",
            f"{n['ours_cold']:.2f}",
            f"{n['croniter_cold']:.2f}",
            f"{n['ours_cold'] / n['croniter_cold']:.2f}x",
        ),
        Row(
            f"next due times of {COUNT}, parsed, ms",
            f"{n['ours_warm']:.2f}",
            f"{n['croniter_warm']:.2f}",
            f"{n['ours_warm'] / n['croniter_warm']:.2f}x",
        ),
        Row("scheduler pass, nothing due, ms", f"{full['idle_pass_ms']:.3f}"),
        Row(
            f"scheduler pass, all {COUNT} due, file write included, ms",
            f"{full['due_pass_ms']:.2f}",
            f"{full['croniter_same_ms']:.2f}",
            f"{full['due_pass_ms'] / full['croniter_same_ms']:.2f}x",
        ),
        Row(
            "  longest the event loop was held during it, ms",
            f"{full['due_pass_blocked_ms']:.2f}",
        ),
        Row(
            f"idle CPU per minute, {COUNT} defined vs none, ms",
            f"{full['cpu_ms_per_min']:.2f}",
            f"{none['cpu_ms_per_min']:.2f}",
        ),
        Row("idle scheduler wake-ups per minute", f"{full['wakeups_per_min']:.2f}"),
    ]


def render(results: dict[str, Any]) -> str:
    m = results["measure"]
    title = [f"Automations: scheduler overhead with {COUNT} automations vs croniter alone"]
    details = [
        f"baselines: croniter(expr, start).get_next() per automation (cold), get_next(start_time=) "
        f"on built iterators (warm); median of {m['next_times']['rounds']} rounds.",
        f"kernel start with {COUNT} automations: {m['thousand']['start_ms']} ms (none: "
        f"{m['none']['start_ms']} ms); automations.json {m['thousand']['file_bytes']:,} bytes; "
        f"idle windows of {m['thousand']['window_s']} s (the idle figures include the whole "
        "kernel's idle work, the same in both).",
        f"python {results['python']}",
        "",
    ]
    return text(title, table_rows(results), details)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--window", type=float, default=None, help="idle window, seconds")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 15)
    window = args.window or (10.0 if args.quick else 60.0)
    started = time.monotonic()
    # The in-process kernel logs through structlog: keep stdout for the results.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    results: dict[str, Any] = {"python": python(), "quick": args.quick}
    results["measure"] = measure(rounds, window)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
