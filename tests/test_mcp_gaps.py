"""MCP as a new user of Foya's desktop client meets it, against real
servers: the SDK's test server (tests/support/mcp_servers/server.py) and a bare one that offers
tools
only (tests/support/mcp_servers/bare.py).

- A server with no resources or prompts (none advertised, or advertised and "Method not
  found") lists `[]`, and `GET /mcp/status` names each server's tools.
- A server whose process is killed is shown `disconnected` at once (the ping is 10 minutes
  away), then started again.
- An item `GET /mcp/registry` marks installable is accepted by `PUT /mcp` exactly as the
  desktop's McpView.vue `installMarketMcp` sends it (the configured servers as `GET /mcp`
  answered them, plus `item.config`), with the registry's `namespace/name` id; the registry is
  a fake on loopback (`FOYA_MCP_REGISTRY_URL`).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import BOUND
from support.helpers import Launcher, base_env, short_tmpdir, threaded_server, wait_until
from support.inprocess import InProcess, inprocess_kernel
from support.streams_helpers import assert_error, unix_kernel

from app.kernel.mcp import McpConfig, ServerConfig

SERVERS = Path(__file__).parent / "support" / "mcp_servers"
SDK_SERVER, BARE = SERVERS / "server.py", SERVERS / "bare.py"
SDK_TOOLS = ["add", "crash", "echo", "env_sha256", "freeze", "header_sha256", "sleep"]
NOTICED = 10.0  # seconds: a killed server must be seen gone well before the next ping (600 s)
STATES = {"disabled", "disconnected", "connecting", "connected", "error"}  # McpStatus.state


def stdio(server_id: str, script: Path, *args: str) -> dict[str, Any]:
    return {
        "id": server_id,
        "name": server_id,
        "enabled": True,
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(script), *args],
    }


def statuses(client: httpx.Client) -> dict[str, dict[str, Any]]:
    answer = client.get("/mcp/status")
    assert answer.status_code == 200, answer.text
    return {s["id"]: s for s in answer.json()}


def all_connected(client: httpx.Client, *ids: str) -> None:
    def up() -> bool:
        now = statuses(client)
        return all(now[i]["state"] == "connected" for i in ids)

    wait_until(up, f"{ids} connected", BOUND)


@pytest.fixture
def served_env(tmp_path: Path) -> Iterator[tuple[Launcher, Path, dict[str, str]]]:
    """A launcher, a short root for sockets, and an environment with a HOME of its own."""
    home = tmp_path / "home"
    home.mkdir()
    launcher = Launcher(tmp_path / "procs")
    try:
        with short_tmpdir() as root:
            yield launcher, root, base_env(HOME=str(home), FOYA_MCP_CONNECT_TIMEOUT="10")
    finally:
        launcher.close()


# ------------------------------------------------------ resources, prompts and tool names


def test_servers_without_resources_or_prompts_list_none_and_status_names_tools(
    served_env: tuple[Launcher, Path, dict[str, str]],
) -> None:
    launcher, root, env = served_env
    servers = [
        stdio("silent", BARE, "silent"),  # advertises tools only
        stdio("unimplemented", BARE, "unimplemented"),  # advertises all, answers -32601
        stdio("sdk", SDK_SERVER, "stdio"),
        {**stdio("off", BARE), "enabled": False},
    ]
    served = unix_kernel(launcher, root, "k", env=env)
    with served.client() as client:
        put = client.put("/mcp", json={"version": 1, "servers": servers})
        assert put.status_code == 200, put.text
        all_connected(client, "silent", "unimplemented", "sdk")
        now = statuses(client)
        for server_id in ("silent", "unimplemented"):
            assert now[server_id]["tools"] == ["alpha", "beta"]
            assert now[server_id]["tool_count"] == 2
            assert now[server_id]["resource_count"] == now[server_id]["prompt_count"] == 0
            for route in ("/mcp/resources", "/mcp/prompts"):
                listed = client.get(route, params={"server_id": server_id})
                assert listed.status_code == 200, (route, server_id, listed.text)
                assert listed.json() == []
        assert sorted(now["sdk"]["tools"]) == SDK_TOOLS
        assert now["sdk"]["tool_count"] == len(SDK_TOOLS)
        assert now["off"]["state"] == "disabled" and now["off"]["tools"] == []
        assert all(s["state"] in STATES for s in now.values())
        # A server that has them still lists them.
        resources = client.get("/mcp/resources", params={"server_id": "sdk"}).json()
        assert [r["uri"] for r in resources] == ["note://readme"]
        # Not connected is still an error, not an empty list.
        off = client.get("/mcp/prompts", params={"server_id": "off"})
        assert_error(off, 502, "mcp_prompts_failed")


# ----------------------------------------------------------------------- a killed server


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcess]:
    """An in-process kernel whose servers are pinged only every 10 minutes."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FOYA_MCP_PING_INTERVAL", "600")
    monkeypatch.setenv("FOYA_MCP_CONNECT_TIMEOUT", "10")
    with inprocess_kernel(tmp_path / "data") as rig:
        yield rig


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


async def states_until_lost(rig: InProcess, server_id: str) -> list[dict[str, Any]]:
    """The server's status each time its state changed, watched on the kernel's own loop
    (so no state that lasts across an await is missed), until it is no longer connected."""
    seen: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + NOTICED
    while loop.time() < end:
        (now,) = (s for s in rig.kernel.mcp.statuses() if s["id"] == server_id)
        if not seen or seen[-1]["state"] != now["state"]:
            seen.append(now)
        if now["state"] != "connected":
            return seen
        await asyncio.sleep(0.01)
    raise AssertionError(f"still {seen[-1]['state']} {NOTICED:.0f} s after the kill")


def test_a_killed_server_is_shown_disconnected_at_once_then_restarted(rig: InProcess) -> None:
    marker = uuid.uuid4().hex
    server = ServerConfig.model_validate(stdio("k", SDK_SERVER, "stdio", f"--marker={marker}"))
    rig.run(rig.kernel.mcp.replace(McpConfig(servers=[server])))

    def status() -> dict[str, Any]:
        return next(s for s in rig.kernel.mcp.statuses() if s["id"] == "k")

    wait_until(lambda: status()["state"] == "connected", "connected", BOUND)
    assert sorted(status()["tools"]) == SDK_TOOLS
    (pid,) = marked(marker)
    watching = asyncio.run_coroutine_threadsafe(states_until_lost(rig, "k"), rig.loop)
    os.kill(pid, signal.SIGKILL)
    seen = watching.result(BOUND)
    assert [s["state"] for s in seen] == ["connected", "disconnected"]
    lost = seen[-1]
    assert "closed the connection" in lost["error"] and lost["retry_at"]
    assert lost["tools"] == [] and lost["tool_count"] == 0
    assert "mcp__k__echo" not in rig.kernel.mcp.tools
    # The supervisor starts it again, as for any failure.
    wait_until(lambda: status()["state"] == "connected", "connected again", BOUND)
    assert status()["restarts"] == 1 and sorted(status()["tools"]) == SDK_TOOLS
    assert marked(marker) and pid not in marked(marker)
    assert "mcp__k__echo" in rig.kernel.mcp.tools


# ------------------------------------------------------------------------------- registry


def registry_entries() -> dict[str, Any]:
    """What the public registry answers (its `v0.1/servers` shape)."""
    return {
        "servers": [
            {
                "server": {
                    "name": "io.example/bare",
                    "title": "Bare",
                    "description": "Tools only.",
                    "packages": [
                        {
                            # Run through "npx" in real life; here the test server itself.
                            "registryType": "npm",
                            "identifier": str(BARE),
                            "runtimeHint": sys.executable,
                            "transport": {"type": "stdio"},
                            "packageArguments": [{"value": "silent"}],
                            "environmentVariables": [{"name": "BARE_NOTE", "default": "n1"}],
                        }
                    ],
                }
            },
            {
                "server": {
                    "name": "io.example/remote",
                    "version": "1.0.0",
                    "remotes": [{"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}],
                }
            },
            {
                "server": {
                    "name": "../escape",
                    "remotes": [{"type": "sse", "url": "http://127.0.0.1:9/sse"}],
                }
            },
            {"server": {"name": "io.example/nothing", "packages": [{"registryType": "pypi"}]}},
        ]
    }


@pytest.fixture
def registry_url() -> Iterator[str]:
    entries = json.dumps(registry_entries()).encode()

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(entries)))
            self.end_headers()
            self.wfile.write(entries)

        def log_message(self, *args: Any) -> None:
            return None

    with threaded_server(Registry) as server:
        yield f"http://127.0.0.1:{server.server_port}/v0.1/servers"


def install(client: httpx.Client, item: dict[str, Any]) -> dict[str, Any]:
    """McpView.vue `installMarketMcp`: the servers as `GET /mcp` answered, plus the item's
    config, sent back whole (`updateMcpConfig({version: 1, servers})`)."""
    config = client.get("/mcp").json()
    body = {"version": 1, "servers": [*config["servers"], item["config"]]}
    answer = client.put("/mcp", json=body)
    assert answer.status_code == 200, answer.text
    stored: dict[str, Any] = answer.json()
    return stored


def test_an_installable_registry_item_is_accepted_as_the_client_sends_it(
    served_env: tuple[Launcher, Path, dict[str, str]], registry_url: str
) -> None:
    launcher, root, env = served_env
    # The fake registry is on loopback, behind web_fetch's guard (test_guarded_fetch).
    env = {**env, "FOYA_MCP_REGISTRY_URL": registry_url, "FOYA_WEB_FETCH_ALLOW_HOSTS": "127.0.0.1"}
    local = {**stdio("local", BARE), "env": {"LOCAL_TOKEN": "tok-" + uuid.uuid4().hex}}
    served = unix_kernel(launcher, root, "k", env=env)
    with served.client() as client:
        assert client.put("/mcp", json={"version": 1, "servers": [local]}).status_code == 200
        answer = client.get("/mcp/registry", params={"search": "example"})
        assert answer.status_code == 200, answer.text
        items = {item["id"]: item for item in answer.json()}
        assert list(items) == [
            "io.example/bare", "io.example/remote", "../escape", "io.example/nothing",
        ]  # fmt: skip
        for item in items.values():  # McpRegistryServer: config is a McpServerConfig
            assert item["config"]["id"] == item["id"] and item["config"]["enabled"] is True
            assert {"id", "name", "installable", "config"} <= item.keys()
            assert {"id", "name", "enabled", "transport"} <= item["config"].keys()
        bare, remote = items["io.example/bare"], items["io.example/remote"]
        assert bare["installable"] and remote["installable"]
        assert bare["config"]["args"] == [str(BARE), "silent"]
        escape = items["../escape"]
        assert not escape["installable"] and "invalid" in escape["reason"]
        assert not items["io.example/nothing"]["installable"]

        for item in (bare, remote):
            stored = install(client, item)
            # McpView.vue `mcpInstalled(item.id)`: the item now shows as installed.
            assert any(s["id"] == item["id"] for s in stored["servers"])
        all_connected(client, "io.example/bare", "local")
        now = statuses(client)
        assert now["io.example/bare"]["tools"] == ["alpha", "beta"]
        assert now["io.example/remote"]["state"] in ("connecting", "error")
        listed = client.get("/mcp/resources", params={"server_id": "io.example/bare"})
        assert listed.status_code == 200 and listed.json() == []

        # What an id may not be: refused, and nothing changes.
        before = client.get("/mcp").json()
        for bad in ("../escape", "a/../b", "/abs", "trailing/", "a//b", "a/b/c", ".dot", "a/.b",
                    "x" * 201):  # fmt: skip
            refused = client.put("/mcp", json={"servers": [{**local, "id": bad}]})
            assert_error(refused, 400, "mcp_update_failed")
        # Two ids whose tools would have the same names.
        twins = [{**local, "id": "io.example_bare"}, {**local, "id": "io.example/bare"}]
        assert_error(client.put("/mcp", json={"servers": twins}), 400, "mcp_update_failed")
        assert client.get("/mcp").json() == before
        served.kernel.stop(signal.SIGTERM)

    # A restart reads the registry server's secrets back under its `namespace/name` id.
    served = unix_kernel(launcher, root, "k", env=env)
    with served.client() as client:
        config = client.get("/mcp").json()
        shown = {s["id"]: s for s in config["servers"]}
        assert shown["io.example/bare"]["env"] == {"BARE_NOTE": "********"}
        assert shown["local"]["env"] == {"LOCAL_TOKEN": "********"}
        again = client.put("/mcp", json=config)  # placeholders resolve to what was read back
        assert again.status_code == 200, again.text
        all_connected(client, "io.example/bare")
