"""Rewind through a real kernel.

The fake provider makes the agent write, edit and delete files over several turns; the test
previews and confirms rewinds, edits files by hand in between, and checks files on disk byte for
byte with their modes, the history, the SSE stream and the database (read-only). The last test
crashes a kernel half-way through a restore (`FOYA_FAILPOINT=restore_file:3`) and checks that the
next start puts every file back.
"""

from __future__ import annotations

import shutil
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
    connect,
    finish,
    text,
)
from support.fake_provider import usage as usage_chunk
from support.fake_provider import wait as wait_for
from support.files_helpers import (
    LINES,
    confirm,
    confirm_call,
    delete,
    edit,
    journal_rows,
    preview,
    put,
    rel,
    review,
    rewind_url,
    snapshot,
    stored_kinds,
    turn,
    user_seqs,
    write,
)
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import Served, assert_error

REWOUND = "history_rewound"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("rewind")) as agent:
        yield agent


@pytest.fixture
def s(agent: Agent) -> Session:
    return agent.session("full_access")


def actions(s: Session, files: list[dict[str, Any]]) -> dict[str, str]:
    return {path: f["action"] for path, f in rel(s, files).items()}


def unchanged(s: Session, files: dict[str, tuple[bytes, int]], history: list[Any]) -> None:
    """A refused rewind left files, history and the store alone."""
    assert snapshot(s.workspace) == files
    assert s.history() == history
    assert stored_kinds(s.agent.data_dir, s.id, REWOUND) == []
    assert journal_rows(s.agent.data_dir) == (0, 0)


# ---------------------------------------------------------------------------------- restoring


def test_preview_then_confirm_restores_files_and_empties_history(s: Session) -> None:
    """Reference acceptance: preview → confirmation_required; confirm → rewound, history
    emptied, files restored. Files of two turns: created, edited twice, deleted (modes kept)."""
    put(s.workspace / "edit.txt", "alpha\nbeta\n")
    put(s.workspace / "run.sh", "#!/bin/sh\nexit 0\n", 0o755)
    put(s.workspace / "id_key", b"\x00secret\xff\n", 0o600)
    original = snapshot(s.workspace)
    turn(s, write("pkg/new.py", "x = 1\n"), edit("edit.txt", "beta", "BETA"), message="first")
    turn(
        s,
        edit("edit.txt", "alpha", "ALPHA"),
        delete("run.sh", "d1"),
        delete("id_key", "d2"),
        message="second",
    )
    history = s.history()
    changed = snapshot(s.workspace)

    shown = preview(s, user_seqs(s)[0])
    assert shown["message"] == "first"
    assert shown["head_seq"] == history[-1]["event_seq"]
    files = rel(s, shown["files"])
    assert list(files) == ["pkg/new.py", "edit.txt", "run.sh", "id_key"]
    assert {f["status"] for f in files.values()} == {"ready"}
    # The diff is what restoring does: current → as before the first message.
    assert files["pkg/new.py"]["diff"].endswith("+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n")
    assert (files["pkg/new.py"]["additions"], files["pkg/new.py"]["deletions"]) == (0, 1)
    assert "-ALPHA\n-BETA\n+alpha\n+beta\n" in files["edit.txt"]["diff"]
    assert files["run.sh"]["diff"].startswith("--- /dev/null\n")
    assert files["id_key"]["diff"].startswith("Binary file ")
    assert snapshot(s.workspace) == changed and s.history() == history, "a preview changes nothing"

    with s.events() as events:
        done = confirm(s, user_seqs(s)[0], shown)
        event = events.until_kind(REWOUND)[-1].data["payload"]
    assert done["message"] == "first" and done["head_seq"] == 0
    assert set(actions(s, done["files"]).values()) == {"restored"}
    assert event == {
        "target_user_seq": history[0]["event_seq"],
        "files": [{"path": f["path"], "action": "restored"} for f in shown["files"]],
    }
    assert s.history() == []
    assert snapshot(s.workspace) == original, "every file back, bytes and mode"
    assert review(s)["files"] == [], "nothing rewound is left to review"
    assert journal_rows(s.agent.data_dir) == (0, 0)


def test_rewinding_to_the_second_message_keeps_the_first_turn(s: Session) -> None:
    put(s.workspace / "c.txt", "c0\n")
    turn(
        s,
        write("a.txt", "a1\n", "w1"),
        write("b.txt", "b1\n", "w2"),
        edit("c.txt", "c0", "c1"),
        message="first",
    )
    put(s.workspace / "c.txt", "c1 and a hand edit\n")  # between the turns, by hand
    after_first = snapshot(s.workspace)
    first_turn = s.history()
    turn(
        s,
        edit("a.txt", "a1", "a2", "e1"),
        delete("b.txt"),
        edit("c.txt", "hand", "agent", "e2"),
        write("d.txt", "d2\n"),
        message="second",
    )
    second = user_seqs(s)[1]
    shown = preview(s, second)
    assert list(rel(s, shown["files"])) == ["a.txt", "b.txt", "c.txt", "d.txt"]
    done = confirm(s, second, shown)
    assert snapshot(s.workspace) == after_first, "files as they were when message 2 was sent"
    assert s.history() == first_turn
    assert done["head_seq"] == first_turn[-1]["event_seq"]
    # The first turn's changes are still pending review; the rewound ones are not.
    assert list(rel(s, review(s)["files"])) == ["a.txt", "b.txt", "c.txt"]
    # The rewound message is gone from the active history.
    assert_error(s.client.post(rewind_url(s, second)), 404, "message_not_found")
    # ...and from what the model sees next.
    s.turn(answer("OK."), message="third")
    sent = s.chats()[-1].messages
    assert [m["content"] for m in sent if m["role"] == "user"] == ["first", "third"]
    called = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert called == ["w1", "w2", "e"], "only the first turn's tool calls"
    foya_check(s.agent.data_dir)


def test_a_rewind_without_file_changes(s: Session) -> None:
    s.turn(answer("Hi."), message="one")
    s.turn(answer("Hi again."), message="two")
    kept = s.history()[:2]
    seq = user_seqs(s)[1]
    shown = preview(s, seq)
    assert shown["files"] == [] and shown["message"] == "two"
    done = confirm(s, seq, shown)
    assert done["files"] == [] and s.history() == kept
    assert stored_kinds(s.agent.data_dir, s.id, REWOUND) == [{"target_user_seq": seq}]


@pytest.mark.parametrize("forced", [False, True])
def test_a_hand_edited_file_is_modified_and_kept_unless_forced(s: Session, forced: bool) -> None:
    put(s.workspace / "hand.txt", LINES, 0o640)
    put(s.workspace / "plain.txt", LINES)
    original = snapshot(s.workspace)
    turn(s, edit("hand.txt", "line 3\n", "agent 3\n", "e1"), edit("plain.txt", "3", "three"))
    by_hand = LINES.replace("line 3\n", "user 3\n")
    put(s.workspace / "hand.txt", by_hand, 0o640)

    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    files = rel(s, shown["files"])
    assert files["hand.txt"]["status"] == "modified"
    assert files["plain.txt"]["status"] == "ready"
    assert "-user 3\n+line 3\n" in files["hand.txt"]["diff"], "what forcing would do"

    force = [files["hand.txt"]["key"]] if forced else None
    with s.events() as events:
        done = confirm(s, seq, shown, force=force)
        event = events.until_kind(REWOUND)[-1].data["payload"]
    expected = {"hand.txt": "force_restored" if forced else "kept", "plain.txt": "restored"}
    assert actions(s, done["files"]) == expected
    assert actions(s, event["files"]) == expected
    assert event["target_user_seq"] == seq
    assert (s.workspace / "plain.txt").read_text() == LINES
    if forced:
        assert snapshot(s.workspace) == original
    else:
        hand_edited = {**original, "hand.txt": (by_hand.encode(), 0o640)}
        assert snapshot(s.workspace) == hand_edited, "a hand edit is never lost"
    assert s.history() == []


def test_a_non_overlapping_hand_edit_is_merged(s: Session) -> None:
    put(s.workspace / "m.txt", LINES, 0o600)
    turn(s, edit("m.txt", "line 2\n", "agent 2\n"))
    put(s.workspace / "m.txt", LINES.replace("line 2\n", "agent 2\n") + "user 9\n", 0o600)
    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    [entry] = shown["files"]
    assert entry["status"] == "mergeable"
    assert "-agent 2\n+line 2\n" in entry["diff"]
    assert "-user 9" not in entry["diff"] and "+user 9" not in entry["diff"]
    done = confirm(s, seq, shown)
    assert [f["action"] for f in done["files"]] == ["merged"]
    assert (s.workspace / "m.txt").read_text() == LINES + "user 9\n", "agent's change out, ours in"
    assert (s.workspace / "m.txt").stat().st_mode & 0o777 == 0o600


def test_a_hand_edit_touching_the_agents_line_is_merged(s: Session) -> None:
    """The agent changes line 2, the user then line 1. The hunks touch but do not
    overlap: `mergeable`, and confirming yields the user's line 1 with the original line 2."""
    put(s.workspace / "t.txt", LINES)
    turn(s, edit("t.txt", "line 2\n", "agent 2\n"))
    by_hand = LINES.replace("line 2\n", "agent 2\n").replace("line 1\n", "user 1\n")
    put(s.workspace / "t.txt", by_hand)
    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    [entry] = shown["files"]
    assert entry["status"] == "mergeable"
    assert "-agent 2\n+line 2\n" in entry["diff"] and " user 1\n" in entry["diff"]
    done = confirm(s, seq, shown)
    assert [f["action"] for f in done["files"]] == ["merged"]
    assert (s.workspace / "t.txt").read_text() == LINES.replace("line 1\n", "user 1\n")


def test_a_rewind_over_a_hand_edit_between_turns_keeps_it(s: Session) -> None:
    """A hand edit between two turns, the file then exactly as the second turn left
    it. Rewinding both turns takes out only the agent's changes (`mergeable`, not `ready`);
    CRLF lines and a missing final newline come back byte for byte."""
    crlf = "".join(f"line {i}\r\n" for i in range(1, 9)).removesuffix("\r\n")
    put(s.workspace / "w.txt", crlf, 0o600)
    turn(s, edit("w.txt", "line 2\r\n", "agent 2\r\n"), message="first")
    now = (s.workspace / "w.txt").read_bytes()
    put(s.workspace / "w.txt", now.replace(b"line 5\r\n", b"user 5\r\n"), 0o600)
    turn(s, edit("w.txt", "line 8", "agent 8"), message="second")
    first, second = user_seqs(s)

    only_second = rel(s, preview(s, second)["files"])["w.txt"]
    assert only_second["status"] == "ready", "the second turn alone: only the agent since"
    shown = preview(s, first)
    [entry] = shown["files"]
    assert entry["status"] == "mergeable"
    done = confirm(s, first, shown)
    assert [f["action"] for f in done["files"]] == ["merged"]
    expected = crlf.replace("line 5\r\n", "user 5\r\n").encode()
    assert snapshot(s.workspace) == {"w.txt": (expected, 0o600)}
    assert s.history() == []


# -------------------------------------------------------------------------- stale confirmations


def test_a_turn_between_preview_and_confirm_is_409_history_changed(s: Session) -> None:
    turn(s, write("a.txt", "a\n"))
    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    turn(s, write("b.txt", "b\n"), message="more")
    files, history = snapshot(s.workspace), s.history()
    assert_error(confirm_call(s, seq, shown), 409, "history_changed")
    unchanged(s, files, history)
    confirm(s, seq, preview(s, seq))  # a fresh preview goes through
    assert snapshot(s.workspace) == {}


def test_a_file_touched_between_preview_and_confirm_is_409_file_state_changed(
    s: Session,
) -> None:
    turn(s, write("a.txt", "a\n"), write("b.txt", "b\n", "w2"))
    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    put(s.workspace / "a.txt", "a, touched\n")
    files, history = snapshot(s.workspace), s.history()
    assert_error(confirm_call(s, seq, shown), 409, "file_state_changed")
    unchanged(s, files, history)

    shown = preview(s, seq)
    (s.workspace / "b.txt").chmod(0o600)  # a mode change alone counts too
    files = snapshot(s.workspace)
    assert_error(confirm_call(s, seq, shown), 409, "file_state_changed")
    unchanged(s, files, history)


def test_a_file_changing_during_the_restore_is_409_file_changed(s: Session) -> None:
    """Two planned paths that turn out to be one file: once `b` is a symlink to `a`, restoring
    `a/f.txt` (removing it) changes `b/f.txt` under the restore, which must notice, put back
    what it already wrote and refuse."""
    turn(s, write("a/f.txt", "same\n", "w1"), write("b/f.txt", "same\n", "w2"))
    shutil.rmtree(s.workspace / "b")
    (s.workspace / "b").symlink_to("a")
    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    assert [f["status"] for f in shown["files"]] == ["ready", "ready"]
    files, history = snapshot(s.workspace), s.history()
    assert_error(confirm_call(s, seq, shown), 409, "file_changed")
    unchanged(s, files, history)
    assert (s.workspace / "a" / "f.txt").stat().st_mode & 0o777 == 0o644
    foya_check(s.agent.data_dir)


# ------------------------------------------------------------------------------------ refusals


def test_invalid_targets_and_bodies(agent: Agent, s: Session) -> None:
    frames = turn(s, write("a.txt", "a\n"))
    history, files = s.history(), snapshot(s.workspace)
    user = user_seqs(s)[0]
    assistant = next(m["event_seq"] for m in history if m["role"] == "assistant")
    started = next(f.seq for f in frames if f.event == "turn_started")
    for seq in (0, -1):
        assert_error(s.client.post(rewind_url(s, seq)), 400, "invalid_message_seq")
    assert_error(s.client.post(rewind_url(s, assistant)), 400, "invalid_message_seq")
    assert_error(s.client.post(rewind_url(s, started)), 404, "message_not_found")
    assert_error(s.client.post(rewind_url(s, 10**9)), 404, "message_not_found")
    assert_error(agent.client.post(f"/sessions/nope/turns/{user}/rewind"), 404, "not_found")

    shown = preview(s, user)
    url = rewind_url(s, user)
    for body in (
        {"confirm": True},
        {"confirm": True, "expected_head_seq": shown["head_seq"]},
        {"confirm": True, "expected_file_state": shown["file_state_token"]},
        {"confirm": True, "bogus": 1},
    ):
        assert_error(s.client.post(url, json=body), 400, "bad_request")
    assert_error(confirm_call(s, user, shown, force=["0123456789abcdef"]), 400, "bad_request")
    unchanged(s, files, history)


def test_a_running_turn_or_queued_input_refuses_a_rewind(agent: Agent, s: Session) -> None:
    turn(s, write("a.txt", "a\n"))
    seq = user_seqs(s)[0]
    shown = preview(s, seq)
    gate = agent.fake.gate()
    s.push([text("thinking "), wait_for(gate), text("done."), usage_chunk(), finish()])
    with s.events() as events:
        s.submit("and now?")
        events.until_kind("message_delta")
        files, history = snapshot(s.workspace), s.history()
        assert_error(s.client.post(rewind_url(s, seq)), 409, "session_busy")
        assert_error(confirm_call(s, seq, shown), 409, "session_busy")
        unchanged(s, files, history)
        gate.set()
        events.until_kind("turn_complete")

    shown = preview(s, seq)
    queued = s.client.post(f"/sessions/{s.id}/queue", json={"message": "later"})
    assert queued.status_code == 201, queued.text
    files, history = snapshot(s.workspace), s.history()
    assert_error(s.client.post(rewind_url(s, seq)), 409, "queue_not_empty")
    assert_error(confirm_call(s, seq, shown), 409, "queue_not_empty")
    unchanged(s, files, history)
    assert [i["text"] for i in s.queue()] == ["later"]
    removed = s.client.delete(f"/sessions/{s.id}/queue/{queued.json()['id']}")
    assert removed.status_code == 204, removed.text
    confirm(s, seq, shown)
    assert snapshot(s.workspace) == {} and s.history() == []


# --------------------------------------------------------------------------------------- crash


def test_a_crash_half_way_is_rolled_back_at_the_next_start(tmp_path: Path) -> None:
    """The kernel dies before the 3rd of 5 files is restored. At the next start every file is
    back as it was before the rewind, the history is untouched, the journal is gone, and the
    rewind can simply be done again."""
    launcher = Launcher(tmp_path / "procs")
    with FakeProvider.running() as fake, short_tmpdir() as root:
        data_dir, sock = root / "k", root / "k.sock"
        args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]
        try:
            crashing = launcher(args, uds=sock, env=base_env(FOYA_FAILPOINT="restore_file:3"))
            with crashing.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                connection = connect(client, fake)["id"]
                s = Agent(Served(crashing, data_dir), fake, client, connection).session()
                put(s.workspace / "one.txt", LINES)
                put(s.workspace / "two.txt", LINES, 0o600)
                put(s.workspace / "tool.sh", "#!/bin/sh\necho hi\n", 0o755)
                put(s.workspace / "key.pem", "-----KEY-----\n", 0o600)
                before = snapshot(s.workspace)
                turn(
                    s,
                    write("made.txt", "new\n"),  # restored 1st: removed
                    edit("one.txt", "line 1", "ONE", "e1"),  # 2nd: back
                    edit("two.txt", "line 2", "TWO", "e2"),  # 3rd: the kernel dies first
                    delete("tool.sh", "d1"),
                    delete("key.pem", "d2"),
                )
                after = snapshot(s.workspace)
                history = s.history()
                seq = user_seqs(s)[0]
                shown = preview(s, seq)
                with pytest.raises(httpx.TransportError):
                    confirm_call(s, seq, shown)
            assert crashing.wait_exit(BOUND) == 137, crashing.describe()

            # Genuinely half-applied: the first two files restored, the other three not.
            half = snapshot(s.workspace)
            assert "made.txt" not in half and half["one.txt"] == before["one.txt"]
            for name in ("two.txt", "tool.sh", "key.pem"):
                assert half.get(name) == after.get(name), name
            assert journal_rows(data_dir) == (1, 5)
            assert stored_kinds(data_dir, s.id, REWOUND) == []
            foya_check(data_dir)  # an operator's first look: the store itself is consistent

            restarted = launcher(args, uds=sock)  # the same data dir, no failpoint
            with restarted.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                s = Session(Agent(Served(restarted, data_dir), fake, client, connection), s.row)
                assert snapshot(s.workspace) == after, "every file as before the rewind"
                assert s.history() == history
                assert stored_kinds(data_dir, s.id, REWOUND) == []
                assert journal_rows(data_dir) == (0, 0)
                rolled = [
                    line
                    for line in restarted.logs()
                    if line.get("event") == "rolled back an interrupted file restore"
                ]
                assert [(r["session"], r["files"]) for r in rolled] == [(s.id, 5)], rolled
                foya_check(data_dir)

                again = preview(s, seq)
                assert again["file_state_token"] == shown["file_state_token"]
                done = confirm(s, seq, again)
                assert set(actions(s, done["files"]).values()) == {"restored"}
                assert snapshot(s.workspace) == before
                assert s.history() == []
                assert journal_rows(data_dir) == (0, 0)
        finally:
            launcher.close()
