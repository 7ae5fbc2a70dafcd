"""Profiles of a kernel under a benchmark: py-spy from outside, cProfile from inside.

`PySpy` records a running process's every thread (raw stacks) until it is stopped with SIGINT,
the signal on which py-spy writes its output; `pyspy_summary` ranks the samples. `Profiled`
wraps one in-process call in cProfile; `cprofile_summary` ranks a stats file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

from bench.harness import Processes, child_env, spawn
from bench.report import short_path

SPY_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def find_pyspy(given: str | None) -> str | None:
    """py-spy from the option, PATH or /tmp/pyspy; None when none is executable."""
    found = given or shutil.which("py-spy") or "/tmp/pyspy/bin/py-spy"
    return found if os.access(found, os.X_OK) else None


@contextlib.contextmanager
def pyspy(
    binary: str, pid: int, raw: str, procs: Processes, rate: int, cpu: int | None = None
) -> Iterator[dict[str, Any]]:
    """Record `pid` into `raw` while the block runs; the yielded dict gets `error` when py-spy
    wrote nothing. The caller sleeps ~1 s first so that py-spy has attached."""
    argv = [binary, "record", "--pid", str(pid), "--rate", str(rate)]
    argv += ["--threads", "--nonblocking", "--format", "raw", "-o", raw]
    spy = spawn(
        procs, argv, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cpu=cpu
    )
    out: dict[str, Any] = {}
    try:
        yield out
    finally:
        if spy.poll() is None:
            spy.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(20)
        Processes.stop(spy)
        if not os.path.exists(raw):
            err = spy.stderr.read().decode(errors="replace") if spy.stderr else ""
            out["error"] = f"py-spy wrote nothing: {err[-500:]}"


def pyspy_summary(raw_path: str) -> dict[str, Any]:
    """py-spy raw stacks (root first): share of samples by thread, by own frame, by innermost
    `app/` frame, and by function anywhere on the stack below the event loop (inclusive)."""
    threads: dict[str, int] = {}
    own: dict[str, int] = {}
    innermost: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    with open(raw_path) as fh:
        for line in fh:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = stack.split(";")
            thread = "store thread" if "foya-store" in frames[0] else "other threads"
            if "MainThread" in frames[0]:
                thread = "event loop thread"
            threads[thread] = threads.get(thread, 0) + n
            where = []
            for frame in frames[1:]:
                m = SPY_FRAME.match(frame)
                where.append(
                    (m["func"], short_path(m["file"]), m["line"]) if m else (frame, "", "")
                )
            if not where:
                continue
            func, file, line_no = where[-1]
            key = f"{func} ({file}:{line_no})"
            own[key] = own.get(key, 0) + n
            app_frames = [w for w in where if w[1].startswith("app/")]
            func, file, _ = app_frames[-1] if app_frames else (where[-1][0], where[-1][1], "")
            key = f"{func} ({file})" if app_frames else f"[no app/ frame] {func} ({file})"
            innermost[key] = innermost.get(key, 0) + n
            # Inclusive: only what runs below the loop's callback dispatch (or the store
            # thread's `run`), so the shared frames (runpy, typer, asyncio.run) don't crowd it.
            cut = [i for i, w in enumerate(where) if w[0] in ("Handle._run", "Thread.run")]
            if cut:
                below = {f"{f} ({fl})" for f, fl, _ in where[cut[-1] + 1 :]}
            else:
                below = {f"[loop, outside callbacks] {where[-1][0]} ({where[-1][1]})"}
            for key in below:
                inclusive[key] = inclusive.get(key, 0) + n

    def top(counts: dict[str, int], k: int) -> list[dict[str, Any]]:
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
        return [{"share": round(v / max(1, total), 4), "where": w} for w, v in ranked]

    return {
        "samples": total,
        "threads": top(threads, 4),
        "top_self": top(own, 25),
        "top_innermost_app": top(innermost, 25),
        "top_inclusive": top(inclusive, 40),
        "file": raw_path,
    }


def cprofile_summary(stats_path: str) -> dict[str, Any]:
    """A cProfile stats file: the top functions by own time and the `app/` ones by cumulative."""
    import pstats

    stats: Any = pstats.Stats(stats_path)
    rows = []
    for (file, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        rows.append((tottime, cumtime, ncalls, f"{short_path(file)}:{line}({func})"))
    total = stats.total_tt or 1.0

    def fmt(r: tuple[float, float, int, str]) -> dict[str, Any]:
        return {"self_s": round(r[0], 3), "cum_s": round(r[1], 3), "calls": r[2], "where": r[3]}

    by_self = sorted(rows, reverse=True)[:25]
    by_cum = sorted((r for r in rows if "app/" in r[3]), key=lambda r: -r[1])[:20]
    return {
        "total_s": round(total, 3),
        "top_self": [{"share": round(r[0] / total, 4), **fmt(r)} for r in by_self],
        "top_cumulative_app": [fmt(r) for r in by_cum],
        "file": stats_path,
    }


class Profiled:
    """cProfile around one block in this process (main thread only), dumped to `path`."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.prof: Any = None

    def __enter__(self) -> Profiled:
        if self.path:
            import cProfile

            self.prof = cProfile.Profile()
            self.prof.enable()
        return self

    def __exit__(self, *_: object) -> None:
        if self.prof is not None and self.path:
            self.prof.disable()
            self.prof.dump_stats(self.path)
