"""`foya backup` and `foya restore` (issue "Backup and restore") against real processes.

The online scenario (module fixture `online`) runs a real `foya serve` on a Unix socket with a
fake provider: a connection (its API key lands in `connections.json`), a project, sessions with
real turns (a `write` tool call puts a file in a managed workspace), an uploaded image, files
written straight into a workspace (one larger than `app.ops.backup.WHOLE_FILE`, so it is streamed),
and a `~/.foya` in a temporary HOME. A writer thread keeps PATCHing a session's title (each
PATCH stores a `session_updated`) while `foya backup` runs as a subprocess (the module's one
`foya` process of its own, beside a live kernel and its writer); the archive is then restored
with `foya restore` into a fresh data dir and a fresh HOME, and a second kernel serves it. Just
before the backup starts, the test reads the live head seq through a read-only SQLite
connection: every event acknowledged before that instant has a seq at most that head.

The refusal tests use a small archive written in process by `app.ops.backup.backup` from a data dir
seeded through the real `Store`, and variants of it rewritten with `tarfile`. Each refused
restore runs onto an existing data dir with `--replace` and, unless the manifest alone refuses
it, onto a target that does not exist; the sandbox holding both (and HOME, and a directory an
evil member aims at) must be exactly as before, down to file mtimes.

Every other `foya` command (restore, the refused backups, `foya check`) runs in the test's own
process (`support.cli_inprocess`): each judges what a command decides, and none of them races
another command for a lock or a target. The kernels they restore for, or refuse to touch, are
real `foya serve` processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from support.cli_inprocess import foya_check, run_cli
from support.fake_provider import Agent, FakeProvider, answer, call, connect, only
from support.helpers import (
    Kernel,
    Launcher,
    base_env,
    run_foya,
    short_tmpdir,
    wait_until,
)
from support.streams_helpers import Served, metric, seed_store, session_row, unix_kernel

from app.events import SESSION_UPDATED, EventDraft
from app.ops.backup import MANIFEST, WHOLE_FILE, backup
from app.ops.restore import restore
from app.store import Store

DB_FILES = ("foya.db", "foya.db-wal", "foya.db-shm", "foya.db-journal")
# What a live data dir holds that a backup must not: the database's own files (a snapshot
# stands in), the lock, the socket, the backup status.
LIVE_ONLY = frozenset({*DB_FILES, "kernel.lock", "kernel.sock", "backup-status.json"})
OLD = 1_600_000_000  # a modification time well in the past (2020-09-13)


# ------------------------------------------------------------------------------------ helpers


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def tree(root: Path, *, skip: frozenset[str] = frozenset()) -> dict[str, tuple[Any, ...]]:
    """Everything under `root`: relative path → (kind, mode, SHA-256 or link target, mtime in
    ns for files). Top-level names in `skip` are left out; a missing `root` is `{}`."""
    out: dict[str, tuple[Any, ...]] = {}
    if not os.path.lexists(root):
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel.split("/")[0] in skip:
                continue
            st = path.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", mode, file_sha(path), st.st_mtime_ns)
            else:
                out[rel] = ("other", mode)
    return out


def without_times(snapshot: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    return {k: v[:3] for k, v in snapshot.items()}


def events(db: Path) -> list[tuple[Any, ...]]:
    """Every row of `events` (seq order), read through a read-only connection."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return list(conn.execute("SELECT * FROM events ORDER BY seq"))
    finally:
        conn.close()


def head_seq(db: Path) -> int:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
    finally:
        conn.close()


def manifest_of(archive: Path) -> dict[str, Any]:
    with tarfile.open(archive) as tar:
        raw = tar.extractfile(MANIFEST)
        assert raw is not None
        return dict(json.loads(raw.read()))


def png() -> bytes:
    im = Image.new("RGB", (16, 10), "red")
    im.paste("blue", (8, 0, 16, 10))
    out = io.BytesIO()
    im.save(out, "PNG")
    return out.getvalue()


def output(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


def refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A clean refusal: non-zero exit, one `foya:` line naming what is wrong, no traceback."""
    text = output(done)
    assert done.returncode != 0, text
    assert "Traceback" not in text, text
    assert "foya: " in done.stderr, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"


Command = tuple[list[str], Path]  # (foya arguments, HOME)


def restore_cli(archive: Path, target: Path, home: Path, *flags: str) -> Command:
    return ["restore", str(archive), "--data-dir", str(target), *flags], home


def foya(*args: str, home: Path, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`foya ARGS` with HOME=`home`: in the test's process, or in a process of its own."""
    env = base_env(HOME=str(home))
    return run_foya(*args, env=env, timeout=60) if process else run_cli(*args, env=env)


def run_each(*commands: Command) -> list[subprocess.CompletedProcess[str]]:
    """Run `foya` commands one after another (in process), each with its own HOME."""
    return [foya(*args, home=home) for args, home in commands]


def stamps(ahead: float = 5.0) -> list[str]:
    """The `%Y%m%dT%H%M%SZ` stamps of every second from now to `ahead` seconds from now."""
    start = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return [
        (start + dt.timedelta(seconds=i)).strftime("%Y%m%dT%H%M%SZ") for i in range(int(ahead) + 2)
    ]


# ----------------------------------------------------------------------- the online scenario


class Writer(threading.Thread):
    """PATCHes a session's title in a loop; records when each PATCH was acknowledged."""

    def __init__(self, kernel: Kernel, session: str) -> None:
        super().__init__(daemon=True)
        self.kernel, self.session = kernel, session
        self.acked: list[tuple[float, str]] = []  # (monotonic time of the 200, title)
        self.halt = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        with self.kernel.client() as client:
            n = 0
            while not self.halt.is_set():
                title = f"w-{n}"
                try:
                    response = client.patch(f"/sessions/{self.session}", json={"title": title})
                except httpx.HTTPError as exc:
                    self.error = repr(exc)
                    return
                if response.status_code != 200:
                    self.error = response.text
                    return
                self.acked.append((time.monotonic(), title))
                n += 1

    def acks_after(self, t: float) -> int:
        return sum(1 for when, _ in self.acked if when > t)


@dataclass
class Online:
    root: Path
    live: Served
    new: Served
    agent: Agent
    home: Path  # HOME of `foya backup`
    home2: Path  # fresh HOME of `foya restore`
    archive: Path
    backed: subprocess.CompletedProcess[str]
    restored: subprocess.CompletedProcess[str]
    noted_head: int  # live head just before the backup started
    started: float  # monotonic, just before `foya backup` was spawned
    ended: float
    started_wall: float
    ended_wall: float
    writer: Writer
    turned: str  # session with real turns, a tool-written file and an artifact
    artifact: tuple[str, bytes]  # (id, bytes as uploaded)
    metrics_before: dict[str, float]
    metrics_after: dict[str, float]
    live_events: list[tuple[Any, ...]] = field(default_factory=list)
    live_tree: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    restored_tree: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # before a kernel
    restored_home: dict[str, tuple[Any, ...]] = field(default_factory=dict)


BACKUP_METRICS = ("foya_backup_age_seconds", "foya_backup_last_success_timestamp_seconds")


def backup_metrics(client: httpx.Client) -> dict[str, float]:
    return {name: metric(client, name) for name in BACKUP_METRICS}


def fill_workspace(workspace: Path) -> None:
    """Files a user or an agent leaves in a managed workspace, with varied modes and times."""
    (workspace / "src").mkdir(parents=True, exist_ok=True)
    (workspace / "src" / "main.py").write_text("print('hello')\n" * 200)
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\necho run\n")
    script.chmod(0o755)
    secret = workspace / "secret.env"
    secret.write_text("TOKEN=abc\n")
    secret.chmod(0o600)
    (workspace / "empty-dir").mkdir()
    os.symlink("src/main.py", workspace / "main-link")
    # Larger than WHOLE_FILE: archived through the streaming path. Sparse in the middle.
    big = workspace / "big.bin"
    with big.open("wb") as f:
        f.write(os.urandom(1 << 20))
        f.seek(WHOLE_FILE + (1 << 20))
        f.write(os.urandom(1 << 20))
    for path in (script, secret, big, workspace / "src" / "main.py"):
        os.utime(path, (OLD, OLD))


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Online]:
    work = tmp_path_factory.mktemp("backup-online")
    with (
        FakeProvider.running() as fake,
        short_tmpdir() as root,
        contextlib.closing(Launcher(work / "procs")) as launcher,
    ):
        live = unix_kernel(launcher, root, "live")
        with live.client() as client:
            client.timeout = httpx.Timeout(20)
            agent = Agent(live, fake, client, connect(client, fake)["id"])
            (root / "proj").mkdir()
            project = client.post("/projects", json={"path": str(root / "proj"), "name": "Site"})
            assert project.status_code == 201, project.text
            agent.session(project_id=project.json()["id"], title="in a project")
            agent.session(title="idle")

            s = agent.session()
            frames = s.tool_turn(call("t1", "write", {"path": "notes/plan.md", "content": "x\n"}))
            assert only(frames, "turn_complete")["status"] == "completed"
            frames = s.turn(answer("All done."), message="thanks")
            assert only(frames, "turn_complete")["status"] == "completed"
            image = png()
            upload = client.post(
                f"/sessions/{s.id}/artifacts", files={"file": ("shot.png", image, "image/png")}
            )
            assert upload.status_code == 201, upload.text
            artifact = (upload.json()["attachment"]["id"], image)
            fill_workspace(s.workspace)

            home = root / "home"
            (home / ".foya" / "agents").mkdir(parents=True)
            (home / ".foya" / "config.toml").write_text("theme = 'dark'\n")
            (home / ".foya" / "config.toml").chmod(0o600)
            (home / ".foya" / "agents" / "reviewer.md").write_text("# Reviewer\n")
            (root / "backups").mkdir()
            archive = root / "backups" / "b.tar"

            writer = Writer(live.kernel, agent.session(title="w-start").id)
            metrics_before = backup_metrics(client)
            writer.start()
            try:
                wait_until(lambda: len(writer.acked) >= 20 or writer.error is not None, "writes")
                noted_head = head_seq(live.data_dir / "foya.db")
                started, started_wall = time.monotonic(), time.time()
                # A process of its own, as in production (in this one it would take turns
                # with the writer thread for the interpreter lock), and `python -m app` end to end.
                args = ("backup", str(archive), "--data-dir", str(live.data_dir))
                backed = foya(*args, home=home, process=True)
                ended, ended_wall = time.monotonic(), time.time()
                wait_until(
                    lambda: writer.acks_after(ended) >= 10 or writer.error is not None, "writes"
                )
            finally:
                writer.halt.set()
                writer.join(20)
            assert writer.error is None, writer.error
            metrics_after = backup_metrics(client)

            live_events = events(live.data_dir / "foya.db")
            live_tree = tree(live.data_dir, skip=LIVE_ONLY)
            home2 = root / "home2"
            restored = foya("restore", str(archive), "--data-dir", str(root / "new"), home=home2)
            assert restored.returncode == 0, output(restored)
            restored_tree = tree(root / "new")
            restored_home = tree(home2 / ".foya")
            new = unix_kernel(launcher, root, "new")
            yield Online(
                root=root,
                live=live,
                new=new,
                agent=agent,
                home=home,
                home2=home2,
                archive=archive,
                backed=backed,
                restored=restored,
                noted_head=noted_head,
                started=started,
                ended=ended,
                started_wall=started_wall,
                ended_wall=ended_wall,
                writer=writer,
                turned=s.id,
                artifact=artifact,
                metrics_before=metrics_before,
                metrics_after=metrics_after,
                live_events=live_events,
                live_tree=live_tree,
                restored_tree=restored_tree,
                restored_home=restored_home,
            )


@pytest.fixture(scope="module")
def new_client(online: Online) -> Iterator[httpx.Client]:
    with online.new.client() as client:
        yield client


def test_backup_writes_one_private_archive(online: Online) -> None:
    assert online.backed.returncode == 0, output(online.backed)
    assert f"wrote {online.archive}" in online.backed.stdout
    assert "backing up" in online.backed.stderr  # the progress bar
    assert stat.S_IMODE(online.archive.stat().st_mode) == 0o600
    assert sorted(p.name for p in online.archive.parent.iterdir()) == ["b.tar"], "no leftovers"


def test_archive_holds_no_live_only_file(online: Online) -> None:
    with tarfile.open(online.archive) as tar:
        names = tar.getnames()
    assert names[-1] == MANIFEST
    assert "data/foya.db" in names
    for name in LIVE_ONLY - {"foya.db"}:
        assert f"data/{name}" not in names, name
    manifest = manifest_of(online.archive)
    assert sorted(m["path"] for m in manifest["members"]) == sorted(names[:-1])
    assert manifest["format"] == "foya-backup" and manifest["format_version"] == 1
    assert isinstance(manifest["schema_version"], int) and manifest["schema_version"] >= 1
    created = dt.datetime.fromisoformat(manifest["created_at"].replace("Z", "+00:00"))
    assert online.started_wall - 2 <= created.timestamp() <= online.ended_wall + 1


def test_the_writer_kept_going_while_the_backup_ran(online: Online) -> None:
    assert online.writer.acks_after(online.started) - online.writer.acks_after(online.ended) > 0
    assert manifest_of(online.archive)["head_seq"] < online.live_events[-1][0]


def test_every_event_acknowledged_before_the_backup_is_restored(online: Online) -> None:
    head = manifest_of(online.archive)["head_seq"]
    assert head >= online.noted_head
    restored = events(online.new.data_dir / "foya.db")
    live = {row[0]: row for row in online.live_events}
    for row in restored:
        if row[0] <= online.noted_head:
            assert row == live[row[0]]
    assert {r[0] for r in restored} >= {s for s in live if s <= online.noted_head}
    titles = {json.loads(r[5]).get("title") for r in restored if r[3] == "session_updated"}
    before = [title for when, title in online.writer.acked if when < online.started]
    assert before and set(before) <= titles


def test_the_restored_database_is_the_live_one_at_one_instant(online: Online) -> None:
    head = manifest_of(online.archive)["head_seq"]
    restored = events(online.new.data_dir / "foya.db")
    assert restored == [row for row in online.live_events if row[0] <= head]
    assert restored[-1][0] == head


def test_foya_check_is_clean_on_the_restored_dir(online: Online) -> None:
    foya_check(online.new.data_dir)


def test_manifest_hashes_match_the_restored_files(online: Online) -> None:
    """As restored, before a kernel opened the database."""
    places = {"data": online.restored_tree, "home/.foya": online.restored_home}
    manifest = manifest_of(online.archive)
    for member in manifest["members"]:
        prefix = "home/.foya" if member["path"].startswith("home/.foya") else "data"
        rel = member["path"].removeprefix(prefix).lstrip("/")
        if not rel:
            continue  # the root directory itself
        got = places[prefix][rel]
        if member["type"] == "file":
            assert got[:3] == ("file", member["mode"], member["sha256"]), member["path"]
        elif member["type"] == "symlink":
            assert got == ("link", member["target"]), member["path"]
        else:
            assert got == ("dir", member["mode"]), member["path"]
    assert len(manifest["members"]) == len(online.restored_tree) + len(online.restored_home) + 2
    with tarfile.open(online.archive) as tar:
        db = tar.extractfile("data/foya.db")
        assert db is not None
        member = next(m for m in manifest["members"] if m["path"] == "data/foya.db")
        assert sha(db.read()) == member["sha256"]


def test_data_files_are_restored_byte_for_byte_with_modes(online: Online) -> None:
    new = online.new.data_dir
    restored = tree(new, skip=LIVE_ONLY)
    assert without_times(restored) == without_times(online.live_tree)
    assert stat.S_IMODE(new.stat().st_mode) == 0o700
    connections = new / "connections.json"
    assert stat.S_IMODE(connections.stat().st_mode) == 0o600
    assert connections.read_bytes() == (online.live.data_dir / "connections.json").read_bytes()
    assert (new / "projects.json").read_bytes() == (
        online.live.data_dir / "projects.json"
    ).read_bytes()
    workspace = new / "workspaces" / online.turned
    assert (workspace / "notes" / "plan.md").read_text() == "x\n"
    assert (workspace / "big.bin").stat().st_size == WHOLE_FILE + (2 << 20)
    assert os.readlink(workspace / "main-link") == "src/main.py"
    assert stat.S_IMODE((workspace / "run.sh").stat().st_mode) == 0o755
    artifacts = [p for p in (new / "artifacts" / online.turned).rglob("*") if p.is_file()]
    assert artifacts, "the uploaded image is restored"


def test_restore_keeps_file_modification_times(online: Online) -> None:
    """The workspace routes show each file's mtime; a restore must not make it "now"."""
    live = {k: v[3] // 10**9 for k, v in online.live_tree.items() if v[0] == "file"}
    restored = tree(online.new.data_dir, skip=LIVE_ONLY)
    got = {k: v[3] // 10**9 for k, v in restored.items() if v[0] == "file"}
    changed = sorted(k for k in live if got.get(k) != live[k])
    assert not changed, f"{len(changed)} file(s) got a new mtime, e.g. {changed[:3]}"


def test_home_foya_is_restored_into_the_fresh_home(online: Online) -> None:
    assert "restored into" in online.restored.stdout
    want = tree(online.home / ".foya")
    got = tree(online.home2 / ".foya")
    assert without_times(got) == without_times(want)
    assert stat.S_IMODE((online.home2 / ".foya" / "config.toml").stat().st_mode) == 0o600


def test_a_kernel_on_the_restored_dir_serves_sessions_and_history(
    online: Online, new_client: httpx.Client
) -> None:
    live = {s["id"]: s for s in online.agent.client.get("/sessions").json()}
    served = new_client.get("/sessions")
    assert served.status_code == 200, served.text
    restored = {s["id"]: s for s in served.json()}
    assert set(restored) == set(live)
    writer = online.writer.session
    for sid, row in live.items():
        if sid != writer:
            assert restored[sid] == row
    # The writer's session row is the projection of the restored events at the same instant.
    last = [
        json.loads(r[5])["title"]
        for r in events(online.new.data_dir / "foya.db")
        if r[1] == writer and r[3] == "session_updated"
    ][-1]
    assert restored[writer]["title"] == last
    history = new_client.get(f"/sessions/{online.turned}/history")
    assert history.status_code == 200, history.text
    assert history.json() == online.agent.client.get(f"/sessions/{online.turned}/history").json()
    assert len(history.json()) >= 4
    artifact_id, image = online.artifact
    got = new_client.get(f"/sessions/{online.turned}/artifacts/{artifact_id}")
    assert got.status_code == 200 and got.content == image
    for route in ("/projects", "/connections"):
        assert new_client.get(route).json() == online.agent.client.get(route).json()


def test_restored_file_changes_point_into_the_restored_dir(
    online: Online, new_client: httpx.Client
) -> None:
    """The restored kernel's file review (and rewind) must act on its own workspace, never on
    the data dir the backup was taken from, which may still be in use."""
    review = new_client.get(f"/sessions/{online.turned}/file-review")
    assert review.status_code == 200, review.text
    paths = [f["path"] for f in review.json()["files"]]
    assert paths, review.json()
    outside = [p for p in paths if not p.startswith(str(online.new.data_dir) + "/")]
    assert not outside, f"restored file changes still name {outside}"


def test_metrics_show_the_last_successful_backup(online: Online) -> None:
    before, after = online.metrics_before, online.metrics_after
    assert before["foya_backup_age_seconds"] == float("inf")
    assert before["foya_backup_last_success_timestamp_seconds"] == 0
    stamp = after["foya_backup_last_success_timestamp_seconds"]
    assert online.started_wall <= stamp <= online.ended_wall + 1
    assert 0 <= after["foya_backup_age_seconds"] < 60
    # A refused backup does not count.
    done = foya(
        "backup", str(online.archive), "--data-dir", str(online.live.data_dir), home=online.home
    )
    refused(done, "exists")
    assert backup_metrics(online.agent.client)[BACKUP_METRICS[1]] == stamp


# ------------------------------------------------------------------------ a small archive


@dataclass(frozen=True)
class Small:
    data: Path  # the data dir it was taken from (kept, unchanged)
    home: Path
    archive: Path
    session: str


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Small:
    base = tmp_path_factory.mktemp("backup-small")
    data, home = base / "data", base / "home"
    sid = "s" * 24

    async def fill(store: Store) -> None:
        await store.create_session(session_row(sid, title="small"))
        for n in range(5):
            await store.append(EventDraft(sid, SESSION_UPDATED, {"id": sid, "title": f"t{n}"}))

    seed_store(data, fill)
    workspace = data / "workspaces" / sid
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("first line\nsecond line\n")
    (data / "connections.json").write_text('{"connections": []}\n')
    (data / "connections.json").chmod(0o600)
    (home / ".foya").mkdir(parents=True)
    (home / ".foya" / "config.toml").write_text("theme = 'light'\n")
    archive = base / "small.tar"
    backup(data, archive, home=home / ".foya")
    return Small(data, home, archive, sid)


Edit = Callable[[list[tuple[tarfile.TarInfo, bytes | None]], dict[str, Any]], None]


def rebuilt(src: Path, dst: Path, edit: Edit) -> Path:
    """A copy of archive `src` at `dst` after `edit(members, manifest)` changed either; the
    manifest is written last, as `foya backup` does."""
    with tarfile.open(src) as tar:
        members: list[tuple[tarfile.TarInfo, bytes | None]] = []
        manifest: dict[str, Any] = {}
        for m in tar.getmembers():
            body = tar.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            if m.name == MANIFEST:
                assert body is not None
                manifest = json.loads(body)
            else:
                members.append((m, body))
    edit(members, manifest)
    with tarfile.open(dst, "w", format=tarfile.PAX_FORMAT) as out:
        for info, body in members:
            if body is not None:
                info.size = len(body)
            out.addfile(info, io.BytesIO(body) if body is not None else None)
        if manifest:
            raw = json.dumps(manifest).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mode = len(raw), 0o600
            out.addfile(info, io.BytesIO(raw))
    return dst


def file_member(name: str, body: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = 0o644, OLD
    return info, body


def listed(manifest: dict[str, Any], name: str, body: bytes) -> None:
    manifest["members"].append(
        {"path": name, "mode": 0o644, "type": "file", "size": len(body), "sha256": sha(body)}
    )


def entry(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in manifest["members"] if m["path"] == name)


@dataclass(frozen=True)
class Sandbox:
    """An existing data dir, a HOME with its own ~/.foya, and a directory evil members aim at;
    targets that do not exist yet are put here too."""

    root: Path
    data: Path
    home: Path
    victim: Path

    def snapshot(self) -> dict[str, tuple[Any, ...]]:
        return tree(self.root)


def sandbox(base: Path, small: Small) -> Sandbox:
    root = base / "sandbox"
    data = root / "data"
    shutil.copytree(small.data, data, symlinks=True)
    (data / "kernel.lock").write_text("12345\n")  # a stopped kernel's lock, not held
    (data / "mine.txt").write_text("the data dir's own file\n")
    home = root / "home"
    (home / ".foya").mkdir(parents=True)
    (home / ".foya" / "own.toml").write_text("own = true\n")
    victim = root / "victim"
    victim.mkdir()
    return Sandbox(root, data, home, victim)


@pytest.fixture
def box(tmp_path: Path, small: Small) -> Sandbox:
    return sandbox(tmp_path, small)


def tampered_byte(members: list[Any], manifest: dict[str, Any]) -> None:
    for i, (info, body) in enumerate(members):
        if info.name.endswith("notes.txt"):
            members[i] = (info, body[:3] + b"X" + body[4:])  # same size


def bump(key: str) -> Edit:
    def edit(members: list[Any], manifest: dict[str, Any]) -> None:
        manifest[key] = 99

    return edit


def unlisted(members: list[Any], manifest: dict[str, Any]) -> None:
    members.append(file_member("data/extra.txt", b"extra\n"))


def dotdot(members: list[Any], manifest: dict[str, Any]) -> None:
    # Restores unpack into a scratch dir beside the target: ../../victim is the sandbox's.
    name = "data/../../victim/evil"
    members.append(file_member(name, b"evil\n"))
    listed(manifest, name, b"evil\n")


def absolute(victim: Path) -> Edit:
    def edit(members: list[Any], manifest: dict[str, Any]) -> None:
        name = str(victim / "evil")
        members.append(file_member(name, b"evil\n"))
        listed(manifest, name, b"evil\n")

    return edit


def through_symlink(victim: Path) -> Edit:
    def edit(members: list[Any], manifest: dict[str, Any]) -> None:
        link = tarfile.TarInfo("data/link")
        link.type, link.linkname, link.mode = tarfile.SYMTYPE, str(victim), 0o777
        members.append((link, None))
        manifest["members"].append(
            {"path": "data/link", "mode": 0o777, "type": "symlink", "target": str(victim)}
        )
        members.append(file_member("data/link/pwned", b"pwned\n"))
        listed(manifest, "data/link/pwned", b"pwned\n")

    return edit


def drop(name: str, *, from_manifest: bool) -> Edit:
    def edit(members: list[Any], manifest: dict[str, Any]) -> None:
        members[:] = [(i, b) for i, b in members if i.name != name]
        if from_manifest:
            manifest["members"] = [m for m in manifest["members"] if m["path"] != name]

    return edit


def no_manifest(members: list[Any], manifest: dict[str, Any]) -> None:
    manifest.clear()


def head_mismatch(members: list[Any], manifest: dict[str, Any]) -> None:
    manifest["head_seq"] += 1


def damaged_db(members: list[Any], manifest: dict[str, Any]) -> None:
    for i, (info, body) in enumerate(members):
        if info.name == "data/foya.db":
            broken = b"\0" * 100 + body[100:]  # the header gone; the manifest agrees
            members[i] = (info, broken)
            entry(manifest, info.name)["sha256"] = sha(broken)


REFUSALS: dict[str, tuple[Callable[[Sandbox], Edit | None], tuple[str, ...]]] = {
    "tampered-byte": (lambda b: tampered_byte, ("notes.txt", "SHA-256")),
    "format-version-99": (lambda b: bump("format_version"), ("format version", "upgrade")),
    "schema-version-99": (lambda b: bump("schema_version"), ("schema", "upgrade")),
    "truncated": (lambda b: None, ()),
    "not-a-tar": (lambda b: None, ("cannot read",)),
    "member-not-in-manifest": (lambda b: unlisted, ("data/extra.txt",)),
    "dotdot-path": (lambda b: dotdot, ("unsafe",)),
    "absolute-path": (lambda b: absolute(b.victim), ("unsafe",)),
    "file-through-symlink": (lambda b: through_symlink(b.victim), ()),
    "member-missing": (lambda b: drop("data/connections.json", from_manifest=False), ("lacks",)),
    "no-manifest": (lambda b: no_manifest, ("manifest",)),
    "head-seq-mismatch": (lambda b: head_mismatch, ("head seq",)),
    "damaged-database": (lambda b: damaged_db, ("database",)),
    "no-database": (lambda b: drop("data/foya.db", from_manifest=True), ("foya.db",)),
}


# Refused on the manifest alone: onto an absent target as well adds nothing but time.
BEFORE_UNPACKING = {"format-version-99", "schema-version-99", "not-a-tar", "no-manifest"}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refused_restore_leaves_every_target_untouched(
    case: str, box: Sandbox, small: Small, tmp_path: Path
) -> None:
    make, needles = REFUSALS[case]
    bad = tmp_path / f"{case}.tar"
    edit = make(box)
    if case == "truncated":
        bad.write_bytes(small.archive.read_bytes()[: small.archive.stat().st_size * 2 // 3])
    elif case == "not-a-tar":
        bad.write_bytes(os.urandom(20_000))
    else:
        assert edit is not None
        rebuilt(small.archive, bad, edit)
    before = box.snapshot()
    commands = [restore_cli(bad, box.data, box.home, "--replace")]
    if case not in BEFORE_UNPACKING:
        commands.append(restore_cli(bad, box.root / "fresh", box.root / "fresh-home"))
    for done in run_each(*commands):
        refused(done, *needles)
    assert box.snapshot() == before  # nothing created, moved, written or left behind


def test_restore_refuses_a_non_empty_target_without_replace(box: Sandbox, small: Small) -> None:
    before = box.snapshot()
    done = foya("restore", str(small.archive), "--data-dir", str(box.data), home=box.home)
    refused(done, "not empty", "--replace", "stop the kernel")
    assert done.returncode == 2, output(done)
    assert box.snapshot() == before


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A kernel running on a data dir that restores target."""
    with (
        short_tmpdir() as root,
        contextlib.closing(Launcher(tmp_path_factory.mktemp("busy"))) as launcher,
    ):
        served = unix_kernel(launcher, root, "busy")
        with served.client() as client:
            assert client.post("/sessions", json={}).status_code == 200
        yield served


def assert_still_serving(busy: Served, before: dict[str, tuple[Any, ...]]) -> None:
    assert without_times(tree(busy.data_dir, skip=frozenset(DB_FILES))) == without_times(before)
    assert [p.name for p in busy.data_dir.parent.iterdir() if ".replaced-" in p.name] == []
    with busy.client() as client:
        assert len(client.get("/sessions").json()) == 1


def test_restore_refuses_while_a_kernel_runs_on_the_target(
    busy: Served, small: Small, tmp_path: Path
) -> None:
    before = tree(busy.data_dir, skip=frozenset(DB_FILES))
    home = tmp_path / "home"
    done = foya(
        "restore", str(small.archive), "--data-dir", str(busy.data_dir), "--replace", home=home
    )
    refused(done, "stop it first")
    assert_still_serving(busy, before)
    assert not home.exists()


def test_dry_run_verifies_every_member_and_changes_nothing(
    box: Sandbox, small: Small, tmp_path: Path
) -> None:
    bad = rebuilt(small.archive, tmp_path / "bad.tar", tampered_byte)
    before = box.snapshot()
    good, tampered = run_each(
        restore_cli(small.archive, box.root / "fresh", box.home, "--dry-run"),
        restore_cli(bad, box.root / "fresh", box.home, "--dry-run"),
    )
    assert good.returncode == 0, output(good)
    assert "verified" in good.stdout and "head seq 5" in good.stdout
    refused(tampered, "notes.txt", "SHA-256")
    assert box.snapshot() == before


def test_dry_run_creates_no_directory(box: Sandbox, small: Small) -> None:
    before = box.snapshot()
    target = box.root / "not" / "yet" / "data"
    done = foya(
        "restore", str(small.archive), "--data-dir", str(target), "--dry-run", home=box.home
    )
    assert done.returncode == 0, output(done)
    assert box.snapshot() == before, "a dry run created directories"


def test_dry_run_tells_that_the_real_restore_would_be_refused(
    busy: Served, box: Sandbox, small: Small, tmp_path: Path
) -> None:
    """A dry run that answers "verified" must not hide what the real restore would refuse: a
    non-empty target without --replace, and a kernel running on the target. It exits 2, as
    that restore would, and says what to do (a dry run that would go ahead exits 0)."""
    before = box.snapshot()
    before_busy = tree(busy.data_dir, skip=frozenset(DB_FILES))
    non_empty, running = run_each(
        restore_cli(small.archive, box.data, box.home, "--dry-run"),
        restore_cli(small.archive, busy.data_dir, tmp_path / "h", "--dry-run", "--replace"),
    )
    assert box.snapshot() == before
    assert_still_serving(busy, before_busy)
    assert "--replace" in output(non_empty), output(non_empty)
    assert "running" in output(running), output(running)
    for done in (non_empty, running):
        assert done.returncode == 2, output(done)
        assert "verified" in done.stdout, output(done)
        assert "foya: the restore would be refused: " in done.stderr, output(done)
    assert "systemctl stop foya" in output(non_empty), output(non_empty)
    assert "stop it first" in output(running), output(running)


@dataclass(frozen=True)
class Replaced:
    box: Sandbox
    done: subprocess.CompletedProcess[str]
    old_data: dict[str, tuple[Any, ...]]
    old_home: dict[str, tuple[Any, ...]]


@pytest.fixture(scope="module")
def replaced(tmp_path_factory: pytest.TempPathFactory, small: Small) -> Replaced:
    """`foya restore --replace` onto an existing data dir, with a ~/.foya of its own."""
    box = sandbox(tmp_path_factory.mktemp("replace"), small)
    old_data, old_home = tree(box.data), tree(box.home / ".foya")
    done = foya(
        "restore", str(small.archive), "--data-dir", str(box.data), "--replace", home=box.home
    )
    return Replaced(box, done, old_data, old_home)


def test_replace_moves_the_old_data_dir_aside_and_restores(
    replaced: Replaced, small: Small
) -> None:
    box, done = replaced.box, replaced.done
    assert done.returncode == 0, output(done)
    asides = [p for p in box.root.iterdir() if p.name.startswith("data.replaced-")]
    assert len(asides) == 1, sorted(p.name for p in box.root.iterdir())
    assert str(asides[0]) in done.stdout, "the kept directory is named"
    assert tree(asides[0]) == replaced.old_data, "kept as it was"
    assert without_times(tree(box.data, skip=LIVE_ONLY)) == without_times(
        tree(small.data, skip=LIVE_ONLY)
    )
    assert events(box.data / "foya.db") == events(small.data / "foya.db")
    assert not (box.data / "mine.txt").exists()
    assert (box.home / ".foya" / "config.toml").read_text() == "theme = 'light'\n"
    kept = [p for p in box.home.iterdir() if p.name.startswith(".foya.replaced-")]
    assert len(kept) == 1 and tree(kept[0]) == replaced.old_home, "the old ~/.foya is kept"


def test_replace_names_the_kept_home(replaced: Replaced) -> None:
    """With --replace the old ~/.foya is moved aside too: say where, as for the data dir."""
    kept = [p for p in replaced.box.home.iterdir() if p.name.startswith(".foya.replaced-")]
    assert len(kept) == 1
    assert str(kept[0]) in output(replaced.done), output(replaced.done)


def test_restore_says_when_it_leaves_home_alone(box: Sandbox, small: Small) -> None:
    """Restoring into a fresh data dir while ~/.foya holds files keeps that ~/.foya (right),
    but must say that the archive's ~/.foya was not restored."""
    before = tree(box.home)
    target = box.root / "fresh"
    done = foya("restore", str(small.archive), "--data-dir", str(target), home=box.home)
    assert done.returncode == 0, output(done)
    assert tree(box.home) == before
    assert events(target / "foya.db") == events(small.data / "foya.db")
    assert ".foya" in output(done), output(done)


def test_a_second_replace_within_the_same_second_succeeds(box: Sandbox, small: Small) -> None:
    """`<target>.replaced-<second>` may already exist: an earlier restore in the same second
    kept a directory there. Neither may be lost, and the restore must not fail for it."""
    earlier = {}
    for stamp in stamps():
        kept = box.root / f"data.replaced-{stamp}"
        kept.mkdir()
        (kept / "foya.db").write_bytes(b"an earlier generation")
        earlier[kept] = tree(kept)
    old = tree(box.data)
    done = foya(
        "restore", str(small.archive), "--data-dir", str(box.data), "--replace", home=box.home
    )
    assert done.returncode == 0, output(done)
    for kept, snapshot in earlier.items():
        assert tree(kept) == snapshot
    assert old in [tree(p) for p in box.root.iterdir() if p.name.startswith("data.replaced-")]


def test_restore_with_home_on_another_file_system(box: Sandbox, small: Small) -> None:
    """HOME on tmpfs, the data dir elsewhere: restore both, or fail with the target as it was.
    (Where /dev/shm and the temp dir share a file system this holds trivially.)"""
    other = Path(tempfile.mkdtemp(prefix="foya-home-", dir="/dev/shm"))
    try:
        (other / ".foya").mkdir()
        (other / ".foya" / "own.toml").write_text("own = true\n")
        before = tree(box.data)
        done = foya(
            "restore", str(small.archive), "--data-dir", str(box.data), "--replace", home=other
        )
        if done.returncode == 0:
            assert (other / ".foya" / "config.toml").read_text() == "theme = 'light'\n"
            assert events(box.data / "foya.db") == events(small.data / "foya.db")
        else:
            assert tree(box.data) == before, f"the target was replaced: {output(done)}"
            assert not [p for p in box.root.iterdir() if ".replaced-" in p.name]
    finally:
        shutil.rmtree(other, ignore_errors=True)


# ------------------------------------------------------------------------- backup refusals


@pytest.mark.parametrize("case", ["dest-inside-data-dir", "no-database", "dest-exists"])
def test_backup_refusals(case: str, small: Small, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(small.data, data)
    dest = tmp_path / "out.tar"
    needle = {"dest-inside-data-dir": "outside", "no-database": "foya.db", "dest-exists": "exists"}
    if case == "dest-inside-data-dir":
        dest = data / "workspaces" / "b.tar"
    elif case == "no-database":
        (data / "foya.db").unlink()
    else:
        dest.write_bytes(b"an older backup")
    before = tree(tmp_path)
    done = foya("backup", str(dest), "--data-dir", str(data), home=tmp_path / "home")
    refused(done, needle[case])
    assert tree(tmp_path) == before, "nothing written: no archive, no .partial, no status"


@pytest.mark.parametrize("dest", ["missing/", "missing/deeper/", "missing/out.tar"])
def test_backup_into_a_missing_directory_is_refused(
    dest: str, small: Small, tmp_path: Path
) -> None:
    """A path ending in / means a directory: one that does not exist is refused in one line,
    exit 2, never written as a file named like it (the next backup would then fail)."""
    data = tmp_path / "data"
    shutil.copytree(small.data, data)
    before = tree(tmp_path)
    done = foya("backup", f"{tmp_path}/{dest}", "--data-dir", str(data), home=tmp_path / "home")
    refused(done, "directory", "does not exist")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert tree(tmp_path) == before, "nothing written: no file named like the directory"


@pytest.mark.parametrize("dest", ["out/", "out"])
def test_backup_into_an_existing_directory_writes_a_dated_archive(
    dest: str, small: Small, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(small.data, data)
    (tmp_path / "out").mkdir()
    done = foya("backup", f"{tmp_path}/{dest}", "--data-dir", str(data), home=tmp_path / "home")
    assert done.returncode == 0, output(done)
    [archive] = (tmp_path / "out").iterdir()
    assert re.fullmatch(r"foya-backup-\d{8}T\d{6}Z\.tar", archive.name)
    assert f"wrote {archive}:" in done.stdout


def test_backup_tolerates_a_file_removed_while_it_runs(small: Small, tmp_path: Path) -> None:
    """A live kernel deletes files at any time (a deleted session's workspace and artifacts,
    `/readyz`'s probe file, the temp file of every atomic JSON write). One that vanishes
    between the listing and its turn must not fail the whole backup."""
    data = tmp_path / "data"
    shutil.copytree(small.data, data)
    doomed = data / "workspaces" / "zz-deleted-session" / "scratch.txt"
    doomed.parent.mkdir(parents=True)
    doomed.write_text("about to go\n")

    def progress(done: int, total: int) -> None:
        doomed.unlink(missing_ok=True)  # after the first member: the database snapshot

    report = backup(data, tmp_path / "b.tar", progress=progress)
    with tarfile.open(report.archive) as tar:
        assert "data/workspaces/zz-deleted-session/scratch.txt" not in tar.getnames()
    verified = restore(report.archive, tmp_path / "check", dry_run=True)
    assert verified.head_seq == 5


def test_backup_and_restore_in_process_round_trip(small: Small, tmp_path: Path) -> None:
    """The library API behind the commands: a progress callback that ends at the total, a
    report that matches the manifest, and a restore that reproduces the data dir."""
    data = tmp_path / "data"
    shutil.copytree(small.data, data)
    seen: list[tuple[int, int]] = []
    report = backup(data, tmp_path, home=small.home / ".foya", progress=lambda *a: seen.append(a))
    assert re.fullmatch(r"foya-backup-\d{8}T\d{6}Z\.tar", report.archive.name)
    assert report.head_seq == 5 and report.members == len(manifest_of(report.archive)["members"])
    assert seen and seen[-1][0] == seen[-1][1]
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))
    out = restore(report.archive, tmp_path / "restored", home=tmp_path / "h" / ".foya")
    assert out.notes == [f"restored {tmp_path / 'h' / '.foya'}"]  # nothing moved aside
    assert without_times(tree(tmp_path / "restored", skip=LIVE_ONLY)) == without_times(
        tree(small.data, skip=LIVE_ONLY)
    )
    assert asyncio.run(_head(tmp_path / "restored")) == 5


async def _head(data_dir: Path) -> int:
    store = Store(data_dir)
    store.open()
    try:
        return await store.head_seq()
    finally:
        store.close()
