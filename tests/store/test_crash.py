"""Crash test: SIGKILL a writer at random moments; every acknowledged append must survive.

`crash_writer.py` appends from several concurrent tasks (group commit) and prints each seq only
after its COMMIT returned. After the kill, every printed seq must be in `events` with its
projection rows, and `foya check` must find the database consistent.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app.store import Store
from app.store.check import check

from .conftest import REPO, cli_env, run

WRITER = Path(__file__).with_name("crash_writer.py")
RUNS = 20
FIRST_ACK_DEADLINE = 30.0


def acknowledged(path: Path) -> list[int]:
    """Complete lines only: a line cut by the kill was never acknowledged."""
    text = path.read_text()
    return [int(line) for line in text.split("\n")[:-1]] if text else []


def crash_once(workdir: Path, wait: float) -> tuple[Path, list[int]]:
    data_dir, acks, errors = workdir / "data", workdir / "acks.txt", workdir / "stderr.txt"
    workdir.mkdir()
    with acks.open("w") as out, errors.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(data_dir), "8"],
            cwd=REPO,
            env=cli_env(),
            stdout=out,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + FIRST_ACK_DEADLINE
        while "\n" not in acks.read_text():
            assert proc.poll() is None, f"writer exited early: {errors.read_text()}"
            assert time.monotonic() < deadline, "writer acknowledged nothing"
            time.sleep(0.005)
        time.sleep(wait)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, errors.read_text()
    return data_dir, acknowledged(acks)


def verify(data_dir: Path, acked: list[int]) -> None:
    db = data_dir / "foya.db"
    # An operator's first step after a crash: `foya check` on the untouched files (WAL and all).
    report = check(db)
    assert report.clean, report.differences
    assert report.events >= len(acked)

    conn = sqlite3.connect(db)
    try:
        stored = dict(conn.execute("SELECT seq, kind FROM events WHERE session_id = 'crash'"))
        projected = dict(
            conn.execute(
                "SELECT event_seq, active FROM message_projection WHERE session_id = 'crash'"
            )
        )
        changes = {r[0] for r in conn.execute("SELECT event_seq FROM file_changes")}
        tools = {
            r[0]
            for r in conn.execute("SELECT event_seq FROM message_projection WHERE role = 'tool'")
        }
    finally:
        conn.close()
    assert len(set(acked)) == len(acked)
    missing = sorted(set(acked) - set(stored))
    assert not missing, f"acknowledged but lost: {missing[:10]} ({len(missing)} in all)"
    assert all(projected.get(seq) == 1 for seq in acked)
    # Nothing half-written: the log has no gaps and every message has all its projections.
    assert sorted(stored) == list(range(1, len(stored) + 1))
    assert set(projected) == set(stored)
    assert tools == changes

    # The store opens again and carries on after the highest seq ever assigned.
    store = Store(data_dir)
    store.open()
    try:
        run(store.recover())
        assert run(store.head_seq()) == max(stored)
        assert len(run(store.history("crash"))) == len(stored)
    finally:
        store.close()


def crash_and_verify(workdir: Path, wait: float) -> int:
    data_dir, acked = crash_once(workdir, wait)
    assert acked, f"{workdir.name}: no acknowledged append"
    verify(data_dir, acked)
    result = subprocess.run(
        [sys.executable, "-m", "app", "check", "--data-dir", str(data_dir)],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{workdir.name}: foya check: {result.stdout}{result.stderr}"
    assert "0 difference(s)" in result.stderr
    return len(acked)


def test_acknowledged_appends_survive_sigkill(tmp_path: Path) -> None:
    rng = random.Random(20240531)
    waits = [rng.uniform(0.05, 0.6) for _ in range(RUNS)]
    # Two crash runs at a time (separate data dirs) keep the whole test well under a minute.
    with ThreadPoolExecutor(max_workers=2) as pool:
        workdirs = [tmp_path / f"run{i}" for i in range(RUNS)]
        counts = list(pool.map(crash_and_verify, workdirs, waits))
    assert sum(counts) > RUNS
