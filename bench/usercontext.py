"""User-context benchmark: what rules, skills and memory add to a model step, and how
fast `GET /context/events` replays its journal.

Run from the repository root:

    .venv/bin/python -m bench.usercontext            # table on stdout, progress on stderr
    .venv/bin/python -m bench.usercontext --json     # machine-readable results on stdout
    .venv/bin/python -m bench.usercontext --quick    # fewer iterations and one replay (~10 s)

Targets: model-input assembly with 50 rules, 20 skills and 100 KB of memory adds at
most 5 ms per step over none; the context stream replays 10,000 events at 20,000 events/s or more.

1. Assembly, in process. HOME points at a fresh directory holding `~/.foya` with 20 global rules
   (`rules/user_rules.md`), 20 skills (`skills/<name>/SKILL.md`, ~2 KB each, two pinned in
   `<data-dir>/skills.json`) and a
   100 KB `memory/user_profile.md`; a project holds 30 rule files (always, glob, manual and
   model_decision) under `.foya/rules/`, a 4 KB `AGENTS.md` and its own memory. A real
   `app.kernel.Kernel` (no HTTP) is started on a fresh data dir with one session in that project
   (200 stored messages touching files under `src/`). `Requests.build` (everything before a
   model request: history, checkpoint, the user's context, build, estimate, tool schemas) is
   timed with the user's context (`requests.prompt` as the kernel builds it) and without it
   (`requests.prompt = None`, the request without the user's context), alternating, after
   warm-up.
   "warm": the files are unchanged between steps (their parses are cached); "cold": every file
   is touched (new mtime) before each step, so everything is parsed again.
2. Replay, over HTTP. A `<data-dir>/context/events.jsonl` of 10,000 `rule_updated` events
   (~600 bytes each) is written before the real `python -m app serve` starts on a Unix socket;
   `GET /context/events` with `Last-Event-ID: 0` is read until seq 10,000. Events/s = 10,000 /
   (request sent -> last frame read), median of the rounds. The baseline is this process reading
   and `json.loads`-ing the same file line by line (a floor, not a competitor).

Nothing is sent beyond the Unix socket; the kernel is stopped by PID. Nothing asserts on a figure.
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
from typing import Any

import structlog

from app import events as k
from app.events import EventDraft, Message, ToolCall
from app.kernel import Kernel
from app.kernel.ids import new_id
from app.kernel.turns.steps import Run
from app.metrics import Metrics
from app.settings import Settings
from app.store import events as log
from app.store import sessions as rows
from bench.harness import SSE, KernelProcess, Processes, say, workspace
from bench.report import Row, at_least, at_most, finish, python, stats, text

MODEL = "m"
ADDED_TARGET_MS = 5.0
REPLAY_TARGET = 20_000.0
REPLAY_EVENTS = 10_000
TRIGGERS = ("always",) * 15 + ("glob",) * 7 + ("manual",) * 4 + ("model_decision",) * 4


# ------------------------------------------------------------------------------------ files


VOCABULARY = ("the", "rule", "says", "keep", "code", "small", "typed", "and", "tested", "before")


def prose(words: int, seed: int) -> str:
    return " ".join(VOCABULARY[(seed + i) % len(VOCABULARY)] for i in range(words))


def write_context(home: Path, project: Path, data_dir: Path) -> dict[str, int]:
    """The user's and the project's context files; their counts and sizes."""
    foya = home / ".foya"
    (foya / "rules").mkdir(parents=True)
    blocks = ["# Foya User Rules\n"]
    for i in range(20):
        meta = {"id": f"g{i:02d}", "name": f"global-{i}", "trigger": "always"}
        blocks.append(f"\n<!-- foya-rule: {json.dumps(meta)} -->\n{prose(60, i)}\n")
    (foya / "rules" / "user_rules.md").write_text("".join(blocks))
    for i in range(20):
        skill = foya / "skills" / f"skill-{i:02d}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: skill-{i:02d}\ndescription: Does task {i}: {prose(12, i)}\n---\n"
            + f"# Skill {i}\n\n{prose(350, i)}\n"
        )
    data_dir.mkdir(mode=0o700)
    pinned = {"disabled": [], "pinned": ["global:skill-00", "global:skill-01"]}
    (data_dir / "skills.json").write_text(json.dumps(pinned))
    (foya / "memory").mkdir()
    facts = ["# Foya User Profile\n"]
    while sum(map(len, facts)) < 100_000:
        facts.append(f"- {prose(14, len(facts))}")
    memory = "\n".join(facts)
    (foya / "memory" / "user_profile.md").write_text(memory)
    rules_dir = project / ".foya" / "rules"
    (rules_dir / "src").mkdir(parents=True)
    for i, trigger in enumerate(TRIGGERS):
        front = [f"name: project-{i}", f"trigger: {trigger}"]
        if trigger == "glob":
            front.append(f'globs: ["src/module_{i}.py", "src/**/*_{i}.py"]')
        if trigger == "model_decision":
            front.append(f"description: When working on part {i}")
        where = rules_dir / "src" if trigger == "glob" else rules_dir
        (where / f"rule-{i:02d}.md").write_text(
            "---\n" + "\n".join(front) + f"\n---\n{prose(60, i)}\n"
        )
    (project / "AGENTS.md").write_text("# Agents\n\n" + prose(700, 3) + "\n")
    return {
        "rules": 20 + len(TRIGGERS),
        "skills": 20,
        "memory_bytes": len(memory.encode()),
        "agents_md_bytes": (project / "AGENTS.md").stat().st_size,
    }


def touch_all(*roots: Path) -> None:
    """A new mtime on every file: the next step parses everything again."""
    stamp = time.time_ns()
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file():
                os.utime(path, ns=(stamp, stamp))


def exchange(i: int) -> list[Message]:
    """A user message, a read of a file under src/, its result and an answer."""
    call: ToolCall = {"id": f"c{i}", "name": "read", "input": {"path": f"src/module_{i % 40}.py"}}
    return [
        {"role": "user", "content": f"Explain part {i} of module {i % 40}."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "name": "read", "content": prose(120, i)},
        {"role": "assistant", "content": prose(80, i), "turn_status": "completed"},
    ]


# --------------------------------------------------------------------------------- assembly


async def measure_assembly(work: Path, iterations: int) -> dict[str, Any]:
    home, project, data_dir = work / "home", work / "project", work / "data"
    project.mkdir()
    files = write_context(home, project, data_dir)
    os.environ["HOME"] = str(home)  # the kernel reads ~/.foya through Path.home()
    kernel = Kernel(Settings(data_dir=data_dir), Metrics())
    await kernel.start()
    try:
        body = {"name": "b", "base_url": "http://127.0.0.1:9/v1", "api_key": "b"}
        # A window no step fills: both cases run the same step, never a compaction.
        settings = {MODEL: {"context_window": 100_000_000}}
        connection = await kernel.connections.create(
            {**body, "models": [MODEL], "model_settings": settings}
        )
        made = await kernel.projects.create(str(project), "bench")
        sid = new_id()
        now = time.time_ns()
        row = {
            "id": sid,
            "phase": "idle",
            "approval_mode": "full_access",
            "connection_id": connection["id"],
            "model": MODEL,
            "project_id": made["id"],
            "title": "bench",
            "title_is_manual": 1,
            "created_at_ns": now,
            "updated_at_ns": now,
        }
        drafts = [m for i in range(50) for m in exchange(i)]

        def fill(conn: Any) -> None:
            rows.insert(conn, row)
            for message in drafts:
                log.append(conn, EventDraft(sid, k.MESSAGE_END, message))

        await kernel.store.db.write(fill)
        steps = kernel.turns.steps.requests
        full_prompt = steps.prompt
        stored = await kernel.sessions.row(sid)
        cwd = kernel.sessions.workspace(stored)
        timings: dict[str, list[float]] = {"none": [], "warm": [], "cold": []}
        sizes: dict[str, int] = {}
        for i in range(iterations + 3):
            for case in ("none", "warm", "cold"):
                steps.prompt = None if case == "none" else full_prompt
                if case == "cold":
                    touch_all(home / ".foya", project / ".foya", project / "AGENTS.md")
                t0 = time.perf_counter_ns()
                request = await steps.build(Run(sid), stored, cwd)
                elapsed = time.perf_counter_ns() - t0
                if i >= 3:
                    timings[case].append(elapsed)
                system = str(request.chat.messages[0]["content"])
                sizes[case] = len(system)
                sizes[f"{case}_tokens"] = request.context_tokens
        steps.prompt = full_prompt
        assert full_prompt is not None
        sections = [s.name for s in full_prompt.sections(steps.where(stored, cwd), "")]
    finally:
        await kernel.begin_shutdown()
        await kernel.close()
    result = {case: stats(values, 3) for case, values in timings.items()}
    for case in ("warm", "cold"):
        added = [a - b for a, b in zip(timings[case], timings["none"], strict=True)]
        result[f"added_{case}"] = stats(added, 3)
    return {
        **result,
        "files": files,
        "system_chars": sizes,
        "sections": sections,
        "iterations": iterations,
    }


# ----------------------------------------------------------------------------------- replay


def write_journal(data_dir: Path, count: int) -> Path:
    path = data_dir / "context" / "events.jsonl"
    path.parent.mkdir(parents=True)
    with path.open("w") as out:
        for seq in range(1, count + 1):
            rule = {
                "id": f"r{seq % 50}",
                "name": f"rule-{seq % 50}",
                "trigger": "always",
                "scope": "global",
                "content": prose(70, seq),
                "created_at": "2026-11-30T00:00:00Z",
                "updated_at": "2026-11-30T00:00:00Z",
            }
            line = {
                "seq": seq,
                "kind": "rule_updated",
                "rule": rule,
                "time": "2026-11-30T00:00:00Z",
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    return path


def replay_once(kernel: KernelProcess, count: int) -> tuple[float, int]:
    """(seconds from request to the frame of seq `count`, frames read)."""
    parser = SSE()
    frames = 0
    started = time.perf_counter()
    headers = {"Last-Event-ID": "0"}
    with kernel.http.stream("GET", "/context/events", headers=headers, timeout=60) as response:
        if response.status_code != 200:
            raise RuntimeError(f"GET /context/events: HTTP {response.status_code}")
        for line in response.iter_lines():
            frame = parser.feed(line)
            if frame is None:
                continue
            frames += 1
            if frame.json()["seq"] >= count:
                return time.perf_counter() - started, frames
    raise RuntimeError(f"the stream ended after {frames} frames")


def plain_parse(path: Path) -> float:
    started = time.perf_counter()
    with path.open() as fh:
        for line in fh:
            json.loads(line)
    return time.perf_counter() - started


def measure_replay(work: Path, rounds: int) -> dict[str, Any]:
    data_dir = work / "replay-data"
    path = write_journal(data_dir, REPLAY_EVENTS)
    procs = Processes()
    try:
        kernel = KernelProcess(procs, str(work), "replay", data_dir=str(data_dir))
        try:
            kernel.wait_ready()
            replay_once(kernel, REPLAY_EVENTS)  # warm-up
            runs = [replay_once(kernel, REPLAY_EVENTS) for _ in range(rounds)]
        finally:
            kernel.close()
    finally:
        procs.stop_all()
    seconds = statistics.median(s for s, _ in runs)
    parse = statistics.median(plain_parse(path) for _ in range(max(3, rounds)))
    return {
        "events": REPLAY_EVENTS,
        "frames": runs[0][1],
        "file_mb": round(path.stat().st_size / 1e6, 2),
        "seconds": round(seconds, 3),
        "events_per_s": round(REPLAY_EVENTS / seconds),
        "plain_parse_per_s": round(REPLAY_EVENTS / parse),
        "rounds": rounds,
    }


# ----------------------------------------------------------------------------------- report


def table_rows(results: dict[str, Any]) -> list[Row]:
    a, r = results["assembly"], results["replay"]
    warm, cold = a["added_warm"]["median_ms"], a["added_cold"]["median_ms"]
    return [
        Row(
            "step with context (warm), median ms",
            f"{a['warm']['median_ms']:.3f}",
            f"{a['none']['median_ms']:.3f}",
            f"{a['warm']['median_ms'] / a['none']['median_ms']:.2f}x",
        ),
        Row("added per step (warm), median ms", f"{warm:.3f}", "", "", "<= 5 ms", at_most(warm, 5)),
        Row("added per step (cold: every file re-parsed), ms", f"{cold:.3f}"),
        Row(
            "context SSE replay, events/s",
            f"{r['events_per_s']:,}",
            f"{r['plain_parse_per_s']:,}",
            f"{r['events_per_s'] / r['plain_parse_per_s']:.2f}x",
            ">= 20,000/s",
            at_least(r["events_per_s"], REPLAY_TARGET),
        ),
    ]


def render(results: dict[str, Any]) -> str:
    a, r = results["assembly"], results["replay"]
    files = a["files"]
    title = [
        "User context: model-input assembly and the context stream's replay",
        f"context: {files['rules']} rules, {files['skills']} skills, "
        f"{files['memory_bytes'] // 1000} KB memory, {files['agents_md_bytes']} B AGENTS.md; "
        f"sections: {', '.join(a['sections'])}",
    ]
    details = [
        f"Steps._request medians (ms): none {a['none']['median_ms']}, warm "
        f"{a['warm']['median_ms']} (p90 {a['warm']['p90_ms']}), cold {a['cold']['median_ms']}"
        f" over {a['iterations']} alternating runs; system prompt {a['system_chars']['none']:,}"
        f" -> {a['system_chars']['warm']:,} chars (~{a['system_chars']['warm_tokens']:,} tokens"
        " of context).",
        f"replay: {r['frames']:,} frames of {r['events']:,} events ({r['file_mb']} MB journal) in"
        f" {r['seconds']} s, median "
        f"of {r['rounds']}; baseline = json.loads of the same lines in this process.",
        f"python {results['python']}",
        "",
    ]
    return text(title, table_rows(results), details)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args(argv)
    iterations = args.iterations or (20 if args.quick else 200)
    rounds = args.rounds or (1 if args.quick else 5)
    # The in-process kernel logs through structlog: keep stdout for the results.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    started = time.monotonic()
    results: dict[str, Any] = {"python": python(), "quick": args.quick}
    with workspace() as work:
        say(f"assembly: {iterations} runs per case ...")
        results["assembly"] = asyncio.run(measure_assembly(Path(work), iterations))
        say(f"replay: {REPLAY_EVENTS:,} events x {rounds} ...")
        results["replay"] = measure_replay(Path(work), rounds)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
