"""File review through a real kernel.

The fake provider makes the agent write, edit and delete files in the session's workspace; the
test then plays the user: it lists the pending changes, edits files by hand, and keeps or undoes
them. Files are checked on disk byte for byte with their modes, events on the SSE stream and in
the database (read-only), and every refused call must leave files and listing as they were.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import Agent, Session, agent_kernel, answer, finish, text
from support.fake_provider import usage as usage_chunk
from support.fake_provider import wait as wait_for
from support.files_helpers import (
    LINES,
    delete,
    edit,
    put,
    rel,
    resolve,
    resolve_call,
    review,
    review_url,
    snapshot,
    stored_kinds,
    turn,
    write,
)
from support.streams_helpers import assert_error

RESOLVED = "file_review_resolved"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("review")) as agent:
        yield agent


@pytest.fixture
def s(agent: Agent) -> Session:
    return agent.session("full_access")


def unchanged(s: Session, files: dict[str, tuple[bytes, int]], listed: dict[str, object]) -> None:
    """A refused call left the files, the listing and the event log alone."""
    assert snapshot(s.workspace) == files
    assert review(s) == listed
    assert stored_kinds(s.agent.data_dir, s.id, RESOLVED) == []


# ------------------------------------------------------------------------------------- listing


def test_one_ready_file_keep_resolves_and_the_list_empties(s: Session) -> None:
    """Reference acceptance: one ready file; keep → resolved and the list empties; bad action
    → 400."""
    turn(s, write("notes.md", "# Notes\n"))
    listed = review(s)
    [entry] = listed["files"]
    assert entry["status"] == "ready" and entry["path"].endswith("/notes.md")
    assert (entry["additions"], entry["deletions"]) == (1, 0)
    before = snapshot(s.workspace)

    for bad in ("redo", "", "KEEP"):
        assert_error(resolve_call(s, bad, listed), 400, "invalid_action")
    unchanged(s, before, listed)

    with s.events() as events:
        resolve(s, "keep", listed)
        frame = events.until_kind(RESOLVED)[-1]
    assert frame.data["payload"] == {"action": "kept", "through_seq": listed["through_seq"]}
    assert stored_kinds(s.agent.data_dir, s.id, RESOLVED) == [frame.data["payload"]]
    assert review(s)["files"] == []
    assert snapshot(s.workspace) == before, "keep never touches a file"


def test_the_listing_has_one_entry_per_path_with_what_the_agent_did(s: Session) -> None:
    put(s.workspace / "edit.txt", "alpha\nbeta\ngamma\n")
    put(s.workspace / "tool.sh", "#!/bin/sh\necho hi\n", 0o755)
    turn(s, write("src/new.py", "a = 1\n", "w1"), edit("edit.txt", "beta", "BETA"))
    turn(
        s,
        edit("src/new.py", "a = 1", "a = 2\nb = 3", "e2"),  # the same path again
        delete("tool.sh"),
    )
    listed = review(s)
    files = rel(s, listed["files"])
    assert list(files) == ["src/new.py", "edit.txt", "tool.sh"], "one per path, first change first"
    assert {f["status"] for f in files.values()} == {"ready"}
    assert len({f["key"] for f in files.values()}) == 3

    new = files["src/new.py"]  # before the first change → after the last one
    assert new["diff"].startswith("--- /dev/null\n+++ ")
    assert "+a = 2\n+b = 3\n" in new["diff"] and "a = 1" not in new["diff"]
    assert (new["additions"], new["deletions"]) == (2, 0)
    edited = files["edit.txt"]
    assert "-beta\n+BETA\n" in edited["diff"] and " alpha\n" in edited["diff"]
    assert (edited["additions"], edited["deletions"]) == (1, 1)
    gone = files["tool.sh"]
    assert "\n+++ /dev/null\n" in gone["diff"] and "-echo hi\n" in gone["diff"]
    assert (gone["additions"], gone["deletions"]) == (0, 2)

    tool_seqs = [m["event_seq"] for m in s.history() if m.get("file_change")]
    assert listed["through_seq"] == max(tool_seqs)
    assert len(listed["file_state_token"]) == 64


# ---------------------------------------------------------------------------------------- undo


def test_undo_restores_every_file_byte_for_byte_with_its_mode(s: Session) -> None:
    put(s.workspace / "run.sh", "#!/bin/sh\nexit 0\n", 0o755)
    put(s.workspace / "secret.bin", b"\x00\xffkey\x80\n", 0o600)
    put(s.workspace / "conf.ini", "[a]\nx = 1\n", 0o640)
    original = snapshot(s.workspace)
    turn(
        s,
        write("deep/dir/created.txt", "new\n", "w1"),
        edit("run.sh", "exit 0", "exit 1"),
        delete("secret.bin"),
        write("conf.ini", "[a]\nx = 2\n", "w2"),
    )
    messages = s.history()
    assert snapshot(s.workspace) != original
    listed = review(s)
    assert len(listed["files"]) == 4

    with s.events() as events:
        resolve(s, "undo", listed)
        payload = events.until_kind(RESOLVED)[-1].data["payload"]
    assert snapshot(s.workspace) == original, "every file back, bytes and mode"
    assert not (s.workspace / "deep" / "dir" / "created.txt").exists()
    assert payload["action"] == "undone" and payload["through_seq"] == listed["through_seq"]
    assert {f["path"]: f["action"] for f in payload["files"]} == {
        f["path"]: "restored" for f in listed["files"]
    }
    assert review(s)["files"] == []
    assert s.history() == messages, "undo never changes the history"
    foya_check(s.agent.data_dir)


def test_undo_after_a_keep_only_takes_back_what_came_since(s: Session) -> None:
    turn(s, write("a.txt", "one\n"))
    resolve(s, "keep", review(s))
    after_keep = snapshot(s.workspace)
    turn(s, edit("a.txt", "one", "two"), write("b.txt", "bee\n"))
    files = rel(s, review(s)["files"])
    assert list(files) == ["a.txt", "b.txt"]
    assert "-one\n+two\n" in files["a.txt"]["diff"], "the kept creation is not shown again"
    resolve(s, "undo", review(s))
    assert snapshot(s.workspace) == after_keep
    assert (s.workspace / "a.txt").read_text() == "one\n"


def test_a_hand_edit_is_merged_or_left_alone(s: Session) -> None:
    put(s.workspace / "clash.txt", LINES)
    put(s.workspace / "merge.txt", LINES)
    turn(
        s,
        edit("clash.txt", "line 2\n", "agent 2\n", "e1"),
        edit("merge.txt", "line 2\n", "agent 2\n", "e2"),
    )
    # By hand: the same line the agent changed in one file, a distant one in the other.
    clashed = LINES.replace("line 2\n", "mine 2\n")
    put(s.workspace / "clash.txt", clashed)
    put(s.workspace / "merge.txt", LINES.replace("line 2\n", "agent 2\n").replace("7", "7 mine"))
    listed = review(s)
    files = rel(s, listed["files"])
    assert files["clash.txt"]["status"] == "modified"
    assert files["merge.txt"]["status"] == "mergeable"
    assert "-line 2\n+agent 2\n" in files["merge.txt"]["diff"], "the diff is the agent's change"

    with s.events() as events:
        resolve(s, "undo", listed)
        payload = events.until_kind(RESOLVED)[-1].data["payload"]
    assert {k: f["action"] for k, f in rel(s, payload["files"]).items()} == {
        "clash.txt": "kept",
        "merge.txt": "merged",
    }
    assert (s.workspace / "clash.txt").read_text() == clashed, "a modified file is left alone"
    assert (s.workspace / "merge.txt").read_text() == LINES.replace("7", "7 mine")
    assert review(s)["files"] == []


def test_undo_across_a_hand_edit_takes_out_only_the_agents_changes(s: Session) -> None:
    """The agent edits a file, the user another line by hand, the agent edits again.
    Undo reverses each of the agent's changes around the user's line, which stays; a hand edit
    of a line the agent had changed makes that file `modified`, and it is left alone."""
    put(s.workspace / "mixed.txt", LINES, 0o640)
    put(s.workspace / "clash.txt", LINES)
    turn(
        s,
        edit("mixed.txt", "line 2\n", "agent 2\n", "e1"),
        edit("clash.txt", "line 2\n", "agent 2\n", "e2"),
    )
    agent_once = LINES.replace("line 2\n", "agent 2\n")
    put(s.workspace / "mixed.txt", agent_once.replace("line 5\n", "user 5\n"), 0o640)
    clashed = agent_once.replace("agent 2\n", "user 2\n")  # the agent's own line, by hand
    put(s.workspace / "clash.txt", clashed)
    turn(
        s,
        edit("mixed.txt", "line 8\n", "agent 8\n", "e3"),
        edit("clash.txt", "line 8\n", "agent 8\n", "e4"),
    )
    listed = review(s)
    files = rel(s, listed["files"])
    assert {k: f["status"] for k, f in files.items()} == {
        "mixed.txt": "mergeable",
        "clash.txt": "modified",
    }
    # The listing still shows what the agent's changes amount to, first before → last after.
    assert "-line 2\n+agent 2\n" in files["mixed.txt"]["diff"]
    assert "-line 8\n+agent 8\n" in files["mixed.txt"]["diff"]
    clash_now = (s.workspace / "clash.txt").read_bytes()

    with s.events() as events:
        resolve(s, "undo", listed)
        payload = events.until_kind(RESOLVED)[-1].data["payload"]
    assert {k: f["action"] for k, f in rel(s, payload["files"]).items()} == {
        "mixed.txt": "merged",
        "clash.txt": "kept",
    }
    mixed = s.workspace / "mixed.txt"
    assert mixed.read_text() == LINES.replace("line 5\n", "user 5\n"), "only the agent's out"
    assert mixed.stat().st_mode & 0o777 == 0o640
    assert (s.workspace / "clash.txt").read_bytes() == clash_now, "a modified file is left alone"
    assert review(s)["files"] == []


def test_forced_keys_restore_modified_files(s: Session) -> None:
    put(s.workspace / "edited.txt", LINES, 0o600)
    put(s.workspace / "removed.txt", LINES, 0o640)
    original = snapshot(s.workspace)
    turn(
        s,
        edit("edited.txt", "line 4\n", "agent 4\n", "e1"),
        edit("removed.txt", "line 4\n", "agent 4\n", "e2"),
    )
    put(s.workspace / "edited.txt", "rewritten by hand\n", 0o600)
    (s.workspace / "removed.txt").unlink()
    listed = review(s)
    files = rel(s, listed["files"])
    assert {k: f["status"] for k, f in files.items()} == {
        "edited.txt": "modified",
        "removed.txt": "modified",
    }
    before = snapshot(s.workspace)
    assert_error(resolve_call(s, "undo", listed, force=["0123456789abcdef"]), 400, "bad_request")
    unchanged(s, before, listed)

    keys = [f["key"] for f in files.values()]
    with s.events() as events:
        resolve(s, "undo", listed, force=keys)
        payload = events.until_kind(RESOLVED)[-1].data["payload"]
    assert {f["action"] for f in payload["files"]} == {"force_restored"}
    assert snapshot(s.workspace) == original


# -------------------------------------------------------------------------------------- errors


def test_a_change_after_the_listing_is_409_file_review_changed(s: Session) -> None:
    turn(s, write("a.txt", "a\n"))
    listed = review(s)
    turn(s, write("b.txt", "b\n"))
    now = review(s)
    assert now["through_seq"] > listed["through_seq"]
    files = snapshot(s.workspace)
    for action in ("keep", "undo"):
        assert_error(resolve_call(s, action, listed), 409, "file_review_changed")
    unchanged(s, files, now)


def test_a_file_touched_after_the_listing_is_409_file_state_changed(s: Session) -> None:
    turn(s, write("a.txt", "a\n"), write("b.txt", "b\n", "w2"))
    listed = review(s)
    put(s.workspace / "a.txt", "a\nand more\n")
    files = snapshot(s.workspace)
    now = review(s)
    for action in ("keep", "undo"):
        assert_error(resolve_call(s, action, listed), 409, "file_state_changed")
    unchanged(s, files, now)
    listed = review(s)
    (s.workspace / "b.txt").chmod(0o600)  # a mode change alone counts too
    files = snapshot(s.workspace)
    assert_error(resolve_call(s, "undo", listed), 409, "file_state_changed")
    assert snapshot(s.workspace) == files


def test_nothing_pending_is_409(s: Session) -> None:
    empty = review(s)
    assert empty["files"] == [] and empty["through_seq"] == 0
    for action in ("keep", "undo"):
        assert_error(resolve_call(s, action, empty), 409, "no_pending_file_changes")
    turn(s, write("a.txt", "a\n"))
    listed = review(s)
    resolve(s, "keep", listed)
    assert_error(resolve_call(s, "keep", listed), 409, "no_pending_file_changes")
    assert_error(resolve_call(s, "undo", listed), 409, "no_pending_file_changes")
    assert (s.workspace / "a.txt").read_text() == "a\n"
    assert len(stored_kinds(s.agent.data_dir, s.id, RESOLVED)) == 1


def test_undo_while_a_turn_runs_is_409_session_busy(agent: Agent, s: Session) -> None:
    turn(s, write("a.txt", "a\n"))
    listed = review(s)
    files = snapshot(s.workspace)
    gate = agent.fake.gate()
    s.push([text("thinking "), wait_for(gate), text("done."), usage_chunk(), finish()])
    with s.events() as events:
        s.submit("and now?")
        events.until_kind("message_delta")
        assert_error(resolve_call(s, "undo", listed), 409, "session_busy")
        unchanged(s, files, listed)
        gate.set()
        events.until_kind("turn_complete")
    resolve(s, "undo", listed)  # the same listing is fine once the turn is over
    assert not (s.workspace / "a.txt").exists()


def test_malformed_requests_and_unknown_sessions(agent: Agent, s: Session) -> None:
    turn(s, write("a.txt", "a\n"))
    listed = review(s)
    files = snapshot(s.workspace)
    url = review_url(s)
    for body in (
        {"action": "keep"},
        {"action": "keep", "expected_through_seq": listed["through_seq"]},
        {**{"action": "keep", "expected_file_state": "x", "expected_through_seq": 1}, "x": 1},
    ):
        assert_error(agent.client.post(url, json=body), 400, "bad_request")
    unchanged(s, files, listed)
    assert_error(agent.client.get("/sessions/nope/file-review"), 404, "not_found")
    body = {"action": "keep", "expected_through_seq": 1, "expected_file_state": "x"}
    assert_error(agent.client.post("/sessions/nope/file-review", json=body), 404, "not_found")


def test_plain_turns_leave_nothing_to_review(s: Session) -> None:
    s.turn(answer("Nothing to change."))
    assert review(s)["files"] == []
