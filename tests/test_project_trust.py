"""Project trust (`app.kernel.trust`) against a real `foya serve` whose HOME is
a temp dir: a cloned project's `.foya/hooks.json` runs nothing until the user trusts that exact
content, a changed file asks again, the user's own `~/.foya` hooks still run, and a hook's
`allow` approves a tool call only with `may_approve` in a trusted file.

The projects here are "cloned": their hook files are written on disk, as `git clone` leaves them,
not through `PUT /hooks`. Whether a hook ran is a marker file the hook command writes.

`foya projects` runs in the test's process (`support.cli_inprocess`), but for one `show-trust`
in a process of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli_inprocess import run_cli
from support.fake_provider import (
    BOUND,
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    Session,
    answer,
    call,
    connect,
    payloads,
    tools,
)
from support.helpers import Launcher, base_env, run_foya, short_tmpdir
from support.streams_helpers import EventStream, Frame, assert_error, unix_kernel

from app.broker import Broker
from app.kernel.hooks.service import NOT_AN_APPROVER
from app.kernel.projects import Projects
from app.kernel.trust import ProjectTrust
from app.kernel.usercontext.journal import ContextJournal
from app.metrics import Metrics

HOOKS = Path(".foya") / "hooks.json"


@dataclass
class World:
    agent: Agent
    home: Path
    tmp: Path
    last_marker: int = 0  # the seq of the last notice `context_events` made

    @property
    def client(self) -> httpx.Client:
        return self.agent.client

    def cloned(self, hooks: list[dict[str, Any]]) -> tuple[str, Path]:
        """A registered project directory whose `.foya/hooks.json` came with the clone."""
        path = self.tmp / f"p-{uuid.uuid4().hex[:8]}"
        (path / ".foya").mkdir(parents=True)
        (path / HOOKS).write_text(json.dumps(hooks))
        made = self.client.post("/projects", json={"path": str(path)})
        assert made.status_code == 201, made.text
        return str(made.json()["id"]), path

    def trust(self, pid: str, **body: Any) -> httpx.Response:
        return self.client.put(f"/projects/{pid}/trust", json=body)

    def state(self, pid: str) -> dict[str, Any]:
        got = self.client.get(f"/projects/{pid}/trust")
        assert got.status_code == 200, got.text
        return dict(got.json())

    def context_events(self) -> list[dict[str, Any]]:
        """Every event on `GET /context/events` so far: the replay, up to a notice this test
        makes itself (memory turned on or off), so nothing depends on timing."""
        with self.client.stream("GET", "/context/events") as response:
            assert response.status_code == 200
            stream = EventStream(response)
            enabled = self.client.get("/settings/memory").json()["enabled"]
            marker = self.client.put("/settings/memory", json={"enabled": not enabled})
            assert marker.status_code == 200, marker.text
            seen: list[dict[str, Any]] = []
            deadline = time.monotonic() + BOUND
            while not seen or not ours(seen[-1], not enabled, self.last_marker):
                frame = stream.next_frame(deadline)
                assert frame is not None
                seen.append(dict(frame.data))
        self.last_marker = seen[-1]["seq"]
        return seen

    def requests_of(self, pid: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.context_events()
            if e["kind"] == "project_trust_requested" and e["project_id"] == pid
        ]


def ours(event: dict[str, Any], enabled: bool, after: int) -> bool:
    """Whether `event` is the memory notice `context_events` made (not an earlier one)."""
    return (
        event["kind"] == "memory_settings_updated"
        and event["memory_settings"]["enabled"] is enabled
        and event["seq"] > after
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    home = tmp_path_factory.mktemp("home")
    tmp = tmp_path_factory.mktemp("trust")
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    with FakeProvider.running() as fake, short_tmpdir() as root:
        try:
            served = unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))
            with served.client() as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                connection = connect(client, fake)
                yield World(Agent(served, fake, client, connection["id"]), home, tmp)
        finally:
            launcher.close()


def turn(s: Session, message: str = "hello") -> list[Frame]:
    with s.events() as events:
        assert s.submit(message) == {"run_id": s.id, "status": "started"}
        return events.until_kind("turn_complete")


def marker_hook(marker: Path, event: str = "UserPromptSubmit") -> dict[str, Any]:
    return {"event": event, "command": f"echo ran >> {marker}"}


# ------------------------------------------------------------------------------ the rule itself


def test_a_cloned_projects_hooks_run_only_once_trusted_and_again_after_a_change(
    world: World,
) -> None:
    marker = world.tmp / f"marker-{uuid.uuid4().hex[:8]}"
    pid, path = world.cloned([marker_hook(marker)])
    s = world.agent.session("manual", project_id=pid)

    # Untrusted: the first message of a session runs nothing, in manual mode, asked or not.
    for _ in range(2):
        s.push(answer("Hi."))
        frames = turn(s)
        assert list(payloads(frames, "hook_completed")) == []
        assert not marker.exists()
    info = world.state(pid)
    assert info["state"] == "untrusted" and info["trusted_digest"] is None
    assert info["files"] == [".foya/hooks.json"] and info["errors"] == []
    assert info["runs"] == [
        {
            "kind": "hook",
            "file": ".foya/hooks.json",
            "event": "UserPromptSubmit",
            "command": f"echo ran >> {marker}",
            "name": None,
            "matcher": None,
            "enabled": True,
            "may_approve": False,
        }
    ]
    # Asked once for this content, not once per message.
    asked = world.requests_of(pid)
    assert len(asked) == 1
    assert asked[0]["digest"] == info["digest"] and asked[0]["path"] == str(path)
    assert [r["command"] for r in asked[0]["runs"]] == [f"echo ran >> {marker}"]

    # Trusting content the user did not see is refused and changes nothing.
    stale = world.trust(pid, digest="sha256:" + "0" * 64)
    assert_error(stale, 409, "trust_digest_changed")
    assert world.state(pid)["state"] == "untrusted"

    trusted = world.trust(pid, digest=info["digest"])
    assert trusted.status_code == 200, trusted.text
    assert trusted.json()["state"] == "trusted"
    assert trusted.json()["trusted_digest"] == info["digest"]
    store = world.agent.served.data_dir / "trust.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    s.push(answer("Hi."))
    ran = list(payloads(turn(s), "hook_completed"))
    assert len(ran) == 1 and not ran[0]["error"]
    assert marker.read_text().split() == ["ran"]

    # A hand edit (a `git pull`) makes the project untrusted again, until trusted anew.
    (path / HOOKS).write_text(json.dumps([marker_hook(marker), marker_hook(marker)]))
    changed = world.state(pid)
    assert changed["state"] == "untrusted" and changed["digest"] != info["digest"]
    assert changed["trusted_digest"] == info["digest"] and len(changed["runs"]) == 2
    s.push(answer("Hi."))
    assert list(payloads(turn(s), "hook_completed")) == []
    assert marker.read_text().split() == ["ran"]
    assert [a["digest"] for a in world.requests_of(pid)] == [info["digest"], changed["digest"]]

    # Untrusting stops it as well.
    assert world.trust(pid).json()["state"] == "trusted"
    untrusted = world.client.delete(f"/projects/{pid}/trust")
    assert untrusted.status_code == 200 and untrusted.json()["state"] == "untrusted"
    assert untrusted.json()["trusted_digest"] is None
    s.push(answer("Hi."))
    assert list(payloads(turn(s), "hook_completed")) == []
    assert marker.read_text().split() == ["ran"]


def test_the_users_own_hooks_still_run_in_an_untrusted_project(world: World) -> None:
    own = world.tmp / f"own-{uuid.uuid4().hex[:8]}"
    theirs = world.tmp / f"theirs-{uuid.uuid4().hex[:8]}"
    pid, _ = world.cloned([marker_hook(theirs)])
    put = world.client.put("/hooks", json={"scope": "global", "hooks": [marker_hook(own)]})
    assert put.status_code == 200, put.text
    try:
        s = world.agent.session("manual", project_id=pid)
        s.push(answer("Hi."))
        assert len(list(payloads(turn(s), "hook_completed"))) == 1
        assert own.read_text().split() == ["ran"]
        assert not theirs.exists()
    finally:
        assert world.client.put("/hooks", json={"scope": "global", "hooks": []}).status_code == 200


def test_a_hook_file_that_is_no_regular_file_is_hashed_not_waited_on(world: World) -> None:
    pid, path = world.cloned([])
    (path / HOOKS).unlink()
    os.mkfifo(path / HOOKS)  # reading a FIFO would block until a writer comes
    info = world.state(pid)
    assert info["state"] == "untrusted" and info["runs"] == [] and len(info["errors"]) == 1


# ---------------------------------------------------------------------------- writes via the API


def test_the_users_own_put_keeps_trust_but_never_adopts_a_planted_file(world: World) -> None:
    marker = world.tmp / f"api-{uuid.uuid4().hex[:8]}"
    # A project with no hooks at all: what the user writes through PUT /hooks is all theirs.
    path = world.tmp / f"p-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    pid = world.client.post("/projects", json={"path": str(path)}).json()["id"]
    assert world.state(pid)["state"] == "none"
    body = {"scope": "project", "project_id": pid, "hooks": [marker_hook(marker)]}
    assert world.client.put("/hooks", json=body).status_code == 200
    assert world.state(pid)["state"] == "trusted"
    s = world.agent.session("manual", project_id=pid)
    s.push(answer("Hi."))
    turn(s)
    assert marker.read_text().split() == ["ran"]

    # A planted file: the user's PUT of the list it read back does not make it trusted.
    planted, _ = world.cloned([marker_hook(marker)])
    body = {"scope": "project", "project_id": planted, "hooks": [marker_hook(marker)] * 2}
    assert world.client.put("/hooks", json=body).status_code == 200
    assert world.state(planted)["state"] == "untrusted"


# ----------------------------------------------------------------------------- PermissionRequest


def approval_asked(s: Session, tool_call: str) -> list[Frame]:
    """A turn whose bash call waits for the user; the user denies it. Its frames."""
    s.push(tools(call(tool_call, "bash", {"command": "touch ran-by-approval"})), answer("."))
    with s.events() as events:
        s.submit()
        asked = events.until_kind("approval_request")
        request = asked[-1].data["payload"]
        decided = s.client.post(
            f"/sessions/{s.id}/approvals/{request['id']}", json={"decision": "denied"}
        )
        assert decided.status_code == 204
        return asked + events.until_kind("turn_complete")


def test_a_hooks_allow_approves_only_with_may_approve_in_a_trusted_project(world: World) -> None:
    allow = {
        "event": "PermissionRequest",
        "matcher": "^bash$",
        "command": 'echo \'{"decision": "allow"}\'',
    }
    pid, path = world.cloned([allow])
    s = world.agent.session("manual", project_id=pid)

    # Untrusted: the hook does not run; the user is asked.
    frames = approval_asked(s, "a")
    assert list(payloads(frames, "hook_completed")) == []

    # Trusted but without may_approve: it runs, its allow is recorded as none, the user is asked.
    assert world.trust(pid).json()["state"] == "trusted"
    frames = approval_asked(s, "b")
    said = list(payloads(frames, "hook_completed"))
    assert len(said) == 1 and said[0]["decision"] == "none"
    assert said[0]["reason"] == NOT_AN_APPROVER

    # may_approve written into the file is a change: untrusted again, the user is still asked.
    (path / HOOKS).write_text(json.dumps([{**allow, "may_approve": True}]))
    info = world.state(pid)
    assert info["state"] == "untrusted" and info["runs"][0]["may_approve"] is True
    frames = approval_asked(s, "c")
    assert list(payloads(frames, "hook_completed")) == []
    assert not (path / "ran-by-approval").exists()

    # Trusted with may_approve: the hook approves; no approval request.
    assert world.trust(pid, digest=info["digest"]).json()["state"] == "trusted"
    s.push(tools(call("d", "bash", {"command": "touch ran-by-hook"})), answer("Done."))
    frames = turn(s)
    assert "approval_request" not in [f.event for f in frames]
    assert [p["decision"] for p in payloads(frames, "hook_completed")] == ["allow"]
    assert (path / "ran-by-hook").exists()


# -------------------------------------------------------------------------------- errors and CLI


def test_trust_routes_refuse_an_unknown_project_and_a_bad_body(world: World) -> None:
    for method in ("GET", "PUT", "DELETE"):
        got = world.client.request(method, "/projects/nope/trust")
        assert got.status_code == 404, got.text
    pid, _ = world.cloned([])
    assert_error(world.trust(pid, digest=5), 400, "bad_request")
    assert_error(world.trust(pid, extra=True), 400, "bad_request")
    assert world.state(pid)["trusted_digest"] is None
    assert (
        not (world.agent.served.data_dir / "trust.json").exists()
        or pid
        not in json.loads((world.agent.served.data_dir / "trust.json").read_text())["projects"]
    )


def test_cli_shows_trusts_and_untrusts(world: World) -> None:
    marker = world.tmp / "cli-marker"
    pid, _ = world.cloned([marker_hook(marker)])
    uds = world.agent.served.kernel.uds
    assert uds is not None

    def foya(*args: str, process: bool = False) -> Any:
        argv = ("projects", *args, "--socket", str(uds))
        done = run_foya(*argv) if process else run_cli(*argv)
        assert done.returncode == 0, done.stderr
        return done.stdout

    # this one through `python -m app`, in a process of its own; the others in process
    shown = foya("show-trust", pid, process=True)
    assert "state    untrusted" in shown and f"echo ran >> {marker}" in shown
    digest = world.state(pid)["digest"]
    assert json.loads(foya("trust", pid, "--digest", digest, "--json"))["state"] == "trusted"
    assert json.loads(foya("untrust", pid, "--json"))["state"] == "untrusted"
    stale = run_cli("projects", "trust", pid, "--digest", "sha256:0", "--socket", str(uds))
    assert stale.returncode == 1 and "trust_digest_changed" in stale.stderr
    bad = run_cli("projects", "trust", "../sessions", "--socket", str(uds))
    assert bad.returncode != 0 and "not a project id" in bad.stderr


def test_a_deleted_projects_trust_is_forgotten(world: World) -> None:
    pid, _ = world.cloned([marker_hook(world.tmp / "never")])
    assert world.trust(pid).json()["state"] == "trusted"
    store = world.agent.served.data_dir / "trust.json"
    assert pid in json.loads(store.read_text())["projects"]
    assert world.client.delete(f"/projects/{pid}").status_code == 204
    assert pid not in json.loads(store.read_text())["projects"]


# ------------------------------------------------------------------- the store, in process


def test_trust_survives_a_restart_and_a_broken_store_trusts_nothing(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".foya").mkdir(parents=True)
    (project / HOOKS).write_text(json.dumps([marker_hook(tmp_path / "m")]))
    data = tmp_path / "data"
    data.mkdir()

    def opened() -> ProjectTrust:
        projects = Projects(data)
        projects.load()
        return ProjectTrust(data, projects, ContextJournal(data, Broker(Metrics())))

    async def first() -> str:
        trust = opened()
        made = await trust.projects.create(str(project), None)
        assert (await trust.trust(made["id"])).state == "trusted"
        return made["id"]

    pid = asyncio.run(first())
    assert opened().snapshot(pid).trusted  # a new process reads the stored digest
    (data / "trust.json").write_text("{not json")
    broken = opened()
    assert not broken.snapshot(pid).trusted
    assert broken.info(pid).state == "untrusted"
