"""One result format and one table for every benchmark.

A benchmark collects its results in a dict; `Row`s name each headline figure with its baseline,
ratio and target, and `meets` says whether the figure reaches it. `finish` then prints either
the dict as JSON (`--json`; the rows go in as `"table"`) or the script's text: a title, the
table (each figure beside its target and "meets" / "MISSES"), details, and one verdict line a
target. No figure fails a run: a benchmark's exit status says only whether it ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from bench.harness import ROOT


@dataclass(frozen=True)
class Row:
    """One line of the table. `meets` is None when the row has no target."""

    metric: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    meets: bool | None = None

    @property
    def verdict(self) -> str:
        return "" if self.meets is None else ("meets" if self.meets else "MISSES")


def at_least(value: float, target: float) -> bool:
    return value >= target


def at_most(value: float, target: float) -> bool:
    return value <= target


HEAD = ("metric", "value", "baseline", "ratio", "target", "verdict")


def table(rows: list[Row], head: tuple[str, ...] = HEAD) -> list[str]:
    """The rows as aligned text: the metric left-aligned, the other columns right-aligned."""
    cells = [(r.metric, r.value, r.baseline, r.ratio, r.target, r.verdict) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]

    def line(values: tuple[str, ...]) -> str:
        parts = [values[0].ljust(widths[0])]
        parts += [v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    return [line(head), line(tuple("-" * w for w in widths)), *(line(c) for c in cells)]


def rows_of(results: dict[str, Any]) -> list[Row]:
    """The rows `finish` stored in the results."""
    return [Row(**{k: v for k, v in r.items() if k != "verdict"}) for r in results["table"]]


def verdicts(rows: list[Row]) -> list[str]:
    """One line per row with a target: "<metric>: <value> vs target <t>: meets / MISSES"."""
    out = []
    for r in rows:
        if r.meets is not None:
            figure = r.ratio if r.ratio and r.target.endswith("x") else r.value
            out.append(f"{r.metric.strip()}: {figure} vs target {r.target}: {r.verdict}")
    return out


def finish(
    results: dict[str, Any], rows: list[Row], render: Callable[[dict[str, Any]], str], as_json: bool
) -> None:
    """Print the results: JSON (rows included as `table`), or the rendered text."""
    results["table"] = [{**asdict(r), "verdict": r.verdict} for r in rows]
    print(json.dumps(results, indent=2) if as_json else render(results), flush=True)


def text(title: list[str], rows: list[Row], details: list[str]) -> str:
    """The usual text report: title lines, the table, details, then the verdict lines."""
    return "\n".join([*title, "", *table(rows), "", *details, *verdicts(rows)])


# ------------------------------------------------------------------------------ statistics


def percentile(values: list[float], q: float) -> float:
    """The value at rank int(q * n) of the sorted values (clamped to the last)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


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


# ----------------------------------------------------------------------------------- machine


def python() -> str:
    return f"{platform.python_implementation()} {platform.python_version()}"


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


def short_path(file: str) -> str:
    """A source path as profiles show it: inside site-packages, the stdlib, or the repository."""
    for marker in ("site-packages/", "lib/python3."):
        if marker in file:
            tail = file.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker.startswith("lib/") else tail
    return os.path.relpath(file, ROOT) if file.startswith("/") else file
