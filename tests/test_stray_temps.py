"""What a crash leaves on disk is cleaned up at the next run, and nothing else.

A kernel killed while a rewind writes a file (`FOYA_FAILPOINT=restore_staged:2`: the temp file is
complete, not yet renamed) leaves `.<name>.foya-<hex>.tmp` beside it; the next start rolls the
rewind back and deletes exactly those temp files. A `foya backup` killed just before its rename
(`backup_written`) leaves `.<archive>.partial` and its scratch directory (a full database
snapshot); the next backup into that directory deletes them, but never a user's file, nor the
partial file of a backup still running (it holds an flock).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import httpx
import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import (
    BOUND,
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    Session,
    connect,
)
from support.files_helpers import (
    LINES,
    confirm_call,
    edit,
    journal_rows,
    preview,
    put,
    snapshot,
    turn,
    user_seqs,
    write,
)
from support.helpers import Launcher, base_env, run_foya, short_tmpdir
from support.streams_helpers import Served, seed_store, session_row

from app.events import SESSION_UPDATED, EventDraft
from app.store import Store

USERS = ".one.txt.foya-notes.tmp"


def strays(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".foya-" in p.name)


def test_a_rewind_killed_mid_write_leaves_no_temp_file_after_the_next_start(
    tmp_path: Path,
) -> None:
    launcher = Launcher(tmp_path / "procs")
    with FakeProvider.running() as fake, short_tmpdir() as root:
        data_dir, sock = root / "k", root / "k.sock"
        args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]
        try:
            crashing = launcher(args, uds=sock, env=base_env(FOYA_FAILPOINT="restore_staged:2"))
            with crashing.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                connection = connect(client, fake)["id"]
                s = Agent(Served(crashing, data_dir), fake, client, connection).session()
                put(s.workspace / "one.txt", LINES)
                put(s.workspace / "two.txt", LINES, 0o600)
                put(s.workspace / USERS, "a near miss of our naming: never deleted\n")
                turn(
                    s,
                    write("made.txt", "new\n"),
                    edit("one.txt", "line 1", "ONE", "e1"),
                    edit("two.txt", "line 2", "TWO", "e2"),
                )
                after = snapshot(s.workspace)
                seq = user_seqs(s)[0]
                with pytest.raises(httpx.TransportError):
                    confirm_call(s, seq, preview(s, seq))
            assert crashing.wait_exit(BOUND) == 137, crashing.describe()
            left = [n for n in strays(s.workspace) if n != USERS]
            assert len(left) == 1 and left[0].startswith((".one.txt.", ".two.txt.")), left
            assert journal_rows(data_dir) == (1, 3)

            restarted = launcher(args, uds=sock)
            with restarted.client() as client:
                s = Session(Agent(Served(restarted, data_dir), fake, client, connection), s.row)
                assert snapshot(s.workspace) == after, "rolled back to before the rewind"
                assert strays(s.workspace) == [USERS]
                assert journal_rows(data_dir) == (0, 0)
                done = [e for e in restarted.logs() if e.get("event") == "recovery done"]
                assert done[-1]["temp_files_removed"] == 1, done
                foya_check(data_dir)
        finally:
            launcher.close()


# ------------------------------------------------------------------------------------ backup


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"

    async def fill(store: Store) -> None:
        await store.create_session(session_row("s" * 24, title="t"))
        await store.append(EventDraft("s" * 24, SESSION_UPDATED, {"id": "s" * 24}))

    seed_store(data, fill)
    return data


def backup(data: Path, dest: Path, home: Path, **env: str) -> int:
    done = run_foya(
        "backup", str(dest), "--data-dir", str(data), env=base_env(HOME=str(home), **env)
    )
    return done.returncode


def test_a_killed_backup_is_cleaned_up_by_the_next_one(data: Path, tmp_path: Path) -> None:
    out, home = tmp_path / "out", tmp_path / "home"
    out.mkdir()
    assert backup(data, out, home, FOYA_FAILPOINT="backup_written:1") == 137
    killed = strays(out)
    assert len(killed) == 2 and killed[0].endswith(".tar.partial"), killed
    assert (out / killed[1] / "foya.db").is_file(), "the scratch dir holds a database copy"

    mine = [".foya-backup-notes.partial", "mine.tar.partial", ".foya-backup-x.tar.partial.d"]
    for name in mine:
        (out / name).write_text("a user's file\n")
    running = out / ".foya-backup-20200101T000000Z.tar.partial"
    running.write_bytes(b"being written")
    (out / f"{running.name}.d").mkdir()
    fd = os.open(running, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a backup still running holds it
        assert backup(data, out, home) == 0
    finally:
        os.close(fd)
    names = sorted(p.name for p in out.iterdir())
    archives = [n for n in names if n.startswith("foya-backup-") and n.endswith(".tar")]
    assert len(archives) == 1, names
    assert sorted(set(names) - set(archives)) == sorted([*mine, running.name, f"{running.name}.d"])


def test_a_killed_backup_to_a_named_file_can_simply_be_run_again(
    data: Path, tmp_path: Path
) -> None:
    dest, home = tmp_path / "nightly.tar", tmp_path / "home"
    assert backup(data, dest, home, FOYA_FAILPOINT="backup_written:1") == 137
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".nightly")) == [
        ".nightly.tar.partial",
        ".nightly.tar.partial.d",
    ]
    assert backup(data, dest, home) == 0
    assert dest.is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".nightly")]
