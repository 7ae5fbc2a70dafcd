"""The agent's tools through real turns.

The fake provider asks for tool calls; the kernel runs them in the session's workspace
(`<data-dir>/workspaces/<session>`) with `full_access`, so no approval gets in the way. Results
are read from `tool_end` events, the stored history and, for file changes, the database
(read-only, next to the running kernel) and `foya check`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import (
    BOUND,
    Agent,
    Session,
    agent_kernel,
    answer,
    call,
    only,
    payloads,
    tools,
)
from support.helpers import wait_until
from support.streams_helpers import assert_error

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("tools")) as agent:
        yield agent


@pytest.fixture
def s(agent: Agent) -> Session:
    return agent.session("full_access")


def run(s: Session, name: str, **arguments: Any) -> dict[str, Any]:
    """One tool call in a turn; its `tool_end` payload."""
    frames = s.tool_turn(call("t1", name, arguments))
    assert only(frames, "turn_complete")["status"] == "completed"
    return dict(only(frames, "tool_end"))


def tool_message(s: Session, call_id: str = "t1") -> dict[str, Any]:
    return next(m for m in reversed(s.history()) if m.get("tool_call_id") == call_id)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def db(agent: Agent) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{agent.data_dir / 'foya.db'}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


# -------------------------------------------------------------------------------------- bash


def test_bash_runs_in_the_workspace(s: Session) -> None:
    end = run(s, "bash", command="pwd; ls")
    assert not end.get("is_error")
    lines = end["output"].splitlines()
    assert Path(lines[0]).resolve() == s.workspace.resolve()
    assert end["output"].endswith("[exit code 0]")


def test_bash_non_zero_exit_is_an_error(s: Session) -> None:
    end = run(s, "bash", command="echo oops >&2; exit 3")
    assert end["is_error"] is True
    assert "oops" in end["output"] and "[exit code 3]" in end["output"]
    assert tool_message(s)["is_error"] is True


def alive(pid: int) -> bool:
    """Whether `pid` is a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_bash_timeout_kills_the_whole_process_group(s: Session) -> None:
    command = "sleep 300 & echo $! > child.pid; echo started; wait"
    end = run(s, "bash", command=command, timeout=1)
    assert end["is_error"] is True
    assert "started" in end["output"] and "timeout" in end["output"]
    pid = int((s.workspace / "child.pid").read_text())
    wait_until(lambda: not alive(pid), f"the sleep child {pid} to be killed", BOUND)


def test_bash_output_is_capped_at_one_mebibyte(s: Session) -> None:
    end = run(s, "bash", command="head -c 3000000 /dev/zero | tr '\\0' a; echo; echo tail")
    output = end["output"]
    assert output.split("\n", 1)[0] == "a" * MIB
    assert "tail" not in output
    assert f"[output truncated at {MIB} bytes]" in output
    assert len(output) < MIB + 200
    assert not end.get("is_error")


def test_bash_bad_arguments_are_tool_errors(s: Session) -> None:
    assert run(s, "bash", command="   ")["is_error"] is True
    assert run(s, "bash", command="true", timeout=0)["is_error"] is True


def test_a_running_tool_can_be_cancelled_and_the_turn_goes_on(agent: Agent, s: Session) -> None:
    s.push(tools(call("slow", "bash", {"command": "sleep 300"})), answer("Stopped it."))
    with s.events() as events:
        s.submit()
        events.until_kind("tool_update")
        path = f"/sessions/{s.id}/tools/slow/cancel"
        codes: list[int] = []

        def cancelled() -> bool:
            codes.append(agent.client.post(path).status_code)
            return codes[-1] == 204

        wait_until(cancelled, "the tool cancel to be accepted", BOUND)
        assert set(codes) <= {204, 409}
        frames = events.until_kind("turn_complete")
    end = only(frames, "tool_end")
    assert end["id"] == "slow" and end["is_error"] is True
    assert "cancel" in end["output"]
    assert only(frames, "turn_complete")["status"] == "completed"
    assert payloads(frames, "message_end")[-1]["content"] == "Stopped it."


def test_cancelling_a_tool_that_is_not_running_is_409(agent: Agent, s: Session) -> None:
    response = agent.client.post(f"/sessions/{s.id}/tools/nope/cancel")
    assert_error(response, 409, "tool_not_running")


# -------------------------------------------------------------------------------------- read


def test_read_whole_file_and_line_ranges(s: Session) -> None:
    (s.workspace / "lines.txt").write_text("one\ntwo\nthree\nfour\n")
    assert run(s, "read", path="lines.txt")["output"] == "one\ntwo\nthree\nfour\n"
    assert run(s, "read", path="lines.txt", offset=2, limit=2)["output"] == "two\nthree\n"
    assert run(s, "read", path="./sub/../lines.txt", offset=4)["output"] == "four\n"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("missing.txt", None, "does not exist"),
        ("binary.bin", b"\xff\xfe\x00\x81", "UTF-8"),
        ("adir", "dir", "not a regular file"),
    ],
)
def test_read_errors(s: Session, name: str, content: Any, expected: str) -> None:
    if content == "dir":
        (s.workspace / name).mkdir()
    elif content is not None:
        (s.workspace / name).write_bytes(content)
    end = run(s, "read", path=name)
    assert end["is_error"] is True and expected in end["output"], end


# ---------------------------------------------------------------------------- write and edit


def test_write_creates_then_overwrites_and_records_changes(agent: Agent, s: Session) -> None:
    created = run(s, "write", path="deep/dir/new.txt", content="hello\n")
    target = s.workspace / "deep" / "dir" / "new.txt"
    assert target.read_text() == "hello\n"
    assert not created.get("is_error") and "created" in created["output"]
    assert "+hello" in created["diff"]
    first = tool_message(s)["file_change"]
    assert first["path"] == str(target.resolve())
    assert first["before_exists"] is False and first["before_blob"] is None
    assert first["after_blob"] == sha(b"hello\n")
    assert first["after_mode"] == 0o644

    target.chmod(0o600)
    updated = run(s, "write", path="deep/dir/new.txt", content="bye\n")
    assert "updated" in updated["output"]
    assert "-hello" in updated["diff"] and "+bye" in updated["diff"]
    assert target.read_text() == "bye\n"
    assert target.stat().st_mode & 0o777 == 0o600, "the file keeps its mode"
    second = tool_message(s)["file_change"]
    assert second["before_exists"] is True
    assert second["before_blob"] == sha(b"hello\n") and second["after_blob"] == sha(b"bye\n")
    assert second["before_mode"] == second["after_mode"] == 0o600
    assert tool_message(s)["diff"] == updated["diff"]

    with db(agent) as conn:
        blobs = dict(conn.execute("SELECT hash, raw_size FROM file_blobs").fetchall())
        rows = conn.execute(
            "SELECT path, before_exists, before_blob_hash, after_blob_hash FROM file_changes"
            " WHERE session_id = ? ORDER BY event_seq",
            (s.id,),
        ).fetchall()
    assert blobs[sha(b"hello\n")] == 6 and blobs[sha(b"bye\n")] == 4
    assert rows == [
        (str(target.resolve()), 0, None, sha(b"hello\n")),
        (str(target.resolve()), 1, sha(b"hello\n"), sha(b"bye\n")),
    ]


def test_edit_replaces_a_unique_string(s: Session) -> None:
    path = s.workspace / "code.py"
    path.write_text("x = 1\ny = 2\n")
    end = run(s, "edit", path="code.py", old_string="y = 2", new_string="y = 3")
    assert not end.get("is_error")
    assert path.read_text() == "x = 1\ny = 3\n"
    assert "-y = 2" in end["diff"] and "+y = 3" in end["diff"]
    change = tool_message(s)["file_change"]
    assert change["before_blob"] == sha(b"x = 1\ny = 2\n")
    assert change["after_blob"] == sha(b"x = 1\ny = 3\n")


def test_edit_refuses_an_ambiguous_or_missing_string(s: Session) -> None:
    path = s.workspace / "twice.txt"
    path.write_text("a\na\n")
    ambiguous = run(s, "edit", path="twice.txt", old_string="a", new_string="b")
    assert ambiguous["is_error"] is True and "2 times" in ambiguous["output"]
    assert "file_change" not in tool_message(s) and "diff" not in ambiguous
    missing = run(s, "edit", path="twice.txt", old_string="zzz", new_string="b")
    assert missing["is_error"] is True and "not found" in missing["output"]
    assert path.read_text() == "a\na\n"
    every = run(s, "edit", path="twice.txt", old_string="a", new_string="b", replace_all=True)
    assert not every.get("is_error") and "2 replacement" in every["output"]
    assert path.read_text() == "b\nb\n"
    absent = run(s, "edit", path="nothing.txt", old_string="a", new_string="b")
    assert absent["is_error"] is True


# ------------------------------------------------------------------------------------ delete


def test_delete_moves_the_file_to_the_trash(agent: Agent, s: Session) -> None:
    victim = s.workspace / "victim.txt"
    data = f"unique {time.time_ns()}\n".encode()
    victim.write_bytes(data)
    end = run(s, "delete", path="victim.txt")
    assert not end.get("is_error") and "trash" in end["output"]
    assert not victim.exists()
    trash = agent.data_dir / "trash"
    moved = [p for p in trash.iterdir() if p.name.endswith("-victim.txt")]
    assert [p.read_bytes() for p in moved] == [data]
    change = tool_message(s)["file_change"]
    assert change["before_exists"] is True and change["before_blob"] == sha(data)
    assert change["after_blob"] is None and change["after_mode"] is None
    assert "-unique" in end["diff"]
    with db(agent) as conn:
        stored = conn.execute("SELECT raw_size FROM file_blobs WHERE hash = ?", (sha(data),))
        assert stored.fetchone() == (len(data),)


@pytest.mark.parametrize("protected", [".git", ".foya", ".agents"])
def test_delete_refuses_protected_directories(s: Session, protected: str) -> None:
    target = s.workspace / protected / "config"
    target.parent.mkdir()
    target.write_text("keep me")
    end = run(s, "delete", path=f"{protected}/config")
    assert end["is_error"] is True and "protected" in end["output"]
    assert target.read_text() == "keep me"
    assert "file_change" not in tool_message(s)


def test_delete_through_a_symlink_never_touches_a_protected_target(s: Session) -> None:
    (s.workspace / ".git").mkdir()
    (s.workspace / ".git" / "HEAD").write_text("ref")
    os.symlink(".git/HEAD", s.workspace / "innocent")
    end = run(s, "delete", path="innocent")
    assert end.get("is_error") is not True  # the link itself goes to the trash
    assert not (s.workspace / "innocent").is_symlink()
    assert (s.workspace / ".git" / "HEAD").read_text() == "ref"


def test_delete_of_a_missing_file_is_an_error(s: Session) -> None:
    assert run(s, "delete", path="ghost.txt")["is_error"] is True


# --------------------------------------------------------------------------------- the store


def test_the_store_stays_consistent_after_file_tools(agent: Agent, s: Session) -> None:
    run(s, "write", path="c.txt", content="1\n")
    run(s, "edit", path="c.txt", old_string="1", new_string="2")
    run(s, "delete", path="c.txt")
    changes = [m["file_change"] for m in s.history() if m.get("file_change")]
    hashes = {h for c in changes for h in (c["before_blob"], c["after_blob"]) if h}
    assert hashes == {sha(b"1\n"), sha(b"2\n")}
    with db(agent) as conn:
        found = {
            h
            for (h,) in conn.execute(
                f"SELECT hash FROM file_blobs WHERE hash IN ({','.join('?' * len(hashes))})",
                sorted(hashes),
            )
        }
        count = conn.execute(
            "SELECT COUNT(*) FROM file_changes WHERE session_id = ?", (s.id,)
        ).fetchone()[0]
    assert found == hashes
    assert count == 3
    foya_check(agent.data_dir)


def test_deleting_a_symlink_never_removes_its_target(s: Session) -> None:
    """`delete alias` where alias → target.txt: like `rm alias`, the link may go (or the call
    may be refused), but the file it points to must stay where it is."""
    target = s.workspace / "target.txt"
    target.write_text("precious")
    os.symlink("target.txt", s.workspace / "alias")
    run(s, "delete", path="alias")
    assert target.exists() and target.read_text() == "precious"


def test_protection_looks_inside_the_workspace_only(
    agent: Agent, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A project that happens to live below a directory named `.agents` (or `.foya`, `.git`):
    its ordinary files are not protected; only those directories inside it are."""
    root = tmp_path_factory.mktemp("proj") / ".agents" / "project"
    root.mkdir(parents=True)
    response = agent.client.post("/projects", json={"path": str(root)})
    assert response.status_code == 201, response.text
    s = agent.session("full_access", project_id=response.json()["id"])
    (root / "old.txt").write_text("bye")
    end = run(s, "delete", path="old.txt")
    assert not end.get("is_error"), end["output"]
    assert not (root / "old.txt").exists()
