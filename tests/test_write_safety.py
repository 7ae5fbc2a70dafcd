"""File tools never destroy a file half-way, and never leave a change unrecorded.

A write or edit goes to a temp file in the same directory, is fsynced and renamed over the
target; before the rename the kernel stores the before- and after-image in a durable journal,
which the tool's `message_end` forgets in its own transaction. The tests make real failures
happen: a file-size limit (`RLIMIT_FSIZE`, set on a real kernel with `prlimit`; Python ignores
SIGXFSZ, so the write fails with EFBIG half-way) and `kill -9` at exact instants
(`FOYA_FAILPOINT`, app/failpoints.py) between the rename and the commit, or before the rename.
Tool-level tests (umask, ownership) run the tools in a subprocess or in process on real files.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import (
    BOUND,
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    Session,
    agent_kernel,
    answer,
    call,
    connect,
    only,
    tools,
)
from support.files_helpers import count, delete, edit, journal_rows, put, snapshot, write
from support.helpers import REPO, Launcher, base_env, short_tmpdir
from support.streams_helpers import Served

from app.tools.base import FileIntent, ToolContext
from app.tools.files import Edit, Write

MIB = 1024 * 1024


def temps(directory: Path) -> list[str]:
    """Temp files of our atomic writes (`.<name>.foya-<hex>.tmp`) in `directory`."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def file_changes(data_dir: Path, session: str) -> int:
    return count(data_dir, "SELECT COUNT(*) FROM file_changes WHERE session_id = ?", session)


# --------------------------------------------------------------------- a write failing half-way


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Agent]:
    with agent_kernel(tmp_path) as agent:
        yield agent


def test_an_edit_that_hits_the_file_size_limit_leaves_the_old_file_whole(limited: Agent) -> None:
    """The kernel may write at most 4 MiB per file; the agent's edit would make a 3 MiB file
    12 MiB. The write fails half-way (EFBIG): the old content and mode are intact, no temp file
    is left, nothing is recorded and no journal stays behind."""
    s = limited.session("full_access")
    path = s.workspace / "big.txt"
    original = b"a" * (3 * MIB)
    put(path, original, 0o640)
    limit = 4 * MIB
    resource.prlimit(limited.served.kernel.pid, resource.RLIMIT_FSIZE, (limit, limit))
    grow = {"path": "big.txt", "old_string": "a", "new_string": "bbbb", "replace_all": True}
    frames = s.tool_turn(call("e1", "edit", grow))
    end = only(frames, "tool_end")
    assert end["is_error"] is True and "File too large" in end["output"], end
    assert path.read_bytes() == original
    assert path.stat().st_mode & 0o777 == 0o640
    assert temps(s.workspace) == []
    assert file_changes(limited.data_dir, s.id) == 0
    assert journal_rows(limited.data_dir) == (0, 0)


def _run_tool_in_subprocess(script: str, **popen: Any) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **popen,
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


def test_a_write_tool_that_fails_half_way_keeps_the_old_file(tmp_path: Path) -> None:
    """The `write` tool itself, in a process limited to 1 MiB per file: writing 2 MiB over a
    small file fails with EFBIG and the small file is exactly as before."""
    target = tmp_path / "notes.txt"
    put(target, "keep me\n", 0o600)
    out = _run_tool_in_subprocess(
        f"""
        import asyncio, resource
        from pathlib import Path
        from app.tools.base import ToolContext
        from app.tools.files import Write
        resource.setrlimit(resource.RLIMIT_FSIZE, ({MIB}, {MIB}))  # SIGXFSZ: ignored by Python
        ctx = ToolContext(Path({str(tmp_path)!r}), Path({str(tmp_path / "trash")!r}))
        try:
            asyncio.run(Write().run({{"path": "notes.txt", "content": "x" * {2 * MIB}}}, ctx))
        except OSError as exc:
            print("failed", exc.errno)
        """
    )
    assert out.split() == ["failed", "27"]  # EFBIG
    assert target.read_bytes() == b"keep me\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert temps(tmp_path) == []


# ------------------------------------------------------------------------- modes and ownership


def test_a_new_file_gets_the_umask_mode_and_an_existing_one_keeps_its_mode(
    tmp_path: Path,
) -> None:
    """Under umask 027 a new file is 0640 (not a forced 0644), and the recorded after-mode says
    so; an existing 0600 file stays 0600."""
    put(tmp_path / "old.txt", "old\n", 0o600)
    out = _run_tool_in_subprocess(
        f"""
        import asyncio
        from pathlib import Path
        from app.tools.base import ToolContext
        from app.tools.files import Write
        ctx = ToolContext(Path({str(tmp_path)!r}), Path({str(tmp_path / "trash")!r}))
        for name in ("new.txt", "old.txt"):
            done = asyncio.run(Write().run({{"path": name, "content": "hi\\n"}}, ctx))
            print(oct(done.file_change["after_mode"]))
        """,
        umask=0o027,
    )
    assert out.split() == ["0o640", "0o600"]
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "old.txt").stat().st_mode & 0o777 == 0o600


def test_an_existing_file_keeps_its_owner_and_a_link_stays_a_link(tmp_path: Path) -> None:
    """Replacing by rename makes a new inode: its owner and group are set back to the old
    file's (the suite runs as root, so another owner can be given), and a write through a
    symbolic link replaces the link's target, not the link."""
    if os.getuid() != 0:
        pytest.fail("this test needs root to give a file another owner")
    target = tmp_path / "owned.txt"
    put(target, "one\n", 0o640)
    os.chown(target, 4321, 4322)
    os.symlink("owned.txt", tmp_path / "alias")
    intents: list[FileIntent] = []

    async def intend(intent: FileIntent) -> None:
        intents.append(intent)

    ctx = ToolContext(tmp_path, tmp_path / "trash", intend)
    asyncio.run(Write().run({"path": "alias", "content": "two\n"}, ctx))
    asyncio.run(Edit().run({"path": "owned.txt", "old_string": "two", "new_string": "3"}, ctx))
    st = target.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (4321, 4322, 0o640)
    assert target.read_text() == "3\n" and (tmp_path / "alias").is_symlink()
    assert [(i.path, i.before, i.after) for i in intents] == [
        (target, b"one\n", b"two\n"),
        (target, b"two\n", b"3\n"),
    ]


# ----------------------------------------------------------------------------------- kill -9


@pytest.mark.parametrize(
    ("killed", "point"),
    [
        ("write", "tool_file_changed"),
        ("edit", "tool_file_changed"),
        ("delete", "tool_file_changed"),
        ("write", "tool_write_staged"),
    ],
)
def test_a_crash_before_the_change_is_recorded_is_rolled_back(
    tmp_path: Path, killed: str, point: str
) -> None:
    """Three file tool calls in one step; the kernel is killed as the third changes its file:
    after the rename (`tool_file_changed`: the file is the after-image, no event records it) or
    just before it (`tool_write_staged`: a complete temp file lies beside the target). At the
    next start the two recorded changes stay, the third file is exactly as before (content and
    mode), no temp file is left, the journal is gone and `foya check` is clean."""
    launcher = Launcher(tmp_path / "procs")
    with FakeProvider.running() as fake, short_tmpdir() as root:
        data_dir, sock = root / "k", root / "k.sock"
        args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]
        try:
            crashing = launcher(args, uds=sock, env=base_env(FOYA_FAILPOINT=f"{point}:3"))
            with crashing.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                connection = connect(client, fake)["id"]
                s = Agent(Served(crashing, data_dir), fake, client, connection).session()
                put(s.workspace / "first.txt", "first\n")
                put(s.workspace / "victim.txt", "precious\n", 0o600)
                before = snapshot(s.workspace)
                third = {
                    "write": write("victim.txt", "clobbered\n", "c3"),
                    "edit": edit("victim.txt", "precious", "changed", "c3"),
                    "delete": delete("victim.txt", "c3"),
                }[killed]
                s.push(
                    tools(
                        write("made.txt", "made\n", "c1"),
                        edit("first.txt", "first", "FIRST", "c2"),
                        third,
                    ),
                    answer("Done."),
                )
                s.submit()
            assert crashing.wait_exit(BOUND) == 137, crashing.describe()

            crashed = snapshot(s.workspace)
            assert crashed["made.txt"] == (b"made\n", 0o644)
            assert crashed["first.txt"][0] == b"FIRST\n"
            if point == "tool_file_changed":
                assert crashed.get("victim.txt") != before["victim.txt"], "really changed"
            else:
                assert crashed["victim.txt"] == before["victim.txt"]
                assert len([n for n in temps(s.workspace) if "victim.txt" in n]) == 1
            assert journal_rows(data_dir) == (1, 1)
            assert file_changes(data_dir, s.id) == 2

            restarted = launcher(args, uds=sock)
            with restarted.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                s = Session(Agent(Served(restarted, data_dir), fake, client, connection), s.row)
                after = snapshot(s.workspace)
                assert after["victim.txt"] == before["victim.txt"]
                assert after["made.txt"] == (b"made\n", 0o644)
                assert after["first.txt"][0] == b"FIRST\n"
                assert temps(s.workspace) == []
                assert journal_rows(data_dir) == (0, 0)
                assert file_changes(data_dir, s.id) == 2
                rolled = [
                    line
                    for line in restarted.logs()
                    if line.get("event") == "rolled back a tool file change that was never recorded"
                ]
                assert [r["session"] for r in rolled] == [s.id], rolled
                assert rolled[0]["path"] == str((s.workspace / "victim.txt").resolve())
                foya_check(data_dir)
                review = client.get(f"/sessions/{s.id}/file-review")
                assert review.status_code == 200, review.text
                reviewed = {Path(f["path"]).name for f in review.json()["files"]}
                assert reviewed == {"made.txt", "first.txt"}, "no hand edit to report"
        finally:
            launcher.close()
