"""Sub-agents benchmark: 50 concurrent sub-agents under one root run, through a real
`foya serve`, against 50 ordinary turns side by side.

Run from the repository root:

    .venv/bin/python -m bench.subagents            # table on stdout, progress on stderr
    .venv/bin/python -m bench.subagents --json     # machine-readable results on stdout
    .venv/bin/python -m bench.subagents --quick    # 2,000 deltas per agent, one round (~20 s)

Processes: the fake provider (this module in a hidden `--fake` mode: the tests' `FakeProvider`
answering `deltas=N` with N pre-encoded 6-character deltas, a finish and a usage chunk: the
stream of bench.turns), the kernel (`python -m app serve` on a Unix socket, its own data dir
and HOME), and this one.

One run of each side (rounds alternate the order):

- sub-agents: `PUT /settings/agent-limits` lets all 50 run at once; one parent session;
  `POST /sessions/{parent}/agents {"task": "deltas=N", "root_run_id": <one per run>}` 50 times,
  then `GET …/agents` every 0.1 s until every run has ended. Each child runs one turn of N
  deltas; the kernel follows it (its stored events, live), charges its tokens to the tree,
  stores the run's record at each step and tells the parent (`subagent_*`,
  `agent_budget_updated`).
- plain: 50 top-level sessions (made and titled before the run), `POST …/turns {"message":
  "deltas=N"}` to each, then `GET /sessions` every 0.1 s until all are idle.

Figures, per side (median over rounds): the kernel's CPU seconds over the run (/proc/PID/stat)
divided by the deltas the provider streamed (50 N): kernel CPU per delta; the ratio sub-agents /
plain says what the sub-agent machinery costs on top of the turns themselves. Event-loop lag
while they run: the kernel samples its own loop every 0.1 s (how late a timer fires,
`foya_event_loop_lag_seconds`); a run's p99 is read from that histogram's buckets (the upper
bound of the bucket holding it; the target, 20 ms, is a bucket bound) with the count of samples
above 20 ms; the plain runs' lag is the baseline. During the sub-agent runs a `/healthz` round
trip every 50 ms from this process over the socket is reported beside it (it adds the client
and HTTP to the loop's lag). Every run's outputs are checked complete (a run that is not is
reported). Nothing asserts on a figure.

Traffic goes only to 127.0.0.1 and the Unix socket; every process is stopped by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import threading
import time
import uuid
from typing import Any

import httpx

from bench.fakes import FakeProvider, Recorded, Script, garbage, reply
from bench.harness import CPU, HOST, Child, KernelProcess, Processes, Quiet, say, workspace
from bench.report import Row, at_most, finish, percentile, python, text
from bench.turns import DELTA_CHARS, frames

MODEL = "m"
AGENTS = 50
LAG_TARGET_MS = 20.0
POLL = 0.1
PROBE_EVERY = 0.05
RUN_TIMEOUT = 300.0
_DELTAS = re.compile(r"deltas=(\d+)")
_BUCKET = re.compile(r'^foya_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.MULTILINE)


# ---------------------------------------------------------------------------------------------
# Fake provider (hidden `--fake`)


def _respond(record: Recorded) -> Script:
    users = [m for m in record.messages if m.get("role") == "user"]
    found = _DELTAS.search(str(users[0].get("content") or "")) if users else None
    n = int(found.group(1)) if found else 10
    if not record.streaming:
        return reply("title")
    return [garbage(frame) for frame in frames(record.model or MODEL, n)]


def _fake_main(deltas: int) -> None:
    frames(MODEL, deltas)
    fake = FakeProvider()
    fake.models = [MODEL]
    fake.respond = _respond
    fake.keep_alive_timeout = 300
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    fake.start()
    try:
        print(json.dumps({"port": fake.port}), flush=True)
        while not stop.wait(0.1):
            pass
    finally:
        fake.stop()


# ---------------------------------------------------------------------------------------------
# Measurements


class Probe:
    """`GET /healthz` round trips every PROBE_EVERY s, in a thread, while a run lasts."""

    def __init__(self, socket: str) -> None:
        self.client = httpx.Client(
            transport=httpx.HTTPTransport(uds=socket), base_url="http://foya", timeout=30
        )
        self.times_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()

    def _run(self) -> None:
        while not self._stop.wait(PROBE_EVERY):
            started = time.perf_counter()
            self.client.get("/healthz")
            self.times_ms.append((time.perf_counter() - started) * 1e3)


def lag_buckets(kernel: KernelProcess) -> dict[float, float]:
    """Cumulative counts of the kernel's loop-lag histogram, by upper bound (s)."""
    text_ = kernel.http.get("/metrics").text
    return {float(le): float(n) for le, n in _BUCKET.findall(text_)}


def lag_summary(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """The run's samples: count, the bucket holding the p99, the share above the target."""
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts[float("inf")]
    p99 = next((le for le, n in counts.items() if n >= 0.99 * total), float("inf"))
    over = total - counts.get(LAG_TARGET_MS / 1e3, 0.0)
    return {
        "samples": int(total),
        "p99_at_most_ms": p99 * 1e3,
        "over_target": int(over),
        "over_target_share": over / total if total else 0.0,
    }


def wait_for(check: Any, what: str, started: float | None = None) -> float:
    """Poll `check()` every POLL s until true; seconds since `started` (default: now)."""
    started = time.perf_counter() if started is None else started
    while not check():
        if time.perf_counter() - started > RUN_TIMEOUT:
            raise RuntimeError(f"{what}: not done after {RUN_TIMEOUT} s")
        time.sleep(POLL)
    return time.perf_counter() - started


def subagents_run(
    kernel: KernelProcess, connection: str, deltas: int, pids: dict[str, int]
) -> dict[str, Any]:
    parent = kernel.new_session(connection, MODEL)
    kernel.http.patch(f"/sessions/{parent}", json={"title": "bench parent"})
    runs = f"/sessions/{parent}/agents"
    body = {"task": f"deltas={deltas}", "root_run_id": uuid.uuid4().hex[:24]}
    lag0 = lag_buckets(kernel)
    with CPU(pids) as cpu, Probe(kernel.socket) as probe:
        began = time.perf_counter()
        for _ in range(AGENTS):
            answer = kernel.http.post(runs, json=body)
            if answer.status_code != 202:
                raise RuntimeError(f"POST {runs}: {answer.status_code} {answer.text[:200]}")

        def ended() -> bool:
            listed = kernel.http.get(runs).json()
            return all(r["status"] not in ("queued", "running") for r in listed)

        seconds = wait_for(ended, "sub-agents", began)
    lag = lag_summary(lag0, lag_buckets(kernel))
    listed = kernel.http.get(runs).json()
    complete = sum(
        1
        for r in listed
        if r["status"] == "completed" and len(r.get("output", "")) == deltas * DELTA_CHARS
    )
    return side_result(cpu, deltas, seconds, complete) | {
        "lag": lag,
        "healthz_ms": {
            "p50": round(statistics.median(probe.times_ms), 2) if probe.times_ms else None,
            "p99": round(percentile(probe.times_ms, 0.99), 2) if probe.times_ms else None,
            "max": round(max(probe.times_ms), 2) if probe.times_ms else None,
            "n": len(probe.times_ms),
        },
        "statuses": sorted({r["status"] for r in listed}),
    }


def plain_run(
    kernel: KernelProcess, connection: str, deltas: int, pids: dict[str, int]
) -> dict[str, Any]:
    sessions = []
    for _ in range(AGENTS):
        session = kernel.new_session(connection, MODEL)
        kernel.http.patch(f"/sessions/{session}", json={"title": "bench turn"})
        sessions.append(session)
    wanted = set(sessions)
    lag0 = lag_buckets(kernel)
    with CPU(pids) as cpu:
        began = time.perf_counter()
        for session in sessions:
            kernel.post(f"/sessions/{session}/turns", {"message": f"deltas={deltas}"})

        def idle() -> bool:
            listed = kernel.http.get("/sessions").json()
            return all(s["phase"] == "idle" for s in listed if s["id"] in wanted)

        seconds = wait_for(idle, "plain turns", began)
    lag = lag_summary(lag0, lag_buckets(kernel))
    complete = 0
    for session in sessions:
        history = kernel.http.get(f"/sessions/{session}/history").json()
        last = history[-1] if history else {}
        complete += last.get("role") == "assistant" and len(last.get("content", "")) == (
            deltas * DELTA_CHARS
        )
        kernel.http.delete(f"/sessions/{session}")
    return side_result(cpu, deltas, seconds, complete) | {"lag": lag}


def side_result(cpu: CPU, deltas: int, seconds: float, complete: int) -> dict[str, Any]:
    total = AGENTS * deltas
    return {
        "seconds": round(seconds, 3),
        "deltas": total,
        "kernel_cpu_s": round(cpu.used["kernel"], 3),
        "kernel_cpu_us_per_delta": round(cpu.used["kernel"] / total * 1e6, 2),
        "fake_cpu_s": round(cpu.used["fake"], 3),
        "others_cores": round(cpu.used["others"] / max(cpu.seconds, 1e-9), 2),
        "complete": complete,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    procs = Processes()
    quiet = Quiet(args.quiet_budget)
    out: dict[str, Any] = {"subagents": [], "plain": []}
    with workspace() as work:
        try:
            fake = Child("fake", [sys.executable, "-m", "bench.subagents", "--fake",
                                  "--deltas", str(args.deltas)], procs, work)  # fmt: skip
            kernel = KernelProcess(procs, work, "subagents")
            try:
                port = int(fake.reply(60)["port"])
                kernel.wait_ready()
                connection = kernel.connect(f"http://{HOST}:{port}/v1", "bench", [MODEL])
                limits = {"max_global_concurrency": AGENTS, "max_per_root": AGENTS,
                          "max_tree_tokens": 0}  # fmt: skip
                kernel.http.put("/settings/agent-limits", json=limits).raise_for_status()
                pids = {"kernel": kernel.proc.pid, "fake": fake.proc.pid}
                say("warm-up: 5 sub-agents, 5 turns ...")
                warm(kernel, connection)
                for r in range(args.rounds):
                    order = ("subagents", "plain") if r % 2 == 0 else ("plain", "subagents")
                    for side in order:
                        quiet.wait()
                        say(f"round {r + 1}/{args.rounds}: {side}, {AGENTS} x {args.deltas} ...")
                        run = subagents_run if side == "subagents" else plain_run
                        out[side].append(run(kernel, connection, args.deltas, pids))
                out["kernel_log_problems"] = kernel.log_problems()
            finally:
                kernel.close()
                Processes.stop(fake.proc)
        finally:
            procs.stop_all()
    out["quiet_wait_s"] = round(quiet.waited, 2)
    return out


def warm(kernel: KernelProcess, connection: str) -> None:
    """A few of each, so the measured runs find modules imported and connections pooled."""
    parent = kernel.new_session(connection, MODEL)
    for _ in range(5):
        kernel.http.post(f"/sessions/{parent}/agents", json={"task": "deltas=10"})
        session = kernel.new_session(connection, MODEL)
        kernel.http.patch(f"/sessions/{session}", json={"title": "warm"})
        kernel.post(f"/sessions/{session}/turns", {"message": "deltas=10"})
    runs = f"/sessions/{parent}/agents"
    wait_for(
        lambda: all(r["status"] == "completed" for r in kernel.http.get(runs).json()), "warm-up"
    )


# ---------------------------------------------------------------------------------------------
# Report


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def table_rows(results: dict[str, Any]) -> list[Row]:
    m = results["measure"]
    sub, plain = m["subagents"], m["plain"]
    s_cpu = median_of(sub, "kernel_cpu_us_per_delta")
    p_cpu = median_of(plain, "kernel_cpu_us_per_delta")
    lag_p99 = max(r["lag"]["p99_at_most_ms"] for r in sub)
    plain_p99 = max(r["lag"]["p99_at_most_ms"] for r in plain)
    health = [r["healthz_ms"]["p99"] for r in sub if r["healthz_ms"]["p99"] is not None]
    return [
        Row(
            f"kernel CPU per delta, {AGENTS} sub-agents vs {AGENTS} turns, us",
            f"{s_cpu:.1f}",
            f"{p_cpu:.1f}",
            f"{s_cpu / max(p_cpu, 1e-9):.2f}x",
        ),
        Row(
            f"wall time, {AGENTS} x {sub[0]['deltas'] // AGENTS:,} deltas, s",
            f"{median_of(sub, 'seconds'):.2f}",
            f"{median_of(plain, 'seconds'):.2f}",
            f"{median_of(sub, 'seconds') / max(median_of(plain, 'seconds'), 1e-9):.2f}x",
        ),
        Row(
            "event-loop lag p99 while they run (kernel's own samples), ms",
            f"<= {lag_p99:g}",
            f"<= {plain_p99:g}",
            target=f"<= {LAG_TARGET_MS:g} ms",
            meets=at_most(lag_p99, LAG_TARGET_MS),
        ),
        Row("  /healthz round trip p99 meanwhile, ms", f"{max(health):.2f}" if health else "-"),
    ]


def render(results: dict[str, Any]) -> str:
    m = results["measure"]
    sub = m["subagents"]
    lag = [r["lag"] for r in sub]
    plain_lag = [r["lag"] for r in m["plain"]]
    details = [
        f"rounds: {len(sub)}; lag samples per sub-agents run {[x['samples'] for x in lag]} "
        f"(plain {[x['samples'] for x in plain_lag]}), above {LAG_TARGET_MS:g} ms "
        f"{[x['over_target'] for x in lag]} (plain {[x['over_target'] for x in plain_lag]}); "
        "/healthz p50 "
        f"{[r['healthz_ms']['p50'] for r in sub]} ms, max {[r['healthz_ms']['max'] for r in sub]}.",
        f"complete outputs: sub-agents {[r['complete'] for r in sub]}, plain "
        f"{[r['complete'] for r in m['plain']]} of {AGENTS}; run statuses "
        f"{[r['statuses'] for r in sub]}.",
        f"kernel CPU s: sub-agents {[r['kernel_cpu_s'] for r in sub]}, plain "
        f"{[r['kernel_cpu_s'] for r in m['plain']]}; fake CPU s "
        f"{[r['fake_cpu_s'] for r in sub]}; other load (cores) "
        f"{[r['others_cores'] for r in sub + m['plain']]}.",
        f"kernel log problems: {len(m['kernel_log_problems'])}; python {results['python']}",
        "",
    ]
    title = [f"Sub-agents: {AGENTS} concurrent children of one root run vs {AGENTS} plain turns"]
    return text(title, table_rows(results), details)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--deltas", type=int, default=None, help="deltas per agent's turn")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--quiet-budget", type=float, default=None)
    parser.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fake:
        _fake_main(args.deltas or 10)
        return 0
    args.deltas = args.deltas or (2000 if args.quick else 5000)
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.quiet_budget is None:
        args.quiet_budget = 2.0 if args.quick else 10.0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    results: dict[str, Any] = {"python": python(), "quick": args.quick, "cpus": os.cpu_count()}
    results["measure"] = measure(args)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
