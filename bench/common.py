"""Helpers shared by the benchmark scripts in bench/.

Import this module before anything else: `python bench/X.py` puts bench/ first on sys.path, where
bench/http.py would shadow the standard library's `http` package (asyncio, httpx and hypercorn
all import it). Importing `common` (found there) drops that entry and makes the repository
importable.
"""
# ruff: noqa: E402

from __future__ import annotations

import os
import statistics
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != BENCH]
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import asyncio
import contextlib
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any


def say(message: str) -> None:
    """Progress goes to stderr so `--json` keeps stdout clean."""
    print(message, file=sys.stderr, flush=True)


def now_ns() -> int:
    return time.monotonic_ns()


# ---------------------------------------------------------------------------------------------
# Processes


class Processes:
    """Every child this benchmark starts; `stop_all` ends each one by PID."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def add(self, proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                self.stop(proc)


# Compiled bytecode for every child lives here, outside the work tree, and is kept between runs.
# Without it, a PYTHONDONTWRITEBYTECODE environment makes `app` (not installed as a wheel, so
# never compiled ahead) recompile at every start while the bare side's site-packages do not.
PYCACHE = os.path.join(tempfile.gettempdir(), f"foya-bench-pycache-{os.getuid()}")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOYA_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = PYCACHE
    env.update(extra or {})
    return env


def pinned(cpu: int | None) -> Any:
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def workspace() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="foya-bench-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# CPU


_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (all its threads)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy() -> float:
    """CPU seconds spent busy on the whole machine so far (steal included)."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK


class Quiet:
    """Before each measured run, wait (within a total budget) for other load to drop.

    The machine may be shared; our own processes are idle between runs, so the whole machine's
    busy CPU over a short window is what others use. `wait` blocks; `wait_async` awaits.
    """

    WINDOW = 0.25
    THRESHOLD = 0.3  # cores

    def __init__(self, budget: float) -> None:
        self.left = budget
        self.waited = 0.0
        self.gave_up = 0

    def _settled(self, before: float) -> bool:
        """After one window that began at `before`: stop waiting?"""
        cores = (machine_busy() - before) / self.WINDOW
        if cores < self.THRESHOLD:
            return True
        if self.left <= 0:
            self.gave_up += 1
            return True
        self.left -= self.WINDOW
        self.waited += self.WINDOW
        return False

    def wait(self) -> None:
        while True:
            before = machine_busy()
            time.sleep(self.WINDOW)
            if self._settled(before):
                return

    async def wait_async(self) -> None:
        while True:
            before = machine_busy()
            await asyncio.sleep(self.WINDOW)
            if self._settled(before):
                return


# ---------------------------------------------------------------------------------------------
# Results


def percentile(values: list[float], q: float) -> float:
    """The value at rank int(q * n) of the sorted values (clamped to the last)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fs_type(path: str) -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(
            ["findmnt", "-n", "-o", "FSTYPE", "-T", path],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return found.stdout.strip().split("\n")[0] or None
    return None


def dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------------------------
# Profiles


SPY_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def short_path(file: str) -> str:
    """A source path as profiles show it: inside site-packages, the stdlib, or the repository."""
    for marker in ("site-packages/", "lib/python3."):
        if marker in file:
            tail = file.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker.startswith("lib/") else tail
    return os.path.relpath(file, ROOT) if file.startswith("/") else file


def ms(ns: float) -> float:
    return ns / 1e6


def stats(values_ns: list[float], digits: int = 2) -> dict[str, float]:
    """Median, p90 and minimum (ms) of timings taken in ns."""
    values = [ms(v) for v in values_ns]
    return {
        "median_ms": round(statistics.median(values), digits),
        "p90_ms": round(percentile(values, 0.9), digits),
        "min_ms": round(min(values), digits),
        "n": len(values),
    }
