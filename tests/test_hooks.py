"""Hooks against a real `foya serve` whose HOME is a
temp dir, with real shell scripts as hooks and the fake provider as the model.

Exit 2 denies (stderr is the reason), another non-zero exit is a hook error and the turn goes
on; `UserPromptSubmit` can refuse a prompt, `Stop` can force one continuation,
`PermissionRequest` can decide an approval; every run is a `hook_completed` fact; a hook that
hangs is killed at its timeout, or with its turn when the turn is cancelled.

Each test works in a project of its own (hooks of scope `project`), so the hooks of one test
never run in another's turns; only the round-trip test touches the global scope. A project's
hooks written through `PUT /hooks` into a project that had none are the user's and trusted
(`app.kernel.trust`); a file written by hand is trusted explicitly; an `allow` that approves
has `may_approve` (tests/test_project_trust.py covers the trust rule itself).
"""

from __future__ import annotations

import json
import stat
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import (
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    Session,
    answer,
    call,
    connect,
    only,
    payloads,
    tools,
)
from support.helpers import Launcher, base_env, short_tmpdir, wait_until
from support.streams_helpers import Frame, assert_error, unix_kernel

KERNEL_SECRETS = {"FOYA_EXTRA_TOKEN": "kernel-token-123", "PROVIDER_API_KEY": "sk-kernel-456"}


@dataclass
class World:
    agent: Agent
    home: Path
    tmp: Path

    @property
    def client(self) -> httpx.Client:
        return self.agent.client

    def project(self) -> tuple[str, Path]:
        """A new project directory, registered."""
        path = self.tmp / f"p-{uuid.uuid4().hex[:8]}"
        path.mkdir()
        made = self.client.post("/projects", json={"path": str(path)})
        assert made.status_code == 201, made.text
        return str(made.json()["id"]), path

    def script(self, directory: Path, body: str) -> str:
        """An executable `/bin/sh` script running `body`; its path, to use as a command."""
        path = directory / f"hook-{uuid.uuid4().hex[:8]}.sh"
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return str(path)

    def put(self, scope: str, hooks: list[dict[str, Any]], project_id: str | None = None) -> Any:
        body: dict[str, Any] = {"scope": scope, "hooks": hooks}
        if project_id is not None:
            body["project_id"] = project_id
        response = self.client.put("/hooks", json=body)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One kernel (HOME a temp dir, secrets in its environment) connected to the fake. Once
    it is stopped, `foya check` finds its projections (system messages included) as its
    facts say."""
    home = tmp_path_factory.mktemp("home")
    tmp = tmp_path_factory.mktemp("hooks")
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    with FakeProvider.running() as fake, short_tmpdir() as root:
        try:
            env = base_env(HOME=str(home), **KERNEL_SECRETS)
            served = unix_kernel(launcher, root, "k", env=env)
            with served.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                connection = connect(client, fake)
                yield World(Agent(served, fake, client, connection["id"]), home, tmp)
        finally:
            launcher.close()
        foya_check(served.data_dir)


def session_in(world: World, project_id: str, approval_mode: str = "full_access") -> Session:
    return world.agent.session(approval_mode, project_id=project_id)


def turn(s: Session, message: str = "hello") -> list[Frame]:
    """Submit (the scripts are pushed already); every frame up to `turn_complete`."""
    with s.events() as events:
        assert s.submit(message) == {"run_id": s.id, "status": "started"}
        return events.until_kind("turn_complete")


def completed(frames: list[Frame]) -> list[dict[str, Any]]:
    return list(payloads(frames, "hook_completed"))


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


# ------------------------------------------------------------------------------- configuration


def test_config_round_trip_global(world: World) -> None:
    assert world.client.get("/hooks", params={"scope": "global"}).json() == []
    sent: list[dict[str, Any]] = [
        {"event": " Stop ", "command": " echo hi ", "name": "n", "timeout": 5, "enabled": True},
        {"id": "p1", "event": "PermissionRequest", "matcher": "^bash$", "command": "true"},
        {"event": "Notification", "command": "true", "async": True, "matcher": ""},
    ]
    stored = [
        {"event": "Stop", "command": "echo hi", "name": "n", "timeout": 5, "enabled": True},
        {"id": "p1", "event": "PermissionRequest", "matcher": "^bash$", "command": "true"},
        {"event": "Notification", "command": "true", "async": True},
    ]
    try:
        assert world.put("global", sent) == stored
        assert world.client.get("/hooks", params={"scope": "global"}).json() == stored
        file = world.home / ".foya" / "hooks.json"
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert json.loads(file.read_text()) == stored
        # A hand edit is what the next read serves.
        file.write_text(json.dumps(stored[:1]))
        assert world.client.get("/hooks", params={"scope": "global"}).json() == stored[:1]
        file.write_text("null")  # how Foya writes an empty list
        assert world.client.get("/hooks", params={"scope": "global"}).json() == []
    finally:
        assert world.put("global", []) == []
    assert world.client.get("/hooks", params={"scope": "global"}).json() == []


def test_bad_config_is_400_and_changes_nothing(world: World) -> None:
    pid, path = world.project()
    file = path / ".foya" / "hooks.json"
    good = [{"event": "Stop", "command": "true"}]
    world.put("project", good, pid)
    before = file.read_bytes()
    refused = {
        "unknown event": ([{"event": "OnSave", "command": "x"}], "hooks[0].event"),
        "no command": ([{"event": "Stop", "command": "  "}], "hooks[0].command"),
        "timeout too long": ([good[0], {**good[0], "timeout": 601}], "hooks[1].timeout"),
        "negative timeout": ([{**good[0], "timeout": -1}], "hooks[0].timeout"),
        "bad matcher": ([{**good[0], "matcher": "(bash"}], "hooks[0].matcher"),
        "unknown field": ([{**good[0], "shell": "bash"}], "shell"),
        "string timeout": ([{**good[0], "timeout": "5"}], "timeout"),
    }
    for what, (hooks, named) in refused.items():
        body: dict[str, Any] = {"scope": "project", "project_id": pid, "hooks": hooks}
        response = world.client.put("/hooks", json=body)
        assert_error(response, 400, "bad_request")
        assert named in response.json()["message"], what
        assert file.read_bytes() == before, what
    missing = world.client.put("/hooks", json={"scope": "project", "project_id": pid})
    assert_error(missing, 400, "bad_request")
    for body, status, code in (
        ({"scope": "user", "hooks": good}, 400, "invalid_context_item"),
        ({"scope": "project", "hooks": good}, 400, "invalid_context_item"),
        ({"scope": "project", "project_id": "nope", "hooks": good}, 404, "not_found"),
    ):
        assert_error(world.client.put("/hooks", json=body), status, code)
    assert_error(world.client.get("/hooks", params={"scope": "user"}), 400, "invalid_context_item")
    assert file.read_bytes() == before
    assert world.client.get("/hooks", params={"scope": "global"}).json() == []


def test_project_scope_is_separate_and_runs_only_in_its_sessions(world: World) -> None:
    pid, path = world.project()
    marker = path / "ran.txt"
    hook = {"event": "UserPromptSubmit", "command": f'echo "$FOYA_HOOK_SESSION_ID" >> {marker}'}
    assert world.put("project", [hook], pid) == [hook]
    assert world.client.get("/hooks", params={"scope": "global"}).json() == []
    got = world.client.get("/hooks", params={"scope": "project", "project_id": pid})
    assert got.json() == [hook]
    assert stat.S_IMODE((path / ".foya" / "hooks.json").stat().st_mode) == 0o600

    inside = session_in(world, pid)
    inside.push(answer("Hi."))
    frames = turn(inside)
    ran = only(frames, "hook_completed")
    assert ran["event"] == "UserPromptSubmit" and ran["decision"] == "none" and not ran["error"]
    assert set(ran) == {
        "id",
        "event_id",
        "name",
        "event",
        "decision",
        "halt",
        "reason",
        "duration_ms",
        "error",
        "input_rewrite",
    }
    assert marker.read_text().split() == [inside.id]

    outside = world.agent.session()
    outside.push(answer("Hi."))
    assert completed(turn(outside)) == []
    assert marker.read_text().split() == [inside.id]


def test_an_unreadable_file_is_reported_and_the_turn_goes_on(world: World) -> None:
    pid, path = world.project()
    (path / ".foya").mkdir()
    (path / ".foya" / "hooks.json").write_text('[{"event": "Stop"}]')  # no command
    got = world.client.get("/hooks", params={"scope": "project", "project_id": pid})
    assert_error(got, 500, "context_item_failed")
    # A hand-written file runs (and is reported) only once the project is trusted.
    assert world.client.put(f"/projects/{pid}/trust").status_code == 200
    s = session_in(world, pid)
    s.push(answer("Fine."))
    frames = turn(s)
    reports = completed(frames)  # one for each event the turn reached
    assert [r["event"] for r in reports] == ["UserPromptSubmit", "Stop"]
    assert all(r["name"] == "configuration" and "hooks.json" in r["error"] for r in reports)
    assert only(frames, "turn_complete")["status"] == "completed"


# --------------------------------------------------------------------------- UserPromptSubmit


def test_a_denied_prompt_is_shown_and_never_reaches_the_model(world: World) -> None:
    pid, path = world.project()
    out = world.tmp / f"out-{pid}"
    out.mkdir()
    script = world.script(
        out,
        f"cat > {out}/stdin.json; env > {out}/env.txt; pwd > {out}/pwd.txt\n"
        'echo "no secrets in prompts" >&2\nexit 2',
    )
    world.put("project", [{"event": "UserPromptSubmit", "command": script, "name": "guard"}], pid)
    s = session_in(world, pid)

    frames = turn(s, "my password is hunter2")
    assert [f.event for f in frames] == ["hook_completed", "error", "turn_complete"]
    denied = only(frames, "hook_completed")
    assert denied["decision"] == "deny" and denied["reason"] == "no secrets in prompts"
    assert denied["name"] == "guard" and not denied["error"]
    assert only(frames, "error") == "User request blocked by a hook: no secrets in prompts"
    done = only(frames, "turn_complete")
    assert done["status"] == "failed" and done["reason"] == "error"
    assert s.chats() == [], "the prompt never reaches the model"
    assert [m for m in s.history() if m["role"] == "user"] == []
    s.wait_idle()

    request = json.loads((out / "stdin.json").read_text())
    assert request["version"] == 1 and request["event"] == "UserPromptSubmit"
    assert request["user_prompt"] == "my password is hunter2"
    assert request["session_id"] == s.id and request["run_id"] == done["run_id"]
    assert request["project_id"] == pid and request["cwd"] == str(path)
    assert request["event_id"] == denied["event_id"] and request["model"] == s.model
    assert (out / "pwd.txt").read_text().strip() == str(path.resolve())
    lines = (out / "env.txt").read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    assert env["FOYA_HOOK_EVENT"] == "UserPromptSubmit" and env["FOYA_HOOK_SESSION_ID"] == s.id
    assert env["FOYA_HOOK_RUN_ID"] == done["run_id"] and env["FOYA_HOOK_PROJECT_ID"] == pid
    assert env.get("PATH") and env.get("HOME") == str(world.home)
    assert not set(KERNEL_SECRETS) & set(env)
    assert not any(value in (out / "env.txt").read_text() for value in KERNEL_SECRETS.values())

    # The session is not wedged: without the hook the next prompt runs.
    world.put("project", [], pid)
    s.push(answer("Hello."))
    assert only(turn(s), "turn_complete")["status"] == "completed"


def test_failing_hooks_are_errors_and_the_turn_goes_on(world: World) -> None:
    pid, _ = world.project()
    world.put(
        "project",
        [
            {"event": "UserPromptSubmit", "name": "boom", "command": "echo boom >&2; exit 1"},
            {"event": "UserPromptSubmit", "name": "loud", "command": "head -c 70000 /dev/zero"},
            {"event": "UserPromptSubmit", "name": "prose", "command": "echo not json"},
            {"event": "UserPromptSubmit", "name": "off", "command": "exit 2", "enabled": False},
        ],
        pid,
    )
    s = session_in(world, pid)
    s.push(answer("Still here."))
    frames = turn(s)
    results = completed(frames)
    assert [r["name"] for r in results] == ["boom", "loud", "prose"]
    assert [r["decision"] for r in results] == ["none"] * 3
    assert results[0]["error"] == "boom"
    assert results[1]["error"] == "hook output exceeded 64 KiB"
    assert results[2]["error"].startswith("invalid hook JSON output")
    assert only(frames, "turn_complete")["status"] == "completed"
    assert len(s.chats()) == 1


def test_a_hook_that_hangs_is_killed_at_its_timeout(world: World) -> None:
    pid, path = world.project()
    pidfile = path / "child.pid"
    script = world.script(path, f"sleep 1000 &\necho $! > {pidfile}\nwait")
    world.put("project", [{"event": "UserPromptSubmit", "command": script, "timeout": 1}], pid)
    s = session_in(world, pid)
    s.push(answer("Went on."))
    frames = turn(s)
    result = only(frames, "hook_completed")
    assert result["error"] == "hook timed out after 1 s and was killed"
    assert only(frames, "turn_complete")["status"] == "completed"
    child = int(pidfile.read_text())
    wait_until(lambda: gone(child), "the hook's child to be killed")


def test_an_async_hook_cannot_deny(world: World) -> None:
    pid, _ = world.project()
    world.put("project", [{"event": "UserPromptSubmit", "command": "exit 2", "async": True}], pid)
    s = session_in(world, pid)
    s.push(answer("Ran."))
    with s.events() as events:
        s.submit()
        frames = events.until_kind("turn_complete")
        if "hook_completed" not in [f.event for f in frames]:
            frames += events.until_kind("hook_completed")
    assert only(frames, "turn_complete")["status"] == "completed"
    assert only(frames, "hook_completed")["decision"] == "deny"


# ---------------------------------------------------------------------------------------- Stop


def test_stop_forces_exactly_one_continuation(world: World) -> None:
    pid, path = world.project()
    seen = path / "stop.json"
    script = world.script(path, f'cat >> {seen}; echo "run the tests first" >&2; exit 2')
    world.put("project", [{"event": "Stop", "command": script}], pid)
    s = session_in(world, pid)
    s.push(answer("First."), answer("Second."))
    frames = turn(s, "fix it")

    assert only(frames, "turn_complete")["status"] == "completed"
    stop = only(frames, "hook_completed")
    assert stop["event"] == "Stop" and stop["decision"] == "deny"
    messages = payloads(frames, "message_end")
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert replies == ["First.", "Second."]
    notes = [m["content"] for m in messages if m["role"] == "system"]
    assert notes == ['<hook_context source="stop">\nrun the tests first\n</hook_context>']
    assert len(s.chats()) == 2, "one continuation, not more"
    assert {"role": "assistant", "content": "First."} in s.chats()[1].messages
    assert {"role": "system", "content": notes[0]} in s.chats()[1].messages
    request = json.loads(seen.read_text())  # the hook ran once: one JSON document
    assert request["event"] == "Stop" and request["assistant_message"] == "First."
    assert request["user_prompt"] == "fix it"


def test_cancel_kills_a_running_hook(world: World) -> None:
    pid, path = world.project()
    pidfile = path / "stop.pid"
    script = world.script(path, f"sleep 1000 &\necho $! > {pidfile}\nwait")
    world.put("project", [{"event": "Stop", "command": script}], pid)
    s = session_in(world, pid)
    s.push(answer("Done?"))
    with s.events() as events:
        s.submit()
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", "the hook")
        assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204
        frames = events.until_kind("turn_complete")
    assert only(frames, "turn_complete")["status"] == "cancelled"
    child = int(pidfile.read_text())
    wait_until(lambda: gone(child), "the hook's child to be killed")


def test_cancel_during_the_prompt_hook_kills_it_and_the_turn_ends_cancelled(
    world: World,
) -> None:
    pid, path = world.project()
    pidfile = path / "prompt.pid"
    script = world.script(path, f"sleep 1000 &\necho $! > {pidfile}\nwait")
    world.put("project", [{"event": "UserPromptSubmit", "command": script}], pid)
    s = session_in(world, pid)
    answered: list[httpx.Response] = []

    def submit() -> None:  # POST …/turns waits for the hook
        with world.agent.served.client() as other:
            answered.append(other.post(f"/sessions/{s.id}/turns", json={"message": "hi"}))

    with s.events() as events:
        thread = threading.Thread(target=submit)
        thread.start()
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip() != "", "the hook")
        assert s.client.post(f"/sessions/{s.id}/cancel").status_code == 204
        frames = events.until_kind("turn_complete")
        thread.join(READ_TIMEOUT)
    assert answered[0].json() == {"run_id": s.id, "status": "started"}
    assert only(frames, "turn_complete")["status"] == "cancelled"
    assert [m["role"] for m in payloads(frames, "message_end")][:1] == ["user"]
    assert s.chats() == []
    child = int(pidfile.read_text())
    wait_until(lambda: gone(child), "the hook's child to be killed")


# --------------------------------------------------------------------------- PermissionRequest


def test_permission_hooks_decide_approvals(world: World) -> None:
    pid, path = world.project()
    seen = path / "perm.json"
    deny = world.script(path, f'cat > {seen}; echo "no shell today" >&2; exit 2')
    allow = 'echo \'{"decision": "allow"}\''
    world.put(
        "project",
        [
            {"event": "PermissionRequest", "matcher": "^bash$", "command": deny},
            {
                "event": "PermissionRequest",
                "matcher": "^write$",
                "command": allow,
                "may_approve": True,
            },
        ],
        pid,
    )
    s = session_in(world, pid, "manual")

    s.push(tools(call("b", "bash", {"command": "touch ran"})), answer("Denied, fine."))
    frames = turn(s)
    assert "approval_request" not in [f.event for f in frames]
    decided = only(frames, "hook_completed")
    assert decided["decision"] == "deny" and decided["reason"] == "no shell today"
    assert only(frames, "tool_end")["is_error"] is True
    assert not (path / "ran").exists()
    request = json.loads(seen.read_text())
    assert request["event"] == "PermissionRequest" and request["tool_name"] == "bash"
    assert request["metadata"]["action"] == "execute"

    s.push(tools(call("w", "write", {"path": "out.txt", "content": "ok\n"})), answer("Wrote."))
    frames = turn(s)
    assert "approval_request" not in [f.event for f in frames]
    assert only(frames, "hook_completed")["decision"] == "allow"
    assert not only(frames, "tool_end").get("is_error")
    assert (path / "out.txt").read_text() == "ok\n"

    # No hook matches `edit`: the user is asked as usual.
    s.push(
        tools(call("e", "edit", {"path": "out.txt", "old_string": "ok", "new_string": "ko"})),
        answer("."),
    )
    with s.events() as events:
        s.submit()
        asked = events.until_kind("approval_request")[-1].data["payload"]
        response = s.client.post(
            f"/sessions/{s.id}/approvals/{asked['id']}", json={"decision": "denied"}
        )
        assert response.status_code == 204
        frames = events.until_kind("turn_complete")
    assert completed(frames) == []
