"""Soak benchmark: a week of one person's use of a home server, compressed, through ONE real
`foya serve` (its own HOME and data dir in a temp dir), sampled throughout for growth.

Run from the repository root:

    .venv/bin/python -m bench.soak            # 10,000 turns: a table on stdout, progress on stderr
    .venv/bin/python -m bench.soak --json     # the same results as JSON on stdout
    .venv/bin/python -m bench.soak --quick    # 300 turns and the same mix scaled down (~60 s)
    .venv/bin/python -m bench.soak --turns 2000   # any size between (the mix scales with it)

The full mix (bench/soak_load.py has each kind): 10,000 turns with one tool call each (write,
read, bash, the MCP server's echo), across 1,000 sessions (every 10 turns the next session is
made, every other one as a fork of the current one; all but the last 8 are deleted); 500
terminals opened, typed into and closed; 10,000 SSE subscriptions dropped after one replayed
frame; the stdio MCP server killed by PID or removed and re-added 100 times; 1,000 automation
runs through the run route (each run's session deleted once done); 7 backups with `foya
backup`. `--quick`: 300 turns, 30 sessions, 20 terminals, 200 drops, 5 MCP kills, 30 automation
runs, 5 backups. Every load is spread evenly over the turns.

Sampled every 2.5% of the turns (bench/soak_sample.py): VmRSS, open fds, threads, foya.db and
foya.db-wal sizes, JSON-log bytes, and the kernel's own loop-lag histogram. Targets, against the
sample at the end of the warm-up (the first 10% of turns): RSS at the end <= +10%; fds <= +8;
threads <= +4; loop-lag p99 after warm-up <= 20 ms (a bucket bound of the histogram); the WAL
never above 8 MB (SQLite checkpoints at 1,000 pages, ~4 MB, by default; twice that allows for a
checkpoint held back by a reader). Nothing asserts on a figure; every process is stopped by PID.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from bench import soak_sample
from bench.harness import KernelProcess, Processes, say, workspace
from bench.report import Row, at_most, finish, percentile, python, text
from bench.soak_load import MODEL, Loads, mcp_config, start_fake
from bench.soak_sample import Sample

KEEP_SESSIONS = 8
WAL_BOUND_MB = 8.0
RSS_GROWTH = 0.10
FDS_SLACK = 8
THREADS_SLACK = 4
LAG_TARGET_MS = 20.0


@dataclass(frozen=True)
class Plan:
    turns: int
    sessions: int
    terminals: int
    sse_drops: int
    mcp_kills: int
    automation_runs: int
    backups: int

    @staticmethod
    def scaled(turns: int, quick: bool) -> Plan:
        if quick:
            return Plan(turns, 30, 20, 200, 5, 30, 5)
        f = turns / 10_000
        return Plan(turns, max(2, round(1000 * f)), max(1, round(500 * f)),
                    max(1, round(10_000 * f)), max(2, round(100 * f)),
                    max(1, round(1000 * f)), 7)  # fmt: skip


def due(total: int, turn: int, turns: int, done: int) -> int:
    """How many of `total`, spread evenly over `turns`, are due after turn `turn` (1-based)."""
    return total * turn // turns - done


class Run:
    """The loop: turns, with each other load interleaved as it falls due."""

    def __init__(self, plan: Plan, loads: Loads, kernel: KernelProcess) -> None:
        self.plan, self.loads, self.kernel = plan, loads, kernel
        self.samples: list[Sample] = []
        self.probe_ms: list[float] = []
        self.live: list[str] = []
        self.counts = {"sessions": 0, "terminals": 0, "sse_drops": 0, "mcp_kills": 0,
                       "automation_runs": 0, "backups": 0}  # fmt: skip
        self.began = time.monotonic()

    def sample(self, turns: int) -> None:
        s = soak_sample.take(self.kernel, turns, time.monotonic() - self.began)
        self.samples.append(s)
        say(soak_sample.row(s))

    def session_step(self, n: int) -> None:
        """A new session (every other one a fork of the current one); old ones deleted."""
        if self.live and self.counts["sessions"] % 2:
            self.live.append(self.loads.fork(self.live[-1]))
        else:
            self.live.append(self.loads.new_session())
        self.counts["sessions"] += 1
        while len(self.live) > KEEP_SESSIONS:
            self.loads.delete(self.live.pop(0))

    def step(self, t: int) -> None:
        """Everything due after turn `t` (1-based)."""
        p, c, ld = self.plan, self.counts, self.loads
        session = self.live[-1]
        for _ in range(due(p.sse_drops, t, p.turns, c["sse_drops"])):
            ld.sse_drop(self.live[t % len(self.live)])
            c["sse_drops"] += 1
        for _ in range(due(p.terminals, t, p.turns, c["terminals"])):
            ld.terminal(session)
            c["terminals"] += 1
        for _ in range(due(p.mcp_kills, t, p.turns, c["mcp_kills"])):
            c["mcp_kills"] += 1
            ld.mcp_kill(c["mcp_kills"])
        for _ in range(due(p.automation_runs, t, p.turns, c["automation_runs"])):
            ld.automation_run()
            c["automation_runs"] += 1
        for _ in range(due(p.backups, t, p.turns, c["backups"])):
            c["backups"] += 1
            ld.backup(c["backups"])
        for _ in range(due(p.sessions - 1, t, p.turns, c["sessions"] - 1)):
            self.session_step(t)

    def go(self) -> None:
        every = max(1, self.plan.turns // 40)
        self.session_step(0)
        self.sample(0)
        for t in range(1, self.plan.turns + 1):
            self.loads.turn(self.live[-1], t)
            started = time.perf_counter()
            self.kernel.http.get("/healthz")
            self.probe_ms.append((time.perf_counter() - started) * 1e3)
            self.step(t)
            if t % every == 0 or t == self.plan.turns:
                self.sample(t)


def summarise(run: Run) -> dict[str, Any]:
    samples, plan = run.samples, run.plan
    warm = next(s for s in samples if s.turns >= plan.turns // 10)
    end = samples[-1]
    lag_ms, lag_n, lag_over = soak_sample.lag_p99_ms(warm.lag, end.lag)
    after = [s for s in samples if s.turns > warm.turns]
    turns_after = max(1, end.turns - warm.turns)
    return {
        "warm": {k: v for k, v in asdict(warm).items() if k != "lag"},
        "end": {k: v for k, v in asdict(end).items() if k != "lag"},
        "first": {k: v for k, v in asdict(samples[0]).items() if k != "lag"},
        "rss_growth": end.rss_mb / warm.rss_mb - 1,
        "rss_per_1000_turns_mb": (end.rss_mb - warm.rss_mb) * 1000 / turns_after,
        "wal_max_mb": max(s.wal_mb for s in samples),
        "db_per_1000_turns_mb": (end.db_mb - warm.db_mb) * 1000 / turns_after,
        "log_bytes_per_turn": (end.log_bytes - warm.log_bytes) / turns_after,
        "lag_p99_ms": lag_ms, "lag_samples": lag_n, "lag_over_20ms": lag_over,
        "probe_ms": {"p50": round(statistics.median(run.probe_ms), 2),
                     "p99": round(percentile(run.probe_ms, 0.99), 2),
                     "max": round(max(run.probe_ms), 2)},
        "rss_max_mb": max(s.rss_mb for s in after) if after else end.rss_mb,
    }  # fmt: skip


def rows(r: dict[str, Any]) -> list[Row]:
    w, e = r["warm"], r["end"]
    return [
        Row("RSS, end vs warm-up, MB", f"{e['rss_mb']:.1f}", f"{w['rss_mb']:.1f}",
            f"{r['rss_growth'] * 100:+.1f}%", "<= +10%", r["rss_growth"] <= RSS_GROWTH),
        Row("open fds, end vs warm-up", str(e["fds"]), str(w["fds"]),
            f"{e['fds'] - w['fds']:+d}", f"<= +{FDS_SLACK}", e["fds"] <= w["fds"] + FDS_SLACK),
        Row("threads, end vs warm-up", str(e["threads"]), str(w["threads"]),
            f"{e['threads'] - w['threads']:+d}", f"<= +{THREADS_SLACK}",
            e["threads"] <= w["threads"] + THREADS_SLACK),
        Row("event-loop lag p99 after warm-up, ms", f"{r['lag_p99_ms']:.0f}", "", "",
            f"<= {LAG_TARGET_MS:.0f} ms", at_most(r["lag_p99_ms"], LAG_TARGET_MS)),
        Row("WAL size, max over the run, MB", f"{r['wal_max_mb']:.2f}", "", "",
            f"<= {WAL_BOUND_MB:.0f} MB", at_most(r["wal_max_mb"], WAL_BOUND_MB)),
        Row("RSS growth per 1,000 turns after warm-up, MB", f"{r['rss_per_1000_turns_mb']:.2f}"),
        Row("foya.db growth per 1,000 turns after warm-up, MB",
            f"{r['db_per_1000_turns_mb']:.2f}", f"{w['db_mb']:.2f}"),
        Row("JSON log per turn after warm-up, bytes", f"{r['log_bytes_per_turn']:.0f}"),
        Row("/healthz between turns p50 / p99, ms",
            f"{r['probe_ms']['p50']:.2f} / {r['probe_ms']['p99']:.2f}"),
    ]  # fmt: skip


def render(r: dict[str, Any]) -> str:
    title = [f"bench.soak: one `foya serve` through {r['plan']['turns']} turns and the mix "
             f"({python()}), {r['seconds']:.0f} s"]  # fmt: skip
    details = [
        f"plan: {json.dumps(r['plan'])}",
        f"done: {json.dumps(r['done'])}; failed: {json.dumps(r['failed'])}",
        f"first sample (after setup): RSS {r['first']['rss_mb']} MB, fds {r['first']['fds']}, "
        f"threads {r['first']['threads']}; warm-up = turn {r['warm']['turns']}",
        f"loop-lag samples after warm-up: {r['lag_samples']}, above 20 ms: {r['lag_over_20ms']}",
        f"MCP reconnects, s: median {r['mcp_reconnect_s']['median']}, max "
        f"{r['mcp_reconnect_s']['max']}; backups: {json.dumps(r['backups'])}",
        f"kernel smaps_rollup at the end, kB: {json.dumps(r['smaps'])}",
        f"kernel log problems: {len(r['log_problems'])} {r['log_problems'][:3]}",
        "samples:", *r["sample_lines"], "",
    ]  # fmt: skip
    return text(title, rows(r), details)


def run(plan: Plan) -> dict[str, Any]:
    procs = Processes()
    fake = start_fake()
    began = time.monotonic()
    try:
        with workspace() as workdir:
            kernel = KernelProcess(procs, workdir, "soak", timeout=60.0)
            try:
                kernel.wait_ready()
                conn = kernel.connect(fake.base_url, "sk-soak", [MODEL])
                loads = Loads(kernel, procs, workdir, conn)
                kernel.http.put("/mcp", json=mcp_config(True)).raise_for_status()
                loads.mcp_wait()
                loads.create_automation()
                soak = Run(plan, loads, kernel)
                soak.go()
                out = summarise(soak)
                out["smaps"] = {k: v for k, v in soak_sample.smaps_rollup(kernel.proc.pid).items()
                                if k in ("Rss", "Anonymous", "Private_Dirty", "Shared_Clean",
                                         "Private_Clean", "Swap")}  # fmt: skip
                out["log_problems"] = kernel.log_problems()
                out["sample_lines"] = [soak_sample.row(s) for s in soak.samples]
                out["samples"] = [{k: v for k, v in asdict(s).items() if k != "lag"}
                                  for s in soak.samples]  # fmt: skip
                out["done"], out["failed"] = loads.done, loads.failed
                out["backups"] = loads.backups
                mcp = loads.mcp_reconnect_s or [0.0]
                out["mcp_reconnect_s"] = {"median": round(statistics.median(mcp), 2),
                                          "max": round(max(mcp), 2)}  # fmt: skip
            finally:
                kernel.close()
    finally:
        fake.stop()
        procs.stop_all()
    out["plan"] = asdict(plan)
    out["seconds"] = time.monotonic() - began
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--turns", type=int, default=0, help="turns (the mix scales with them)")
    args = ap.parse_args(argv)
    turns = args.turns or (300 if args.quick else 10_000)
    plan = Plan.scaled(turns, args.quick and not args.turns)
    results = run(plan)
    finish(results, rows(results), render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
