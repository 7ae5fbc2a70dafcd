"""Background commands (Foya's
background command manager and its `bash`, `bash_status` and `bash_cancel` tools).

Kernel rules run on a real in-process kernel with the fake provider scripting the model's tool
calls; one real `foya serve` checks the wire (routes, statuses, error codes, SSE frames, a
SIGTERM and a restart). Commands wait for a file the test creates (`go`), so nothing depends on
timing. Whether processes are gone is read from /proc: every process a command starts is in its
process group and session, both numbered by the command's PID; zombies count as gone (an
orphan here is reparented to a PID 1 that may not reap it).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.fake_provider import BOUND, FakeProvider, answer, call, connect, tools
from support.helpers import Launcher, base_env, short_tmpdir, wait_until
from support.inprocess import InProcess, inprocess_kernel
from support.streams_helpers import assert_error, open_events, unix_kernel

from app import events as k
from app.events import Event
from app.kernel.background import CommandNotFound, SessionUnknown, commands
from app.kernel.background.entry import Entry
from app.kernel.emit import topic
from app.kernel.turns.activity import ToolNotRunning
from app.kernel.turns.inputs import TurnInput
from app.tools.shell import TAIL_BYTES, TAIL_LINES, Stream

T = TypeVar("T")
GATE = "while [ ! -e go ]; do sleep 0.02; done"
FOYA_FIELDS = {
    "command_id",
    "session_id",
    "command",
    "pid",
    "running",
    "exit_code",
    "stdout",
    "stderr",
    "started_at",
    "backgrounded_by",
    "stopped_by",
}
FIELDS = FOYA_FIELDS | {"status", "completed_at"}


# ------------------------------------------------------------------------------------ helpers


def group(pid: int) -> list[int]:
    """Live processes whose process group or session is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and pid in (int(fields[2]), int(fields[3])):
                found.append(int(entry.name))
    return found


def gone(pid: int) -> None:
    wait_until(lambda: not group(pid), f"every process of command {pid} to be gone", BOUND)


_models = itertools.count()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_kernel(tmp_path_factory.mktemp("background") / "d") as rig:
        yield rig


def new_session(rig: InProcess) -> tuple[str, Path]:
    """A full-access session with a model of its own, and its (created) workspace."""
    fields = {
        "connection_id": rig.connection,
        "model": f"bg-{next(_models)}",
        "approval_mode": "full_access",
    }
    session = rig.run(rig.kernel.sessions.create(fields))
    # A manual title: the kernel asks the model for no title (no script for that).
    rig.run(rig.kernel.sessions.update(session["id"], {"title": "bg"}))
    workspace = rig.kernel.sessions.workspaces / session["id"]
    workspace.mkdir(parents=True, exist_ok=True)
    return session["id"], workspace


def model(rig: InProcess, session: str) -> str:
    return str(rig.run(rig.kernel.sessions.row(session))["model"])


def watch(
    rig: InProcess,
    session: str,
    action: Callable[[], Awaitable[Any]],
    until: Callable[[Event], bool],
) -> tuple[Any, list[Event]]:
    """Subscribe to the session's events, run `action`, then read stored events up to the
    first for which `until` holds."""

    async def go() -> tuple[Any, list[Event]]:
        seen: list[Event] = []
        with rig.kernel.broker.subscribe(topic(session)) as sub:
            result = await action()
            while not seen or not until(seen[-1]):
                event = await asyncio.wait_for(sub.get(), BOUND)
                assert event is not None, "the stream ended"
                if event.seq:
                    seen.append(event)
        return result, seen

    return rig.run(go())


def turn(rig: InProcess, session: str, *scripts: Any) -> list[Event]:
    """Push `scripts` and run a turn to its `turn_complete`."""
    rig.fake.push(model(rig, session), *scripts)
    submit = rig.kernel.turns.submit(session, TurnInput(message="go"))
    return watch(rig, session, lambda: submit, lambda e: e.kind == k.TURN_COMPLETE)[1]


def ended(event: Event) -> bool:
    return event.kind == k.BACKGROUND_COMMAND_UPDATED and not event.payload["running"]


def tool_result(events: list[Event], call_id: str) -> dict[str, Any]:
    end = next(e.payload for e in events if e.kind == k.TOOL_END and e.payload["id"] == call_id)
    return dict(end)


def updates(events: list[Event]) -> list[dict[str, Any]]:
    return [dict(e.payload) for e in events if e.kind == k.BACKGROUND_COMMAND_UPDATED]


def start_background(rig: InProcess, session: str, command: str) -> dict[str, Any]:
    """A turn whose bash call starts `command` in the background; the command's snapshot."""
    events = turn(
        rig,
        session,
        tools(call("bg", "bash", {"command": command, "background": True})),
        answer("Started."),
    )
    body = json.loads(tool_result(events, "bg")["output"])
    return dict(body["command"])


async def retry_until_running(attempt: Callable[[], Awaitable[Any]]) -> Any:
    """`attempt` (promote, reveal) once the tool call runs its command: 409 until then."""
    for _ in range(int(BOUND / 0.02)):
        try:
            return await attempt()
        except ToolNotRunning:
            await asyncio.sleep(0.02)
    raise AssertionError("the tool call never ran its command")


def on_loop(rig: InProcess, read: Callable[[], T]) -> T:
    """`read` the kernel's state on its own loop (never while it changes it)."""

    async def call() -> T:
        return read()

    return rig.run(call())


def kept_commands(rig: InProcess) -> list[Entry]:
    return list(rig.kernel.background.commands.values())


def foya_tail(content: bytes) -> str:
    """Foya's shell-output truncation (keep the tail: 2,000 lines / 30,000 bytes), as Foya
    defines it, on the whole output."""
    if not content:
        return ""
    lines = (content[:-1] if content.endswith(b"\n") else content).split(b"\n")
    if len(lines) <= TAIL_LINES and len(content) <= TAIL_BYTES:
        return content.decode(errors="replace")
    kept: list[bytes] = []
    size = 0
    for line in reversed(lines):
        if len(kept) >= TAIL_LINES or size + len(line) + (1 if kept else 0) > TAIL_BYTES:
            break
        size += len(line) + (1 if kept else 0)
        kept.append(line)
    preview = b"\n".join(reversed(kept))
    if not kept:
        start = max(0, len(lines[-1]) - TAIL_BYTES)
        while start < len(lines[-1]) and lines[-1][start] & 0xC0 == 0x80:
            start += 1
        preview = lines[-1][start:]
        kept = [preview] if preview else []
    marker = (
        f"... (output truncated: omitted {len(lines) - len(kept)} lines / "
        f"{len(content) - len(preview)} bytes from the beginning; "
        f"limits: {TAIL_LINES} lines / {TAIL_BYTES} bytes)"
    )
    return marker + ("\n\n" + preview.decode(errors="replace") if preview else "")


# ------------------------------------------------------------------------------ in process


def test_a_background_command_outlives_its_turn_and_its_end_is_recorded(rig: InProcess) -> None:
    session, workspace = new_session(rig)
    command = f"echo out; echo err >&2; {GATE}; echo done; exit 3"
    events = turn(
        rig,
        session,
        tools(call("bg", "bash", {"command": command, "background": True})),
        answer("Started."),
    )
    # The tool answered at once with Foya's text; the turn is over, the command still runs.
    end = tool_result(events, "bg")
    assert not end.get("is_error")
    body = json.loads(end["output"])
    assert body["status"] == "running_in_background" and body["initiated_by"] == "agent"
    assert body["message"] == "The command was started in the background by the agent."
    started = body["command"]
    assert started["running"] is True and started["backgrounded_by"] == "agent"
    assert started["command"] == command and started["session_id"] == session
    assert started["command_id"].startswith("cmd-") and started["pid"] > 0
    # Recorded before the tool ended, without a run id.
    [update] = [e for e in events if e.kind == k.BACKGROUND_COMMAND_UPDATED]
    kinds = [e.kind for e in events]
    assert kinds.index(k.BACKGROUND_COMMAND_UPDATED) < kinds.index(k.TOOL_END)
    assert update.run_id is None and update.payload["command_id"] == started["command_id"]
    assert update.payload["status"] == "running" and "exit_code" not in update.payload

    listed = rig.run(rig.kernel.background.in_background(session))
    assert [c["command_id"] for c in listed] == [started["command_id"]]
    assert listed[0]["status"] == "running" and set(listed[0]) <= FIELDS

    _, later = watch(rig, session, lambda: asyncio.to_thread((workspace / "go").touch), ended)
    final = updates(later)[-1]
    assert final["command_id"] == started["command_id"]
    assert final["running"] is False and final["status"] == "failed" and final["exit_code"] == 3
    assert final["stdout"] == "out\ndone\n" and final["stderr"] == "err\n"
    assert final["completed_at"] >= final["started_at"]
    got = rig.run(rig.kernel.background.get(session, started["command_id"]))
    assert got == final
    assert rig.run(rig.kernel.background.in_background(session)) == []


def test_the_agent_reads_and_cancels_its_command_and_the_whole_group_dies(
    rig: InProcess,
) -> None:
    session, workspace = new_session(rig)
    started = start_background(rig, session, "sleep 300 & echo $! > child; echo up; wait")
    wait_until(lambda: (workspace / "child").exists(), "the child's pid", BOUND)
    child = int((workspace / "child").read_text())
    assert child in group(started["pid"])
    cid = started["command_id"]

    events = turn(
        rig,
        session,
        tools(
            call("s", "bash_status", {"command_id": cid}),
            call("x", "bash_status", {"command_id": "cmd-0000000000000000"}),
        ),
        tools(call("c", "bash_cancel", {"command_id": cid})),
        answer("Stopped."),
    )
    status = json.loads(tool_result(events, "s")["output"])
    assert status["running"] is True and status["stdout"] == "up\n"
    unknown = tool_result(events, "x")
    assert unknown["is_error"] is True and unknown["output"] == "background command not found"
    cancelled = json.loads(tool_result(events, "c")["output"])
    assert cancelled["running"] is False and cancelled["status"] == "cancelled"
    assert cancelled["stopped_by"] == "agent" and cancelled["exit_code"] == -1
    # Its end was recorded before the cancel answered.
    assert updates(events)[-1] == cancelled
    gone(started["pid"])


def test_a_foreground_call_moved_to_the_background_answers_at_once(rig: InProcess) -> None:
    session, workspace = new_session(rig)
    rig.fake.push(
        model(rig, session),
        tools(call("fg", "bash", {"command": f"echo before; {GATE}; echo after"})),
        answer("Moved on."),
    )

    async def submit_and_move() -> Any:
        await rig.kernel.turns.submit(session, TurnInput(message="go"))
        return await retry_until_running(lambda: rig.kernel.background.promote(session, "fg"))

    moved, events = watch(rig, session, submit_and_move, lambda e: e.kind == k.TURN_COMPLETE)
    assert moved["backgrounded_by"] == "user" and moved["running"] is True
    body = json.loads(tool_result(events, "fg")["output"])
    assert body["status"] == "running_in_background" and body["initiated_by"] == "user"
    assert "user moved this command to the background" in body["message"]
    assert body["command"]["command_id"] == moved["command_id"]
    assert updates(events)[0]["backgrounded_by"] == "user"
    listed = rig.run(rig.kernel.background.in_background(session))
    assert [c["command_id"] for c in listed] == [moved["command_id"]]
    with pytest.raises(ToolNotRunning):  # moved already: the call is over
        rig.run(rig.kernel.background.promote(session, "fg"))

    _, later = watch(rig, session, lambda: asyncio.to_thread((workspace / "go").touch), ended)
    final = updates(later)[-1]
    assert final["status"] == "completed" and final["exit_code"] == 0
    assert final["stdout"] == "before\nafter\n"


def test_a_revealed_call_stays_in_the_foreground_and_is_kept(rig: InProcess) -> None:
    session, workspace = new_session(rig)
    rig.fake.push(
        model(rig, session),
        tools(
            call("r", "bash", {"command": f"echo shown; {GATE}"}),
            call("p", "bash", {"command": "echo plain"}),
        ),
        answer("Done."),
    )

    async def submit_and_reveal() -> Any:
        await rig.kernel.turns.submit(session, TurnInput(message="go"))
        revealed = await retry_until_running(lambda: rig.kernel.background.reveal(session, "r"))
        assert await rig.kernel.background.in_background(session) == []  # not backgrounded
        await asyncio.to_thread((workspace / "go").touch)
        return revealed

    revealed, events = watch(rig, session, submit_and_reveal, lambda e: e.kind == k.TURN_COMPLETE)
    assert revealed["running"] is True and "backgrounded_by" not in revealed
    # The call answered as a foreground call does; the command is still readable by id.
    assert tool_result(events, "r")["output"] == "shown\n\n[exit code 0]"
    kept = rig.run(rig.kernel.background.get(session, revealed["command_id"]))
    assert kept["status"] == "completed" and kept["stdout"] == "shown\n"
    assert updates(events) == [kept]  # its end recorded; the plain call records nothing
    assert rig.run(rig.kernel.background.in_background(session)) == []


def test_output_is_capped_to_the_tail_foya_shows(rig: InProcess) -> None:
    session, workspace = new_session(rig)
    talk = "head -c 3000000 /dev/zero | tr '\\0' a; echo; seq 1 5000; printf 'é%.0s' {1..20}"
    expected = b"a" * 3000000 + b"\n" + "".join(f"{i}\n" for i in range(1, 5001)).encode()
    expected += "é".encode() * 20
    start_background(rig, session, f"{GATE}; {talk}")
    _, events = watch(rig, session, lambda: asyncio.to_thread((workspace / "go").touch), ended)
    final = updates(events)[-1]
    assert final["stdout"] == foya_tail(expected)
    assert final["stdout"].startswith("... (output truncated: omitted 3002 lines / ")
    assert final["stdout"].endswith("\n5000\n" + "é" * 20)
    assert len(final["stdout"].encode()) < TAIL_BYTES + 200


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from([b"a", b"\n", "é".encode(), b"xy\n"]), st.integers(1, 20000)),
        max_size=6,
    ),
    chunk=st.integers(1, 70000),
)
def test_a_stream_keeps_just_enough_to_show_foyas_tail(
    runs: list[tuple[bytes, int]], chunk: int
) -> None:
    content = b"".join(piece * count for piece, count in runs)
    stream = Stream()
    for at in range(0, len(content), chunk):
        stream.add(content[at : at + chunk])
    assert stream.tail() == foya_tail(content)
    assert len(stream.window) <= TAIL_BYTES + 2


def test_deleting_a_session_kills_its_commands(rig: InProcess) -> None:
    session, workspace = new_session(rig)
    first = start_background(rig, session, "sleep 300 & echo $! > a; wait")
    second = start_background(rig, session, "trap '' TERM HUP; sleep 301 & echo $! > b; wait")
    # A job left behind: the command itself ends at once.
    third = start_background(rig, session, "sleep 302 >/dev/null 2>&1 & echo $! > c")
    files = [workspace / name for name in "abc"]
    wait_until(lambda: all(f.exists() for f in files), "the jobs' pids", BOUND)
    for started, job in zip((first, second, third), files, strict=True):
        assert int(job.read_text()) in group(started["pid"])
    rig.run(rig.kernel.delete_session(session))
    for started in (first, second, third):
        gone(started["pid"])
    with pytest.raises(SessionUnknown) as refused:
        rig.run(rig.kernel.background.get(session, first["command_id"]))
    assert (refused.value.status, refused.value.code) == (404, "session_not_found")


def test_unknown_ids_and_calls_are_refused(rig: InProcess) -> None:
    session, _ = new_session(rig)
    background = rig.kernel.background
    with pytest.raises(CommandNotFound) as missing:
        rig.run(background.get(session, "cmd-0000000000000000"))
    assert (missing.value.status, missing.value.code) == (404, "background_command_not_found")
    with pytest.raises(CommandNotFound):
        rig.run(background.cancel(session, "cmd-0000000000000000"))
    for attempt in (background.promote, background.reveal):
        with pytest.raises(ToolNotRunning) as idle:
            rig.run(attempt(session, "no-such-call"))
        assert (idle.value.status, idle.value.code) == (409, "tool_not_running")
    # A foreground command that ended unrevealed is not kept.
    events = turn(rig, session, tools(call("f", "bash", {"command": "echo hi"})), answer("Ok."))
    assert updates(events) == [] and tool_result(events, "f")["output"] == "hi\n\n[exit code 0]"
    assert on_loop(rig, lambda: all(e.session != session for e in kept_commands(rig)))
    # A command of another session is unknown here.
    other, _ = new_session(rig)
    started = start_background(rig, other, "true")
    with pytest.raises(CommandNotFound):
        rig.run(background.get(session, started["command_id"]))


def test_only_the_last_ended_commands_of_a_session_are_kept(
    rig: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(commands, "FINISHED_KEPT", 2)
    session, _ = new_session(rig)
    calls = [call(f"c{i}", "bash", {"command": "true", "background": True}) for i in range(3)]

    seen: list[Event] = []

    def three_ended(event: Event) -> bool:
        seen.extend([event] if ended(event) else [])
        return len(seen) == 3

    rig.fake.push(model(rig, session), tools(*calls), answer("Ok."))
    submit = rig.kernel.turns.submit(session, TurnInput(message="go"))
    _, events = watch(rig, session, lambda: submit, three_ended)
    ids = {u["command_id"] for u in updates(events)}
    kept = on_loop(rig, lambda: {c for c in ids if rig.kernel.background.find(session, c)})
    assert len(ids) == 3 and len(kept) == 2


def test_shutdown_kills_every_command_and_a_restart_knows_none(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with inprocess_kernel(data) as rig:
        session, workspace = new_session(rig)
        started = start_background(rig, session, "sleep 300 & echo $! > child; wait")
        left = start_background(rig, session, "sleep 301 >/dev/null 2>&1 & echo $! > job")
        wait_until(lambda: (workspace / "child").exists(), "the child's pid", BOUND)
        wait_until(lambda: (workspace / "job").exists(), "the job's pid", BOUND)
        shown = partial(rig.kernel.background.get, session, left["command_id"])
        wait_until(lambda: not rig.run(shown())["running"], "the command's end", BOUND)
        assert len(group(started["pid"])) == 2
        assert int((workspace / "job").read_text()) in group(left["pid"])
    gone(started["pid"])
    gone(left["pid"])
    conn = sqlite3.connect(f"file:{data / 'foya.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT payload_json FROM events WHERE session_id = ? AND kind = ? ORDER BY seq",
            (session, k.BACKGROUND_COMMAND_UPDATED),
        ).fetchall()
    finally:
        conn.close()
    last = {u["command_id"]: u for u in (json.loads(row[0]) for row in rows)}
    assert last[started["command_id"]]["status"] == "cancelled"
    assert last[started["command_id"]]["stopped_by"] == "shutdown"
    assert last[left["command_id"]]["status"] == "completed"  # it had ended: as it was
    with inprocess_kernel(data) as rig:
        with pytest.raises(CommandNotFound):
            rig.run(rig.kernel.background.get(session, started["command_id"]))
        assert rig.run(rig.kernel.background.in_background(session)) == []


# ------------------------------------------------------------------------------------- wire


def test_the_wire_with_a_real_kernel(tmp_path: Path) -> None:
    with (
        FakeProvider.running() as fake,
        short_tmpdir() as root,
        contextlib.closing(Launcher(tmp_path)) as launcher,
    ):
        home = tmp_path / "home"
        home.mkdir()
        env = base_env(HOME=str(home))
        served = unix_kernel(launcher, root, "k", env=env)
        with served.client() as client:
            client.timeout = httpx.Timeout(BOUND)
            stopped = wire_round_trip(client, fake)
        served.kernel.stop()  # SIGTERM: a graceful stop ends every command
        gone(stopped["pid"])
        served = unix_kernel(launcher, root, "k", env=env)
        with served.client() as client:
            path = f"/sessions/{stopped['session_id']}/background-commands"
            assert_error(
                client.get(f"{path}/{stopped['command_id']}"), 404, "background_command_not_found"
            )
            assert client.get(path).json() == []
            with open_events(client, stopped["session_id"], after=0) as stream:
                frames = stream.frames_until(
                    lambda f: (
                        f.event == k.BACKGROUND_COMMAND_UPDATED
                        and f.data["payload"]["command_id"] == stopped["command_id"]
                        and f.data["payload"].get("status") == "cancelled"
                    )
                )
            assert frames[-1].data["payload"]["command_id"] == stopped["command_id"]
            # Stored as stopped by the shutdown; served in Foya's union (agent | user): by no one.
            assert "stopped_by" not in frames[-1].data["payload"]


def wire_round_trip(client: httpx.Client, fake: FakeProvider) -> dict[str, Any]:
    """Start, move, list, read and cancel commands over HTTP; the one left running."""
    connection = connect(client, fake)["id"]
    body = {"connection_id": connection, "model": "wire", "approval_mode": "full_access"}
    session = client.post("/sessions", json=body).json()["id"]
    base = f"/sessions/{session}"
    assert client.patch(base, json={"title": "wire"}).status_code == 200  # no title request
    fake.push(
        "wire",
        tools(call("w1", "bash", {"command": "sleep 300 & wait", "background": True})),
        answer("Started."),
        tools(call("w2", "bash", {"command": "sleep 301"})),
        answer("Moved."),
    )
    with open_events(client, session) as stream:
        assert client.post(f"{base}/turns", json={"message": "go"}).status_code == 200
        frames = stream.frames_until(lambda f: f.event == k.TURN_COMPLETE)
    [update] = [f for f in frames if f.event == k.BACKGROUND_COMMAND_UPDATED]
    assert update.data.get("run_id") is None and update.data["session"] == session
    first = update.data["payload"]
    assert set(first) <= FIELDS and first["status"] == "running"
    assert first["backgrounded_by"] == "agent"

    # Move the second call's command to the background while it runs.
    with open_events(client, session) as stream:
        assert client.post(f"{base}/turns", json={"message": "again"}).status_code == 200
        answers: list[httpx.Response] = []

        def moved() -> bool:
            answers.append(client.post(f"{base}/tools/w2/background"))
            return answers[-1].status_code == 200

        wait_until(moved, "the call to be moved to the background", BOUND)
        for refused in answers[:-1]:
            assert_error(refused, 409, "tool_not_running")
        frames = stream.frames_until(lambda f: f.event == k.TURN_COMPLETE)
    second = answers[-1].json()
    assert second["backgrounded_by"] == "user" and second["running"] is True
    end = next(f.data["payload"] for f in frames if f.event == k.TOOL_END)
    assert json.loads(end["output"])["initiated_by"] == "user"

    listed = client.get(f"{base}/background-commands").json()
    assert [c["command_id"] for c in listed] == [second["command_id"], first["command_id"]]
    got = client.get(f"{base}/background-commands/{first['command_id']}")
    assert got.status_code == 200 and got.json()["running"] is True

    with open_events(client, session) as stream:
        cancelled = client.post(f"{base}/background-commands/{first['command_id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        final = stream.frames_until(
            lambda f: f.event == k.BACKGROUND_COMMAND_UPDATED and not f.data["payload"]["running"]
        )[-1].data["payload"]
    assert cancelled.json() == final
    assert final["status"] == "cancelled" and final["stopped_by"] == "user"
    gone(first["pid"])

    missing = f"{base}/background-commands/cmd-0000000000000000"
    assert_error(client.get(missing), 404, "background_command_not_found")
    assert_error(client.post(f"{missing}/cancel"), 404, "background_command_not_found")
    for verb in ("background", "reveal"):
        assert_error(client.post(f"{base}/tools/nope/{verb}"), 409, "tool_not_running")
        assert_error(client.post(f"/sessions/nope/tools/w2/{verb}"), 404, "session_not_found")
    assert_error(client.get("/sessions/nope/background-commands"), 404, "session_not_found")
    assert_error(
        client.get(f"/sessions/nope/background-commands/{first['command_id']}"),
        404,
        "session_not_found",
    )
    return dict(second)
