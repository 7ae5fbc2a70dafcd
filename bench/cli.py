"""CLI start-up benchmark: how long `foya --help`, `foya version` and `foya status` take, from
exec to exit, against `python -c pass` in the same run.

Run from the repository root:

    .venv/bin/python -m bench.cli            # table on stdout, progress on stderr
    .venv/bin/python -m bench.cli --json     # machine-readable results on stdout
    .venv/bin/python -m bench.cli --quick    # 5 rounds (~5 s)

Target: `--help`, `version` and `status` start and finish in <= 150 ms (Caddy's
`version` takes 25 ms; ours took ~400 ms before the CLI imported lazily).

1. A real `python -m app serve` on a Unix socket in a temporary data dir, for `status` to ask
   (`GET /readyz`, answered 200).
2. Rounds: each round runs every command once, in an order that alternates between rounds
   (A B C D, D C B A, ...) so slow drift cancels, after waiting for other load to drop
   (`harness.Quiet`). Each run is `subprocess.run` of the same interpreter, stdout and stderr
   to /dev/null, timed with `perf_counter` around it: exec, imports, the command, exit. A
   command that fails (status not ready, say) aborts the benchmark.
3. Children get the bench's `PYTHONPYCACHEPREFIX` (harness.child_env) and one warm-up run each,
   so no side recompiles its modules inside the timed runs.
4. Details: the slowest imports of `foya status` (`python -X importtime`, cumulative ms of
   each top-level package), to see where the time goes when a figure moves.

The kernel is stopped by PID (SIGTERM, then SIGKILL) in a finally block and also gets
FOYA_PARENT_PID. Traffic goes only to the Unix socket. Nothing asserts on a figure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from bench.harness import ROOT, KernelProcess, Processes, Quiet, child_env, say, workspace
from bench.report import Row, at_most, finish, python, stats, text

TARGET_MS = 150.0
FULL_ROUNDS, QUICK_ROUNDS = 21, 5


def commands(sock: str) -> dict[str, list[str]]:
    """The timed commands by name; `python -c pass` is the baseline."""
    app = [sys.executable, "-m", "app"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "foya --help": [*app, "--help"],
        "foya version": [*app, "version"],
        "foya status": [*app, "status", "--socket", sock],
    }


def run_once(argv: list[str], env: dict[str, str]) -> int:
    """Exec to exit of one run, in ns."""
    started = time.perf_counter_ns()
    done = subprocess.run(
        argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter_ns() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed


def measure(cmds: dict[str, list[str]], rounds: int, quiet: Quiet) -> dict[str, Any]:
    env = child_env()
    for argv in cmds.values():
        run_once(argv, env)  # warm-up: bytecode cache, page cache
    timings: dict[str, list[float]] = {name: [] for name in cmds}
    names = list(cmds)
    for n in range(rounds):
        quiet.wait()
        for name in names if n % 2 == 0 else reversed(names):
            timings[name].append(run_once(cmds[name], env))
    return {name: stats(values) for name, values in timings.items()}


def slowest_imports(argv: list[str], count: int = 6) -> list[tuple[str, float]]:
    """(top-level package, cumulative ms) of the slowest imports `argv` makes."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], cwd=ROOT, env=child_env(),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )  # fmt: skip
    top: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue  # the header
        _, cumulative, name = line.split("|")
        if not name.startswith("  ") and name.strip() not in top:  # a top-level import
            top[name.strip()] = int(cumulative.strip()) / 1000
    return sorted(top.items(), key=lambda item: -item[1])[:count]


def table_rows(results: dict[str, Any]) -> list[Row]:
    timed = results["timings"]
    base = timed["python -c pass"]["median_ms"]
    rows = [Row("python -c pass, median ms", f"{base:.1f}")]
    for name in ("foya --help", "foya version", "foya status"):
        value = timed[name]["median_ms"]
        rows.append(
            Row(
                f"{name}, median ms",
                f"{value:.1f}",
                f"{base:.1f}",
                f"{value / base:.1f}x",
                f"<= {TARGET_MS:g} ms",
                at_most(value, TARGET_MS),
            )
        )
    return rows


def render(results: dict[str, Any]) -> str:
    config, timed = results["config"], results["timings"]
    title = [
        "CLI start-up: exec to exit of each command vs `python -c pass`, same run",
        f"{config['rounds']} alternating rounds; {config['python']}, {config['cpus']} CPUs",
    ]
    details = [
        *(
            f"{name}: p90 {t['p90_ms']:.1f} ms, min {t['min_ms']:.1f} ms"
            for name, t in timed.items()
        ),
        "slowest imports of `foya status` (cumulative ms): "
        + ", ".join(f"{name} {ms:.1f}" for name, ms in results["imports"]),
        f"waited {results['quiet_waited_s']} s for other load to drop",
        "",
    ]
    return text(title, table_rows(results), details)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON results on stdout")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds")
    parser.add_argument("--rounds", type=int, help=f"rounds (default {FULL_ROUNDS})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else FULL_ROUNDS)
    started = time.monotonic()
    procs = Processes()
    quiet = Quiet(budget=10.0 if args.quick else 60.0)
    try:
        with workspace(args.keep) as work:
            say("starting foya serve on a Unix socket")
            kernel = KernelProcess(procs, work)
            try:
                kernel.wait_ready()
                cmds = commands(kernel.socket)
                say(f"timing {len(cmds)} commands, {rounds} rounds")
                results: dict[str, Any] = {
                    "config": {
                        "rounds": rounds,
                        "target_ms": TARGET_MS,
                        "python": python(),
                        "quick": args.quick,
                        "cpus": os.cpu_count(),
                        "loadavg": os.getloadavg(),
                    },
                    "timings": measure(cmds, rounds, quiet),
                    "imports": slowest_imports(cmds["foya status"]),
                    "quiet_waited_s": round(quiet.waited, 1),
                }
            finally:
                kernel.close()
    finally:
        procs.stop_all()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
