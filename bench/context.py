"""Context benchmark: model-input assembly for a 10k-message session with a checkpoint.

Run from the repository root:

    .venv/bin/python -m bench.context            # table on stdout, progress on stderr
    .venv/bin/python -m bench.context --json     # machine-readable results on stdout
    .venv/bin/python -m bench.context --quick    # 10 runs, 3 + 1 turns (~20 s)

Target (issue): assembling the model input of one step takes at most 20 ms for a session of
10,000 messages with a valid compaction checkpoint near its end; the share of a turn's kernel
time it takes is reported next to it.

1. Data. A fresh data directory is filled through the real `app.store.Store`, in one
   transaction: two sessions with the same 10,000 messages (exchanges of a user message, an
   assistant tool call, its ~1.5 KB result and a ~600-character answer; ~6 MB of JSON), each
   with the accepted boundary a request covering all of them would have left. The "checkpoint"
   session also gets a valid checkpoint 52 messages before its end: a `compaction_completed`
   whose payload is `app.kernel.turns.compaction.checkpoint()` with the digest from
   `app.store.checkpoints.source_digest`. The "raw" session has none. The connection (to the
   fake below) is created with the real `Connections`, with a context window large enough that
   no step compacts: both cases then run the same turn.
2. Assembly, in process. A real `app.kernel.Kernel` is started on that directory (no HTTP) and
   the path the runner takes before every model request is timed: `store.history`,
   `store.checkpoint`, `context.build`, `Requests._estimate` one by one, then `Requests.build` (the
   same calls plus the route, the window, the budget check and the tool schemas) as a whole.
   Median and p90 over `--iterations` runs after two warm-up runs. For comparison, the time to
   read only the messages after the checkpoint (`store.history(after_seq=through_seq)`) is shown.
3. Turns, end to end. The real `python -m app serve` on a Unix socket, on the same directory,
   against the fake OpenAI-compatible provider of `tests/support/fake_provider.py` (a hypercorn
   server on 127.0.0.1 in this process, answering each step at once with "ok" and a usage
   chunk). Per session, two warm-up turns, then `--turns` turns: subscribe to the session's SSE
   stream, wait for `: ok`, POST the turn, read until `turn_complete`. Turn time = POST sent ->
   `turn_complete` read. The kernel's CPU time over the timed turns comes from /proc/PID/stat.
   Share = median `Requests.build` time (step 2) / median turn time: one step per turn here.

Traffic goes only to 127.0.0.1 and the Unix socket. The kernel is stopped by PID (SIGTERM, then
SIGKILL) in a finally block and also gets FOYA_PARENT_PID. Nothing asserts on a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, cast

import structlog

from app import events as k
from app.events import ContextRequestAccepted, EventDraft, Message, ToolCall
from app.kernel import Kernel
from app.kernel.connections import Connections
from app.kernel.ids import new_id
from app.kernel.turns import compaction, context
from app.kernel.turns.steps import Run
from app.metrics import Metrics
from app.settings import Settings
from app.store import Store, checkpoints
from app.store import events as log
from app.store import sessions as rows
from bench.fakes import FakeProvider, answer
from bench.harness import SSE, KernelProcess, Processes, process_cpu, say, workspace
from bench.report import Row, at_most, finish, python, rows_of, stats, table, verdicts

MODEL = "m"
TARGET_MS = 20.0
TAIL = 52  # messages after the checkpoint
WINDOW = 100_000_000  # no step ever compacts: both cases run the same turn
TURN_TIMEOUT = 60.0
CASES = ("checkpoint", "raw")


# ------------------------------------------------------------------------------------ data


def exchange(i: int) -> list[Message]:
    """One exchange of four messages, ~2.4 KB of JSON."""
    call: ToolCall = {
        "id": f"call_{i}",
        "name": "bash",
        "input": {"command": f"grep -rn item_{i} src/"},
    }
    line = f"src/module_{i % 97}.py:{i}: value = compute(item_{i}, factor={i % 13})\n"
    return [
        {
            "role": "user",
            "content": f"Step {i}: look for item_{i} in the sources and explain what sets it. "
            + "Keep the answer short and cite the files you read. " * 2,
            "created_at": "2025-01-01T00:00:00.000000Z",
        },
        {
            "role": "assistant",
            "content": f"Searching for item_{i}.",
            "tool_calls": [call],
            "created_at": "2025-01-01T00:00:01.000000Z",
        },
        {
            "role": "tool",
            "tool_call_id": f"call_{i}",
            "name": "bash",
            "content": line * 20,
            "created_at": "2025-01-01T00:00:02.000000Z",
        },
        {
            "role": "assistant",
            "content": (
                f"item_{i} is set in src/module_{i % 97}.py by `compute`, which scales it by "
                f"factor {i % 13}. " * 6
            ),
            "turn_started_at": "2025-01-01T00:00:00.000000Z",
            "turn_completed_at": "2025-01-01T00:00:03.000000Z",
            "turn_status": "completed",
            "created_at": "2025-01-01T00:00:03.000000Z",
        },
    ]


SUMMARY = "\n".join(
    f"## {section}\n" + f"{section} of the long session: files, commands and decisions. " * 12
    for section in compaction.SECTIONS
)


async def build_data(data_dir: Path, base_url: str, messages: int) -> dict[str, Any]:
    """Create the connection, then both sessions in one store transaction."""
    connections = Connections(data_dir)
    connections.load()
    connection = await connections.create(
        {
            "name": "bench",
            "base_url": base_url,
            "api_key": "bench",
            "models": [MODEL],
            "model_settings": {MODEL: {"context_window": WINDOW}},
        }
    )
    now = time.time_ns()
    ids = {case: new_id() for case in CASES}
    drafts = [m for i in range(messages // 4 + 1) for m in exchange(i)][:messages]

    def fill(conn: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"connection": connection, "sessions": {}}
        for case, sid in ids.items():
            workspace = data_dir / "workspaces" / sid
            workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
            row = {
                "id": sid,
                "phase": "idle",
                "approval_mode": "full_access",
                "connection_id": connection["id"],
                "model": MODEL,
                "title": f"bench {case}",
                "title_is_manual": 1,
                "workspace": str(workspace),
                "created_at_ns": now,
                "updated_at_ns": now,
            }
            rows.insert(conn, row)
            seqs = [log.append(conn, EventDraft(sid, k.MESSAGE_END, m)).seq for m in drafts]
            info: dict[str, Any] = {"id": sid, "messages": len(seqs), "head_seq": seqs[-1]}
            route = compaction.route_key(row, connection)
            if case == "checkpoint":
                through = seqs[-TAIL - 1]
                digest = checkpoints.source_digest(conn, sid, through)
                made = compaction.checkpoint(SUMMARY, through, digest, "standalone", 0, 0)
                log.append(conn, EventDraft(sid, k.COMPACTION_COMPLETED, made))
                info["through_seq"] = through
            # The boundary a request over all of these messages would have left (cast: it
            # leaves out the checkpoint id and cached tokens, read back as none and 0).
            accepted = cast(
                ContextRequestAccepted,
                {
                    "session_id": sid,
                    "route": route,
                    "through_seq": seqs[-1],
                    "usage": {"input_tokens": 40_000, "output_tokens": 100, "total_tokens": 40_100},
                    "payload_bytes": 0,
                },
            )
            log.append(conn, EventDraft(sid, k.CONTEXT_REQUEST_ACCEPTED, accepted))
            info["route"] = route
            out["sessions"][case] = info
        return out

    store = Store(data_dir)
    await asyncio.to_thread(store.open)
    try:
        started = time.perf_counter()
        built = await store.db.write(fill)
        built["fill_s"] = round(time.perf_counter() - started, 2)
    finally:
        await asyncio.to_thread(store.close)
    db = data_dir / "foya.db"
    built["db_mb"] = round(sum(p.stat().st_size for p in db.parent.glob("foya.db*")) / 1e6, 1)
    return built


# -------------------------------------------------------------------------------- assembly


async def measure_assembly(
    data_dir: Path, built: dict[str, Any], iterations: int
) -> dict[str, Any]:
    kernel = Kernel(Settings(data_dir=data_dir), Metrics())
    await kernel.start()
    out: dict[str, Any] = {}
    try:
        turns, store = kernel.turns, kernel.store
        for case in CASES:
            info = built["sessions"][case]
            sid, route = info["id"], info["route"]
            row = await kernel.sessions.row(sid)
            cwd = kernel.sessions.workspace(row)
            parts: dict[str, list[float]] = {
                key: [] for key in ("history", "checkpoint", "build", "estimate", "sum")
            }
            whole: list[float] = []
            tail_read: list[float] = []
            sizes: dict[str, Any] = {}
            for i in range(iterations + 2):
                t0 = time.perf_counter_ns()
                history = await store.history(sid)
                t1 = time.perf_counter_ns()
                checkpoint = await store.checkpoint(sid)
                t2 = time.perf_counter_ns()
                user = await turns.steps.requests._user_context(row, cwd, history)
                messages = context.build(user.system, history, checkpoint, user.expanded)
                t3 = time.perf_counter_ns()
                accepted = await store.boundary(sid, route)
                estimate = turns.steps.requests._estimate(
                    accepted, messages, history, checkpoint, user
                )
                t4 = time.perf_counter_ns()
                r0 = time.perf_counter_ns()
                request = await turns.steps.requests.build(Run(sid), row, cwd)
                through = request.through_seq
                r1 = time.perf_counter_ns()
                if checkpoint is not None:
                    a0 = time.perf_counter_ns()
                    await store.history(sid, after_seq=int(checkpoint["through_seq"]))
                    tail_read.append(time.perf_counter_ns() - a0)
                if i < 2:
                    continue  # warm-up
                for key, value in (
                    ("history", t1 - t0),
                    ("checkpoint", t2 - t1),
                    ("build", t3 - t2),
                    ("estimate", t4 - t3),
                    ("sum", t4 - t0),
                ):
                    parts[key].append(value)
                whole.append(r1 - r0)
                sizes = {
                    "history_messages": len(history),
                    "model_messages": len(messages),
                    "request_messages": len(request.chat.messages),
                    "request_bytes": len(json.dumps(request.chat.messages, ensure_ascii=False)),
                    "estimate_tokens": estimate,
                    "checkpoint": checkpoint is not None,
                    "through_seq": through,
                }
            out[case] = {
                **{key: stats(values) for key, values in parts.items()},
                "request": stats(whole),
                **({"tail_read": stats(tail_read[2:])} if tail_read else {}),
                "sizes": sizes,
            }
    finally:
        await kernel.close()
    return out


# ----------------------------------------------------------------------------------- turns


def one_turn(kernel: KernelProcess, fake: FakeProvider, sid: str, message: str) -> float:
    """POST a turn and read the SSE stream until its `turn_complete`; ns from POST to it."""
    fake.push(MODEL, answer("ok", prompt=40_000, completion=2))
    with kernel.http.stream("GET", f"/sessions/{sid}/events") as response:
        if response.status_code != 200:
            raise RuntimeError(f"events: HTTP {response.status_code}")
        sse = SSE()
        lines = response.iter_lines()
        for line in lines:
            sse.feed(line)
            if sse.subscribed:
                break  # `: ok`: subscribed
        t0 = time.perf_counter_ns()
        posted = kernel.http.post(f"/sessions/{sid}/turns", json={"message": message})
        if posted.status_code != 200:
            raise RuntimeError(f"turn: HTTP {posted.status_code} {posted.text}")
        for line in lines:
            frame = sse.feed(line)
            if frame is not None and frame.event == "turn_complete":
                elapsed = time.perf_counter_ns() - t0
                status = frame.json()["payload"]["status"]
                if status != "completed":
                    raise RuntimeError(f"turn {status}: {kernel.tail()}")
                return elapsed
    raise RuntimeError("the event stream ended before turn_complete")


def measure_turns(
    data_dir: Path,
    built: dict[str, Any],
    fake: FakeProvider,
    counts: dict[str, int],
    workdir: Path,
) -> dict[str, Any]:
    procs = Processes()
    served = KernelProcess(procs, str(workdir), data_dir=str(data_dir), timeout=TURN_TIMEOUT)
    out: dict[str, Any] = {}
    try:
        served.wait_ready()
        for case in CASES:
            sid, turns = built["sessions"][case]["id"], counts[case]
            for i in range(2 if case == "checkpoint" else 1):
                one_turn(served, fake, sid, f"warm-up {i}")
                time.sleep(0.05)
            before = len(fake.chats(MODEL))
            times: list[float] = []
            cpu = 0.0
            for i in range(turns):
                c0 = process_cpu(served.proc.pid)
                times.append(one_turn(served, fake, sid, f"short turn {i}"))
                cpu += process_cpu(served.proc.pid) - c0
                time.sleep(0.05)  # let the runner finish before the next POST
            sent = fake.chats(MODEL)[before:]
            out[case] = {
                "turn": stats(times),
                "kernel_cpu_ms_per_turn": round(cpu * 1000 / turns, 1),
                "request_bytes": statistics.median(
                    len(json.dumps(r.messages, ensure_ascii=False)) for r in sent
                ),
                "requests": len(sent),
            }
    finally:
        served.close()
        procs.stop_all()
    return out


# ---------------------------------------------------------------------------------- report


def table_rows(results: dict[str, Any]) -> list[Row]:
    a = results["assembly"]
    cp, raw = a["checkpoint"]["request"]["median_ms"], a["raw"]["request"]["median_ms"]
    return [
        Row(
            f"model input of one step, {results['config']['messages']:,} messages, checkpoint",
            f"{cp:.2f} ms",
            f"{raw:.2f} ms (no checkpoint)",
            f"{cp / raw:.2f}x",
            f"<= {TARGET_MS:.0f} ms",
            at_most(cp, TARGET_MS),
        ),
        Row("  share of a short turn (checkpoint)", f"{results['share']['checkpoint']:.1%}"),
    ]


def render(results: dict[str, Any]) -> str:
    a, t = results["assembly"], results["turns"]
    lines = [
        f"Model-input assembly, {results['config']['messages']:,} messages "
        f"({results['data']['db_mb']} MB database), median / p90 over "
        f"{results['config']['iterations']} runs, ms:",
        "",
        f"| {'step':<38} | {'checkpoint':>17} | {'raw (none)':>17} |",
        f"| {'-' * 38} | {'-' * 17} | {'-' * 17} |",
    ]

    def cell(entry: dict[str, float] | None) -> str:
        if not entry:
            return f"{'-':>17}"
        return f"{entry['median_ms']:>8.2f} / {entry['p90_ms']:>6.2f}"

    for key, label in (
        ("history", "store.history (all active messages)"),
        ("checkpoint", "store.checkpoint (load + validate)"),
        ("build", "context.build"),
        ("estimate", "Turns._estimate (boundary baseline)"),
        ("sum", "sum of the four"),
        ("request", "Turns._request (the runner's call)"),
        ("tail_read", "for comparison: history after the cp"),
    ):
        lines.append(
            f"| {label:<38} | {cell(a['checkpoint'].get(key))} | {cell(a['raw'].get(key))} |"
        )
    cp, raw = a["checkpoint"]["sizes"], a["raw"]["sizes"]
    lines += [
        "",
        f"model input: checkpoint {cp['request_messages']} messages, {cp['request_bytes']:,} B; "
        f"raw {raw['request_messages']} messages, {raw['request_bytes']:,} B",
        "",
        f"Turns end to end ({results['config']['turns']} short turns with the checkpoint, "
        f"{results['config']['raw_turns']} without; POST sent -> turn_complete read):",
        "",
        f"| {'case':<10} | {'turn median':>11} | {'turn p90':>8} | {'kernel CPU/turn':>15} "
        f"| {'assembly':>8} | {'share':>6} |",
        f"| {'-' * 10} | {'-' * 11} | {'-' * 8} | {'-' * 15} | {'-' * 8} | {'-' * 6} |",
    ]
    for case in CASES:
        turn = t[case]["turn"]
        share = results["share"][case]
        lines.append(
            f"| {case:<10} | {turn['median_ms']:>8.1f} ms | {turn['p90_ms']:>5.1f} ms "
            f"| {t[case]['kernel_cpu_ms_per_turn']:>12.1f} ms "
            f"| {a[case]['request']['median_ms']:>5.1f} ms | {share * 100:>5.1f}% |"
        )
    lines += [
        "",
        "share = median Turns._request / median turn time (one model step per turn).",
        "",
        *table(rows_of(results)),
        *verdicts(rows_of(results)),
    ]
    return "\n".join(lines)


QUICK = {"iterations": 10, "turns": 3, "raw_turns": 1}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON results on stdout")
    parser.add_argument("--quick", action="store_true", help=f"a short run: {QUICK}")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--turns", type=int, default=10, help="timed turns, checkpoint case")
    parser.add_argument(
        "--raw-turns", type=int, default=3, help="timed turns without a checkpoint (slow)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # The in-process kernel logs through structlog: keep stdout for the results.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    started = time.monotonic()
    results: dict[str, Any] = {
        "config": {
            "messages": args.messages,
            "iterations": args.iterations,
            "turns": args.turns,
            "raw_turns": args.raw_turns,
            "tail_after_checkpoint": TAIL,
            "python": python(),
            "quick": args.quick,
            "cpus": os.cpu_count(),
        }
    }
    with workspace(args.keep) as work, FakeProvider.running() as fake:
        workdir = Path(work)
        data_dir = workdir / "data"
        data_dir.mkdir(mode=0o700)
        say(f"building {args.messages:,} messages x {len(CASES)} sessions ...")
        built = asyncio.run(build_data(data_dir, fake.base_url, args.messages))
        results["data"] = {
            "db_mb": built["db_mb"],
            "fill_s": built["fill_s"],
            "sessions": {
                c: {key: v for key, v in s.items() if key != "id"}
                for c, s in built["sessions"].items()
            },
        }
        say(f"timing the assembly in process ({args.iterations} runs per case) ...")
        results["assembly"] = asyncio.run(measure_assembly(data_dir, built, args.iterations))
        counts = {"checkpoint": args.turns, "raw": args.raw_turns}
        say(f"timing turns through foya serve {counts} ...")
        results["turns"] = measure_turns(data_dir, built, fake, counts, workdir)
    results["share"] = {
        case: round(
            results["assembly"][case]["request"]["median_ms"]
            / results["turns"][case]["turn"]["median_ms"],
            4,
        )
        for case in CASES
    }
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
