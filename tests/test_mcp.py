"""MCP servers (app.kernel.mcp) against real servers written with the official SDK
(tests/support/mcp_servers/server.py): over stdio, started by the kernel, and over streamable HTTP,
started by the test on 127.0.0.1.

In-process kernels (tests/support/inprocess.py) for turns, approvals, supervision and exposure; a
real `foya serve` for the routes, secrets in responses, files and logs, and shutdown. Each test has
a HOME of its own, so `~/.foya/mcp.json` is its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import itertools
import json
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import BOUND, FakeProvider, answer, call, tools
from support.helpers import (
    Launcher,
    base_env,
    run_foya,
    short_tmpdir,
    threaded_server,
    wait_until,
)
from support.inprocess import InProcess, inprocess_kernel, tool_messages
from support.mcp_helpers import http_mcp_server
from support.streams_helpers import assert_error, unix_kernel

from app import events as k
from app.events import Event
from app.kernel.emit import topic
from app.kernel.mcp import McpConfig, ServerConfig
from app.kernel.turns.inputs import TurnInput

SERVER = Path(__file__).parent / "support" / "mcp_servers" / "server.py"
_models = itertools.count()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own (the kernel's `~/.foya`), a short call timeout and a patient
    connect timeout: connecting a stdio server starts a Python process that imports the SDK,
    which took 4 s on a loaded 2-core machine, so a 3 s bound never connected there. The tests
    that assert the connect timeout itself set a short one (`connect_within`)."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.setenv("FOYA_MCP_CALL_TIMEOUT", "2")
    monkeypatch.setenv("FOYA_MCP_CONNECT_TIMEOUT", "30")
    return path


def connect_within(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The connect timeout (which also bounds each ping) of the kernels built from now on."""
    monkeypatch.setenv("FOYA_MCP_CONNECT_TIMEOUT", f"{seconds:g}")


@pytest.fixture
def rig(home: Path, tmp_path: Path) -> Iterator[InProcess]:
    # The fake registry is on loopback, behind the guarded fetcher (tests/test_guarded_fetch.py).
    with inprocess_kernel(tmp_path / "data", web_fetch_allow_hosts="127.0.0.1") as rig:
        yield rig


def stdio(server_id: str = "t", mode: str = "normal", **fields: Any) -> ServerConfig:
    marker = fields.pop("marker", "x")
    return ServerConfig(
        id=server_id,
        enabled=True,
        transport="stdio",
        command=sys.executable,
        args=[str(SERVER), "stdio", f"--marker={marker}", mode],
        **fields,
    )


def configure(rig: InProcess, *servers: ServerConfig) -> None:
    rig.run(rig.kernel.mcp.replace(McpConfig(servers=list(servers))))


def status(rig: InProcess, server_id: str = "t") -> dict[str, Any]:
    return next(s for s in rig.kernel.mcp.statuses() if s["id"] == server_id)


def connected(rig: InProcess, server_id: str = "t") -> None:
    wait_until(lambda: status(rig, server_id)["state"] == "connected", "connected", BOUND)


def new_session(rig: InProcess, approval_mode: str = "full_access") -> tuple[str, str]:
    model = f"mcp-{next(_models)}"
    fields = {"connection_id": rig.connection, "model": model, "approval_mode": approval_mode}
    session = rig.run(rig.kernel.sessions.create(fields))
    rig.run(rig.kernel.sessions.update(session["id"], {"title": "mcp"}))
    return str(session["id"]), model


async def drive(rig: InProcess, session: str, decision: str = "approved") -> list[Event]:
    """Run a turn to its end, answering every approval request with `decision`."""
    seen: list[Event] = []
    with rig.kernel.broker.subscribe(topic(session)) as sub:
        await rig.kernel.turns.submit(session, TurnInput(message="go"))
        while not seen or seen[-1].kind != k.TURN_COMPLETE:
            event = await asyncio.wait_for(sub.get(), BOUND)
            assert event is not None
            if not event.seq:
                continue
            seen.append(event)
            if event.kind == k.APPROVAL_REQUEST:
                await rig.kernel.decide_approval(session, event.payload["id"], None, decision)
    return seen


def turn(rig: InProcess, session: str, decision: str = "approved") -> list[Event]:
    return rig.run(drive(rig, session, decision))


def offered(fake: FakeProvider, model: str, index: int) -> set[str]:
    request = fake.chats(model)[index]
    return {t["function"]["name"] for t in request.body.get("tools") or []}


# ------------------------------------------------------------------------------ tool calls


def test_stdio_tool_call_goes_through_approval_and_back_to_the_model(rig: InProcess) -> None:
    configure(rig, stdio(env={"SECRET_ENV": "s3cret-env-value"}))
    connected(rig)
    session, model = new_session(rig, "manual")
    rig.fake.push(model, tools(call("c1", "mcp__t__echo", {"text": "hello mcp"})), answer("ok"))
    rig.fake.push(model, tools(call("c2", "mcp__t__env_sha256", {"name": "SECRET_ENV"})))
    rig.fake.push(model, answer("done"))
    events = turn(rig, session)
    request = next(e.payload for e in events if e.kind == k.APPROVAL_REQUEST)
    assert request["action"] == "execute"
    assert request["tool_name"] == "mcp__t__echo"
    assert "t/echo" in request["detail"]
    assert [m["content"] for m in tool_messages(events)] == ["hello mcp"]
    sent = rig.fake.chats(model)[1].messages
    assert any(m.get("role") == "tool" and m.get("content") == "hello mcp" for m in sent)
    events = turn(rig, session)
    digest = hashlib.sha256(b"s3cret-env-value").hexdigest()
    assert [m["content"] for m in tool_messages(events)] == [digest]


def test_a_denied_call_never_reaches_the_server(rig: InProcess) -> None:
    configure(rig, stdio())
    connected(rig)
    session, model = new_session(rig, "manual")
    rig.fake.push(model, tools(call("c1", "mcp__t__crash", {})), answer("ok"))
    events = turn(rig, session, "denied")
    (message,) = tool_messages(events)
    assert message["is_error"] and "denied" in message["content"]
    assert status(rig)["restarts"] == 0 and status(rig)["state"] == "connected"


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1; its URL."""
    with http_mcp_server() as url:
        yield url


def test_streamable_http_server_with_a_bearer_token(rig: InProcess, http_server: str) -> None:
    server = ServerConfig(
        id="web",
        enabled=True,
        transport="streamable_http",
        url=http_server,
        bearer_token="tok-123456",
        headers={"X-Api-Key": "key-abcdef", "X-Plain": "visible"},
    )
    configure(rig, server)
    connected(rig, "web")
    session, model = new_session(rig, "manual")
    calls = [
        call("c1", "mcp__web__header_sha256", {"name": "authorization"}),
        call("c2", "mcp__web__header_sha256", {"name": "x-api-key"}),
    ]
    rig.fake.push(model, tools(*calls), answer("ok"))
    events = turn(rig, session)
    actions = {e.payload["action"] for e in events if e.kind == k.APPROVAL_REQUEST}
    assert actions == {"network"}
    assert [m["content"] for m in tool_messages(events)] == [
        hashlib.sha256(b"Bearer tok-123456").hexdigest(),
        hashlib.sha256(b"key-abcdef").hexdigest(),
    ]
    assert status(rig, "web")["transport"] == "streamable_http"


# ----------------------------------------------------------------------------- supervision


def test_a_server_that_crashes_at_start_is_retried_with_backoff(rig: InProcess) -> None:
    configure(rig, stdio(mode="crash"))
    wait_until(lambda: status(rig)["restarts"] >= 2, "two restarts", BOUND)
    now = status(rig)
    assert now["state"] in ("error", "connecting")
    wait_until(lambda: status(rig)["state"] == "error", "the error state", BOUND)
    now = status(rig)
    assert now["error"] and now["retry_at"] and now["tool_count"] == 0


def test_a_crash_mid_session_restarts_the_server_and_the_turn_goes_on(rig: InProcess) -> None:
    configure(rig, stdio())
    connected(rig)
    session, model = new_session(rig)
    rig.fake.push(model, tools(call("c1", "mcp__t__crash", {})), answer("after the crash"))
    events = turn(rig, session)
    (message,) = tool_messages(events)
    assert message["is_error"] and "MCP tool failed" in message["content"]
    assert events[-1].payload.get("status", "completed") == "completed"
    wait_until(lambda: status(rig)["restarts"] >= 1, "a restart", BOUND)
    connected(rig)
    rig.fake.push(model, tools(call("c2", "mcp__t__add", {"a": 2, "b": 3})), answer("ok"))
    assert tool_messages(turn(rig, session))[0]["content"].startswith("5")


def test_a_hung_call_times_out_and_the_frozen_server_is_restarted(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect_within(monkeypatch, 8)  # the unanswered ping: the restart is due well within BOUND
    with inprocess_kernel(tmp_path / "data") as rig:
        configure(rig, stdio())
        connected(rig)
        session, model = new_session(rig)
        rig.fake.push(model, tools(call("c1", "mcp__t__freeze", {})), answer("moved on"))
        events = turn(rig, session)
        (message,) = tool_messages(events)
        assert message["is_error"] and "did not answer within 2s" in message["content"]
        assert rig.fake.chats(model)[-1].messages[-1]["content"] == message["content"]
        wait_until(lambda: status(rig)["restarts"] >= 1, "a restart", BOUND)
        connected(rig)


def test_a_server_that_never_answers_does_not_hold_up_the_kernel(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect_within(monkeypatch, 3)  # what it asserts: the connect timeout ends the handshake
    with inprocess_kernel(tmp_path / "data") as rig:
        configure(rig, stdio(mode="hang"))
    # Configured before this start: the kernel starts while the server is still connecting.
    with inprocess_kernel(tmp_path / "data") as rig:
        assert status(rig)["state"] == "connecting"
        wait_until(lambda: status(rig)["state"] == "error", "the error state", BOUND)
        assert "did not answer in time" in status(rig)["error"]


def test_shutdown_ends_every_server_process(home: Path, tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    with inprocess_kernel(tmp_path / "data") as rig:
        # One serving, one that never reads its stdin (only a kill ends it).
        configure(rig, stdio(marker=marker), stdio("h", "hang", marker=marker))
        connected(rig)
        wait_until(lambda: len(marked(marker)) == 2, "both servers running", BOUND)
    assert not marked(marker), "the kernel's stop left an MCP server running"


def test_a_broken_mcp_json_refuses_the_start_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".foya").mkdir(parents=True)
    broken = {"mcpServers": {"x": {"command": "y", "exposure": "sometimes"}}}
    (home / ".foya" / "mcp.json").write_text(json.dumps(broken))
    data = tmp_path / "data"
    done = run_foya(
        "serve", "--data-dir", str(data), "--socket", str(tmp_path / "k.sock"),
        env=base_env(HOME=str(home)),
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{home}/.foya/mcp.json: server 'x': exposure:" in done.stderr


# -------------------------------------------------------------------------------- exposure


def test_deferred_tools_are_offered_once_tool_search_found_them(rig: InProcess) -> None:
    configure(rig, stdio(exposure="deferred"), stdio("h", exposure="hidden"))
    connected(rig)
    connected(rig, "h")
    session, model = new_session(rig)
    rig.fake.push(
        model,
        tools(call("c0", "mcp__t__echo", {"text": "too early"})),
        tools(call("c1", "tool_search", {"query": "echo"})),
        tools(call("c2", "mcp__t__echo", {"text": "now"})),
        answer("ok"),
    )
    events = turn(rig, session)
    early, found, now = (m["content"] for m in tool_messages(events))
    assert "find it with tool_search" in early
    assert [row["name"] for row in json.loads(found)["activated"]] == ["mcp__t__echo"]
    assert now == "now"
    first, _, third, _ = (offered(rig.fake, model, i) for i in range(4))
    assert "tool_search" in first and "mcp__t__echo" not in first
    assert "mcp__t__echo" in third
    assert not any(name.startswith("mcp__h__") for name in first | third)


# ------------------------------------------------------------------------------- registry


def test_registry_entries_become_ready_configs(rig: InProcess) -> None:
    entries = {
        "servers": [
            {
                "server": {
                    "name": "io.x/remote",
                    "title": "Remote",
                    "version": "1.0",
                    "remotes": [{"type": "streamable-http", "url": "https://x.test/mcp"}],
                }
            },
            {
                "server": {
                    "name": "io.x/npm",
                    "version": "2.0",
                    "packages": [
                        {
                            "registryType": "npm",
                            "identifier": "@x/srv",
                            "transport": {"type": "stdio"},
                            "environmentVariables": [{"name": "X_KEY", "isRequired": True}],
                        }
                    ],
                }
            },
        ]
    }
    seen: list[str] = []

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps(entries).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    with threaded_server(Registry) as server:
        rig.kernel.mcp.registry_url = f"http://127.0.0.1:{server.server_port}/v0.1/servers"
        remote, npm = rig.run(rig.kernel.mcp.registry("files"))
    assert seen == ["/v0.1/servers?limit=40&search=files"]
    assert remote["installable"] and remote["config"]["transport"] == "streamable_http"
    assert remote["config"]["url"] == "https://x.test/mcp" and remote["name"] == "Remote"
    assert not npm["installable"] and npm["reason"]
    assert npm["config"]["command"] == "npx" and npm["config"]["args"] == ["@x/srv@2.0"]


# ----------------------------------------------------------------- routes, secrets, shutdown


def marked(marker: str) -> list[int]:
    """PIDs of live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_routes_secrets_and_shutdown_through_foya_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    marker = uuid.uuid4().hex
    secrets = {"env": "env-" + uuid.uuid4().hex, "token": "tok-" + uuid.uuid4().hex}
    secrets["header"] = "hdr-" + uuid.uuid4().hex
    launcher = Launcher(tmp_path / "procs")
    try:
        with short_tmpdir() as root:
            served = unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))
            with served.client() as client:
                check_routes(client, marker, secrets, home)
                check_cli(root / "k.sock", home, client.get("/mcp").json(), tmp_path)
            logs = served.kernel.stdout() + served.kernel.stderr()
            assert marked(marker), "the stdio server runs while the kernel does"
            served.kernel.stop(signal.SIGTERM)
            assert not marked(marker), "the kernel's stop left an MCP server running"
    finally:
        launcher.close()
    logs += served.kernel.stdout() + served.kernel.stderr()
    for value in secrets.values():
        assert value not in logs
    stored = (home / ".foya" / "mcp.json").read_text()
    credentials = home / ".foya" / "mcp-credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    for value in secrets.values():
        assert value not in stored and value in credentials.read_text()


def check_routes(client: httpx.Client, marker: str, secrets: dict[str, str], home: Path) -> None:
    server: dict[str, Any] = {
        "id": "t",
        "enabled": True,
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(SERVER), "stdio", f"--marker={marker}"],
        "env": {"API_TOKEN": secrets["env"]},
    }
    remote = {
        "id": "r",
        "enabled": False,
        "transport": "streamable_http",
        "url": "http://127.0.0.1:9/mcp",
        "bearer_token": secrets["token"],
        "headers": {"Authorization": secrets["header"], "X-Plain": "shown"},
    }
    # Never reads its stdin: only a kill ends it (the kernel's stop must).
    hung = {**server, "id": "h", "args": [*server["args"], "hang"], "env": {}}
    response = client.put("/mcp", json={"servers": [server, remote, hung]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body == client.get("/mcp").json()
    text = json.dumps(body)
    assert all(value not in text for value in secrets.values())
    shown_h, shown_r, shown_t = body["servers"]
    assert shown_h["args"][-1] == "hang" and "env" not in shown_h
    assert shown_t["env"] == {"API_TOKEN": "********"} and "bearer_token" not in shown_r
    assert shown_r["has_token"] is True
    assert shown_r["headers"] == {"Authorization": "********", "X-Plain": "shown"}

    # Bad configurations: 400, and nothing changes (answers, files).
    files = {p.name: p.read_bytes() for p in (home / ".foya").iterdir()}
    bad_bodies = [
        ({"servers": [{**server, "command": ""}]}, "mcp_update_failed"),
        ({"servers": [server, {**server}]}, "mcp_update_failed"),
        ({"servers": [{**server, "id": "a/../b"}]}, "mcp_update_failed"),
        ({"servers": [{**server, "transport": "carrier-pigeon"}]}, "mcp_update_failed"),
        ({"servers": [{**remote, "url": "file:///etc/passwd"}]}, "mcp_update_failed"),
        ({"servers": [{**server, "env": {"NEW": "********"}}]}, "mcp_update_failed"),
        ({"servers": [{**server, "exposure": "sometimes"}]}, "bad_request"),
    ]
    for bad, code in bad_bodies:
        assert_error(client.put("/mcp", json=bad), 400, code)
    assert client.get("/mcp").json() == body
    assert {p.name: p.read_bytes() for p in (home / ".foya").iterdir()} == files

    # Sent back as answered, the secrets stay as stored.
    assert client.put("/mcp", json=body).json() == body
    assert files == {p.name: p.read_bytes() for p in (home / ".foya").iterdir()}

    def states() -> dict[str, str]:
        return {s["id"]: s["state"] for s in client.get("/mcp/status").json()}

    wait_until(lambda: states()["t"] == "connected", "connected", BOUND)
    assert states() == {"h": "connecting", "r": "disabled", "t": "connected"}
    (status_t,) = [s for s in client.get("/mcp/status").json() if s["id"] == "t"]
    assert status_t["tool_count"] == 7 and status_t["resource_count"] == 1
    assert status_t["prompt_count"] == 1 and status_t["transport"] == "stdio"

    resources = client.get("/mcp/resources", params={"server_id": "t"})
    assert resources.status_code == 200, resources.text
    assert [(r["uri"], r["mimeType"]) for r in resources.json()] == [
        ("note://readme", "text/plain")
    ]
    read = client.post("/mcp/resources/read", json={"server_id": "t", "uri": "note://readme"})
    assert read.status_code == 200, read.text
    assert read.json()["contents"][0]["text"] == "This is the readme of the test server."
    prompts = client.get("/mcp/prompts", params={"server_id": "t"}).json()
    assert [(p["name"], p["arguments"][0]["name"]) for p in prompts] == [("greet", "name")]
    got = client.post(
        "/mcp/prompts/get", json={"server_id": "t", "name": "greet", "args": {"name": "Ada"}}
    )
    assert got.status_code == 200, got.text
    assert got.json()["messages"][0]["content"]["text"] == "Please greet Ada warmly."

    assert_error(
        client.get("/mcp/resources", params={"server_id": "r"}), 502, "mcp_resources_failed"
    )
    assert_error(
        client.get("/mcp/prompts", params={"server_id": "nope"}), 404, "mcp_server_not_found"
    )
    assert_error(client.get("/mcp/resources"), 400, "bad_request")
    assert_error(
        client.post(
            "/mcp/prompts/get", json={"server_id": "t", "name": "greet", "args": {"name": 1}}
        ),
        400,
        "bad_request",
    )
    failed = client.post("/mcp/resources/read", json={"server_id": "t", "uri": "note://nope"})
    assert_error(failed, 502, "mcp_resource_read_failed")


def check_cli(sock: Path, home: Path, config: dict[str, Any], tmp_path: Path) -> None:
    """`foya mcp list|show|apply` against the running kernel."""

    def foya_mcp(*args: str) -> subprocess.CompletedProcess[str]:
        return run_foya("mcp", *args, "--socket", str(sock), env=base_env(HOME=str(home)))

    listed = foya_mcp("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == ["h", "r", "t"]
    table = foya_mcp("list")
    assert table.returncode == 0 and "connected" in table.stdout, table.stderr
    shown = foya_mcp("show")
    assert shown.returncode == 0 and json.loads(shown.stdout) == config
    path = tmp_path / "mcp-config.json"
    path.write_text(shown.stdout)
    applied = foya_mcp("apply", str(path))
    assert applied.returncode == 0 and "3 MCP server(s)" in applied.stdout, applied.stderr
    path.write_text(json.dumps({"servers": [{"id": "x", "transport": "stdio"}]}))
    refused = foya_mcp("apply", str(path))
    assert refused.returncode == 1 and "stdio transport requires command" in refused.stderr
    assert json.loads(foya_mcp("show").stdout) == config
