"""Backup and restore benchmark: `app.ops.backup` on a ~1 GB data dir against GNU tar, and a
writer's latency through a real kernel while `foya backup` runs against the same writer without.

Run from the repository root:

    .venv/bin/python -m bench.backup            # table on stdout, progress on stderr
    .venv/bin/python -m bench.backup --json     # the same results as JSON on stdout
    .venv/bin/python -m bench.backup --quick    # a ~200 MB data dir, one round

The data dir is built in a fresh temp dir (removed at the end; the free space is checked first):
a real `foya.db` of 100,000 `message_end` events (~1 KB of JSON each, 50 sessions, appended
through `app.store` in one transaction per session), then files: 4,000 ~16 KB Python-like text
files in the sessions' managed workspaces, 300 incompressible 1 MB "images" (plus small JSON
sidecars) under `artifacts/`, two 128 MiB binaries (larger than `app.ops.backup.WHOLE_FILE`, so the
backup streams them), and 8 MB random files up to 1,000 MB. `--quick`: 20,000 events, 800 text
files, 60 images, one 72 MiB binary, 200 MB.

What is timed, each side in the same run (throughput: alternating A B / B A per round; latency:
a backup window, then a window of the same length without, twice):

- backup: `app.ops.backup.backup(data, archive)` in process (SQLite backup API for the database,
  SHA-256 of every member, fsync of the archive) against `tar cf archive -C data .` (GNU tar)
  plus an fsync of the archive.
- restore: `app.ops.restore.restore(archive, fresh)` in process (every hash checked,
  `PRAGMA quick_check`, one sync, rename into place) against `tar xf archive -C fresh` plus
  `sync -f fresh`.
- writer latency: `PATCH /sessions/{id}` (each a stored `session_updated`, committed with fsync)
  in a loop over a Unix socket to a real `foya serve` on the data dir, while
  `python -m app backup` runs on it, against the same writer for the same duration without.

MB/s = bytes of the data dir's regular files (the database counted once) / wall seconds;
MB = 10^6 bytes. The page cache is warm for both sides (the files were just written). No figure
is asserted on; the machine's other load is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from app.events import MESSAGE_END, EventDraft
from app.ops.backup import WHOLE_FILE, backup
from app.ops.restore import restore
from app.store import Store, sessions
from app.store import events as log
from bench.harness import KernelProcess, Processes, Quiet, child_env, machine_busy, say, workspace
from bench.report import Row, finish, fs_type, percentile, python, rows_of, table

MB = 1_000_000
MIB = 1 << 20
SESSIONS = 50
POOL = 64 * MIB  # random bytes every binary file is cut from, at a random offset


@dataclass(frozen=True)
class Plan:
    target_bytes: int
    events: int
    text_files: int
    artifacts: int
    large_files: int
    large_bytes: int  # each larger than app.ops.backup.WHOLE_FILE: streamed, not read whole
    rounds: int


FULL = Plan(
    target_bytes=1000 * MB,
    events=100_000,
    text_files=4000,
    artifacts=300,
    large_files=2,
    large_bytes=128 * MIB,
    rounds=2,
)
QUICK = Plan(
    target_bytes=200 * MB,
    events=20_000,
    text_files=800,
    artifacts=60,
    large_files=1,
    large_bytes=72 * MIB,
    rounds=1,
)
assert min(FULL.large_bytes, QUICK.large_bytes) > WHOLE_FILE


# ---------------------------------------------------------------------------------------------
# The data dir


def _session_row(sid: str) -> dict[str, Any]:
    now = time.time_ns()
    return {
        "id": sid,
        "phase": "idle",
        "approval_mode": "manual",
        "model": "m",
        "title": sid,
        "title_is_manual": 1,
        "created_at_ns": now,
        "updated_at_ns": now,
    }


def _text(rng: random.Random, size: int) -> str:
    words = ["self", "value", "result", "items", "config", "return", "for", "in", "if", "None"]
    lines: list[str] = []
    total = 0
    while total < size:
        indent = "    " * rng.randrange(0, 3)
        line = indent + " ".join(rng.choice(words) for _ in range(rng.randrange(3, 10)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def build_db(data: Path, plan: Plan) -> int:
    """`plan.events` message_end events over SESSIONS sessions; returns the head seq."""
    rng = random.Random(7)
    texts = [_text(rng, 900) for _ in range(256)]
    store = Store(data)
    store.open()
    try:
        per = plan.events // SESSIONS
        for n in range(SESSIONS):
            sid = f"{n:024x}"
            (data / "workspaces" / sid).mkdir(parents=True, mode=0o700)

            def fill(conn: sqlite3.Connection, sid: str = sid) -> None:
                sessions.insert(conn, _session_row(sid))
                for i in range(per):
                    role = "user" if i % 2 == 0 else "assistant"
                    content = f"#{i} " + texts[i % len(texts)]
                    log.append(
                        conn, EventDraft(sid, MESSAGE_END, {"role": role, "content": content})
                    )

            store.db.call(fill)
        head = int(store.db.call(log.head_seq, write=False))
    finally:
        store.close()
    return head


class Pool:
    """Incompressible bytes without generating each file's: slices of one random pool."""

    def __init__(self, rng: random.Random) -> None:
        self.data = os.urandom(POOL)
        self.rng = rng

    def write(self, path: Path, size: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            left = size
            while left:
                start = self.rng.randrange(0, POOL - MIB)
                chunk = self.data[start : start + min(left, POOL - start)]
                f.write(chunk)
                left -= len(chunk)


def build(data: Path, plan: Plan) -> dict[str, Any]:
    began = time.perf_counter()
    data.mkdir(mode=0o700)
    head = build_db(data, plan)
    rng = random.Random(11)
    pool = Pool(rng)
    ids = [f"{n:024x}" for n in range(SESSIONS)]
    sources = [_text(rng, 16_000) for _ in range(64)]
    for i in range(plan.text_files):
        path = data / "workspaces" / ids[i % SESSIONS] / "src" / f"mod_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# module {i}\n" + sources[i % len(sources)])
    for i in range(plan.artifacts):
        folder = data / "artifacts" / ids[i % SESSIONS]
        name = f"{rng.getrandbits(128):032x}"
        pool.write(folder / f"{name}.png", MB)
        (folder / f"{name}.json").write_text(json.dumps({"name": f"shot-{i}.png", "bytes": MB}))
    for i in range(plan.large_files):
        pool.write(data / "workspaces" / ids[i] / "data" / f"large-{i}.bin", plan.large_bytes)
    (data / "connections.json").write_text(json.dumps({"connections": []}))
    (data / "connections.json").chmod(0o600)
    n = 0
    while (size := data_bytes(data)[0]) < plan.target_bytes:
        left = plan.target_bytes - size
        pool.write(
            data / "workspaces" / ids[n % SESSIONS] / "assets" / f"blob-{n}.bin", min(8 * MB, left)
        )
        n += 1
    size, files = data_bytes(data)
    return {
        "bytes": size,
        "files": files,
        "events": head,
        "db_bytes": (data / "foya.db").stat().st_size,
        "build_s": round(time.perf_counter() - began, 1),
    }


def data_bytes(data: Path) -> tuple[int, int]:
    """(bytes, count) of the regular files the backup archives (the database counted once)."""
    size = files = 0
    for dirpath, _, filenames in os.walk(data):
        for name in filenames:
            if Path(dirpath) == data and name.startswith("foya.db-"):
                continue
            st = os.lstat(os.path.join(dirpath, name))
            size, files = size + st.st_size, files + 1
    return size, files


# ---------------------------------------------------------------------------------------------
# Throughput


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _children_cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _cpu() -> float:
    """CPU seconds of this process and of its waited-for children."""
    return time.process_time() + _children_cpu()


def timed(fn: Any, *args: Any) -> tuple[float, float]:
    """(wall, CPU) seconds of `fn(*args)`."""
    c0, t0 = _cpu(), time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0, _cpu() - c0


def tar_backup(data: Path, archive: Path) -> None:
    subprocess.run(["tar", "cf", str(archive), "-C", str(data), "."], check=True)
    fsync_file(archive)


def tar_restore(archive: Path, target: Path) -> None:
    target.mkdir()
    subprocess.run(["tar", "xf", str(archive), "-C", str(target)], check=True)
    subprocess.run(["sync", "-f", str(target)], check=True)


def summary(runs: list[tuple[float, float]], size: int) -> dict[str, Any]:
    wall = [w for w, _ in runs]
    med = statistics.median(wall)
    return {
        "median_s": round(med, 2),
        "min_s": round(min(wall), 2),
        "cpu_median_s": round(statistics.median(c for _, c in runs), 2),
        "runs_s": [round(w, 2) for w in wall],
        "mb_s": round(size / MB / med, 1),
    }


def throughput(work: Path, data: Path, size: int, plan: Plan, quiet: Quiet) -> dict[str, Any]:
    """Backups (app, tar) then restores (app, tar), alternating A B / B A per round."""
    times: dict[str, list[tuple[float, float]]] = {
        "app": [],
        "tar": [],
        "app_restore": [],
        "tar_restore": [],
    }
    archive, tarball = work / "app.tar", work / "plain.tar"
    for r in range(plan.rounds):
        for side in ("app", "tar") if r % 2 == 0 else ("tar", "app"):
            (archive if side == "app" else tarball).unlink(missing_ok=True)
            quiet.wait()
            say(f"  round {r + 1}: backup, {side}")
            if side == "app":
                times[side].append(timed(backup, data, archive))
            else:
                times[side].append(timed(tar_backup, data, tarball))
    # The last archive of each side is the one restored.
    for r in range(plan.rounds):
        for side in ("app", "tar") if r % 2 == 0 else ("tar", "app"):
            target = work / f"restored-{side}"
            shutil.rmtree(target, ignore_errors=True)
            quiet.wait()
            say(f"  round {r + 1}: restore, {side}")
            if side == "app":
                times["app_restore"].append(timed(restore, archive, target))
            else:
                times["tar_restore"].append(timed(tar_restore, tarball, target))
    archived = archive.stat().st_size
    restored, _ = data_bytes(work / "restored-app")
    for side in ("app", "tar"):
        shutil.rmtree(work / f"restored-{side}", ignore_errors=True)
    archive.unlink()
    tarball.unlink()
    out = {k: summary(v, size) for k, v in times.items()}
    return {
        "backup": {
            "app": out["app"],
            "tar": out["tar"],
            "ratio": round(out["app"]["mb_s"] / out["tar"]["mb_s"], 2),
            "archive_bytes": archived,
        },
        "restore": {
            "app": out["app_restore"],
            "tar": out["tar_restore"],
            "ratio": round(out["app_restore"]["mb_s"] / out["tar_restore"]["mb_s"], 2),
            "restored_bytes": restored,
        },
    }


# ---------------------------------------------------------------------------------------------
# Writer latency


class Writer(threading.Thread):
    """PATCHes one session's title in a loop; each latency lands in the current window."""

    def __init__(self, sock: Path, session: str) -> None:
        super().__init__(daemon=True)
        self.sock, self.session = sock, session
        self.window: list[float] | None = None  # latencies (ms) of the window being recorded
        self.halt = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        transport = httpx.HTTPTransport(uds=str(self.sock))
        with httpx.Client(transport=transport, base_url="http://foya", timeout=30) as client:
            n = 0
            while not self.halt.is_set():
                began = time.perf_counter_ns()
                response = client.patch(f"/sessions/{self.session}", json={"title": f"t{n}"})
                took = (time.perf_counter_ns() - began) / 1e6
                if response.status_code != 200:
                    self.error = response.text
                    return
                if (window := self.window) is not None:
                    window.append(took)
                n += 1


def latency_stats(values: list[float], seconds: float) -> dict[str, Any]:
    return {
        "p50_ms": round(percentile(values, 0.5), 2),
        "p99_ms": round(percentile(values, 0.99), 2),
        "max_ms": round(max(values), 2),
        "n": len(values),
        "per_s": round(len(values) / seconds, 1),
    }


def latency(work: Path, data: Path, size: int, plan: Plan, quiet: Quiet) -> dict[str, Any]:
    procs = Processes()
    kernel = KernelProcess(procs, str(work), "k", data_dir=str(data))
    try:
        kernel.wait_ready()
        session = kernel.post("/sessions", {})["id"]
        sock = Path(kernel.socket)
        writer = Writer(sock, session)
        writer.start()
        windows: dict[str, list[float]] = {"idle": [], "backup": []}
        seconds = {"idle": 0.0, "backup": 0.0}
        cli: list[tuple[float, float]] = []
        time.sleep(1.0)  # warm-up
        for r in range(max(2, plan.rounds)):
            archive = work / f"live-{r}.tar"
            quiet.wait()
            say(f"  round {r + 1}: writer during `foya backup`")
            writer.window = windows["backup"]
            began, cpu = time.perf_counter(), _children_cpu()
            done = subprocess.run(
                [sys.executable, "-m", "app", "backup", str(archive), "--data-dir", str(data)],
                env=child_env({"HOME": str(work / "home")}),
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.perf_counter() - began
            writer.window = None
            cpu = _children_cpu() - cpu  # the writer thread runs in this process
            if done.returncode != 0:
                raise RuntimeError(f"foya backup failed: {done.stderr}")
            cli.append((took, cpu))
            seconds["backup"] += took
            archive.unlink()
            quiet.wait()
            say(f"  round {r + 1}: writer alone, {took:.1f} s")
            writer.window = windows["idle"]
            time.sleep(took)
            writer.window = None
            seconds["idle"] += took
        writer.halt.set()
        writer.join(30)
        if writer.error:
            raise RuntimeError(f"writer: {writer.error}")
        result = {k: latency_stats(v, seconds[k]) for k, v in windows.items()}
        result["p99_ratio"] = round(result["backup"]["p99_ms"] / result["idle"]["p99_ms"], 2)
        result["p50_ratio"] = round(result["backup"]["p50_ms"] / result["idle"]["p50_ms"], 2)
        result["cli_backup"] = summary(cli, size)
        return result
    finally:
        kernel.close()
        procs.stop_all()


# ---------------------------------------------------------------------------------------------


def table_rows(r: dict[str, Any]) -> list[Row]:
    """The headline ratios. The issue sets no number for them: no target, no verdict."""
    b, s, lat = r["backup"], r["restore"], r["latency"]
    return [
        Row("backup MB/s (app.ops.backup vs tar cf)", f"{b['app']['mb_s']:.0f}",
            f"{b['tar']['mb_s']:.0f}", f"{b['ratio']:.2f}x"),
        Row("restore MB/s (app.ops.restore vs tar xf)", f"{s['app']['mb_s']:.0f}",
            f"{s['tar']['mb_s']:.0f}", f"{s['ratio']:.2f}x"),
        Row("writer p99 ms (during a backup vs alone)", f"{lat['backup']['p99_ms']:.2f}",
            f"{lat['idle']['p99_ms']:.2f}", f"{lat['p99_ratio']:.2f}x"),
    ]  # fmt: skip


def render(r: dict[str, Any]) -> str:
    d, b, s, lat = r["data"], r["backup"], r["restore"], r["latency"]

    def row(label: str, e: dict[str, Any], base: str = "") -> str:
        return (
            f"| {label:<44} | {e['mb_s']:>7.0f} | {e['median_s']:>8.2f} "
            f"| {e['cpu_median_s']:>8.2f} | {base:>10} |"
        )

    def lrow(label: str, e: dict[str, Any]) -> str:
        return (
            f"| {label:<44} | {e['p50_ms']:>7.2f} | {e['p99_ms']:>7.2f} | {e['max_ms']:>8.1f} "
            f"| {e['n']:>6} | {e['per_s']:>7.0f} |"
        )

    return "\n".join(
        [
            *table(rows_of(r)),
            "",
            f"Data dir: {d['bytes'] / MB:,.0f} MB in {d['files']:,} files; foya.db "
            f"{d['db_bytes'] / MB:,.0f} MB with {d['events']:,} events "
            f"(built in {d['build_s']} s). "
            f"{r['config']['rounds']} round(s) per side, alternating.",
            "",
            f"| {'throughput':<44} | {'MB/s':>7} | {'median s':>8} | {'CPU s':>8} "
            f"| {'app / tar':>10} |",
            f"| {'-' * 44} | {'-' * 7} | {'-' * 8} | {'-' * 8} | {'-' * 10} |",
            row("backup: app.ops.backup.backup (in process)", b["app"], f"{b['ratio']:.2f}x"),
            row("backup baseline: tar cf + fsync", b["tar"]),
            row("restore: app.ops.restore.restore (in process)", s["app"], f"{s['ratio']:.2f}x"),
            row("restore baseline: tar xf + sync -f", s["tar"]),
            row("`foya backup` CLI, kernel + writer running", lat["cli_backup"]),
            "",
            f"| {'writer: PATCH /sessions/{id} over UDS':<44} | {'p50 ms':>7} | {'p99 ms':>7} "
            f"| {'max ms':>8} | {'n':>6} | {'per s':>7} |",
            f"| {'-' * 44} | {'-' * 7} | {'-' * 7} | {'-' * 8} | {'-' * 6} | {'-' * 7} |",
            lrow("while `foya backup` runs", lat["backup"]),
            lrow("alone, same duration", lat["idle"]),
            "",
            f"p99 during a backup / alone = {lat['p99_ratio']:.2f}x, p50 {lat['p50_ratio']:.2f}x. "
            f"Archive {b['archive_bytes'] / MB:,.0f} MB.",
            f"machine: {r['config']['cpus']} CPUs, Python {r['config']['python']}, "
            f"{r['config']['fs'] or '?'} temp dir; other processes used "
            f"{r['load']['other_cores']:.2f} cores on average (the whole machine "
            f"{r['load']['busy_cores']:.2f}); waited {r['load']['quiet_waited_s']:.1f} s "
            "for quiet; "
            f"whole run {r['elapsed_s']} s",
        ]
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="JSON results on stdout")
    parser.add_argument("--quick", action="store_true", help="a ~200 MB data dir, one round")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    started = time.monotonic()
    tmp = tempfile.gettempdir()
    need = 5 * plan.target_bytes  # data, two archives, two restored copies
    free = shutil.disk_usage(tmp).free
    if free < need:
        say(f"{tmp} has {free / 1e9:.1f} GB free; this run needs {need / 1e9:.1f} GB (try --quick)")
        return 1
    quiet = Quiet(8.0)
    busy0, wall0, cpu0 = machine_busy(), time.monotonic(), time.process_time()
    with workspace(args.keep) as where:
        work = Path(where)
        say(f"building a {plan.target_bytes / MB:,.0f} MB data dir in {work}")
        data = work / "data"
        built = build(data, plan)
        size = built["bytes"]
        say("throughput")
        results: dict[str, Any] = {
            "config": {
                **asdict(plan),
                "python": python(),
                "quick": args.quick,
                "cpus": os.cpu_count(),
                "fs": fs_type(str(work)),
            },
            "data": built,
            **throughput(work, data, size, plan, quiet),
        }
        say("writer latency")
        results["latency"] = latency(work, data, size, plan, quiet)
        wall = time.monotonic() - wall0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        own = time.process_time() + children.ru_utime + children.ru_stime
        busy = machine_busy() - busy0
        results["load"] = {
            "busy_cores": round(busy / wall, 2),
            "other_cores": round(max(0.0, busy - own - cpu0) / wall, 2),
            "quiet_waited_s": round(quiet.waited, 1),
            "quiet_gave_up": quiet.gave_up,
            "loadavg": os.getloadavg(),
        }
        results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
