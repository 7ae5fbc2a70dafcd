"""A hostile MCP server (tests/support/mcp_servers/hostile.py) against the kernel's MCP edges: what
it
floods is capped, what it leaks is masked, and a plugin's server over HTTP is address-guarded.

Caps and secrets through a real `foya serve` (its routes, its log, the requests the fake
provider receives, the session's events); the address guard in process, with the test MCP
server over streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import BOUND, Agent, FakeProvider, answer, call, connect, tools
from support.helpers import Launcher, base_env, short_tmpdir, wait_until
from support.inprocess import InProcess, inprocess_kernel
from support.mcp_helpers import http_mcp_server
from support.streams_helpers import unix_kernel

from app.kernel.mcp import ServerConfig
from app.kernel.mcp.common import MAX_OUTPUT, cut_mark
from app.kernel.mcp.redact import MASK, Redactor

HOSTILE = Path(__file__).parent / "support" / "mcp_servers" / "hostile.py"
SERVER = Path(__file__).parent / "support" / "mcp_servers" / "server.py"
MARK = cut_mark()


def hostile(server_id: str, secret: str, mode: str = "flood") -> dict[str, Any]:
    return {
        "id": server_id,
        "enabled": True,
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(HOSTILE), mode],
        "env": {"HOSTILE_SECRET": secret},
    }


def statuses(client: httpx.Client) -> dict[str, dict[str, Any]]:
    response = client.get("/mcp/status")
    assert response.status_code == 200, response.text
    return {s["id"]: s for s in response.json()}


def test_a_hostile_server_is_capped_and_its_secrets_masked_everywhere(tmp_path: Path) -> None:
    """Configured as `${VAR}` (expanded from the kernel's environment) and as a literal, the
    secret a server echoes in errors, tool output, descriptions, resources and prompts is never
    in `GET /mcp/status`, the kernel's log, the session's events or what the model receives;
    resources and prompts reach the routes and the model cut at MAX_OUTPUT, with the mark."""
    expanded, literal = f"kern-{uuid.uuid4().hex}", f"lit-{uuid.uuid4().hex}"
    secrets = (expanded, literal)
    home = tmp_path / "home"
    home.mkdir()
    env = base_env(HOME=str(home), KERNEL_SECRET=expanded)
    launcher = Launcher(tmp_path / "procs")
    try:
        with FakeProvider.running() as fake, short_tmpdir() as root:
            served = unix_kernel(launcher, root, "k", env=env)
            with served.client() as client:
                client.timeout = httpx.Timeout(BOUND)
                agent = Agent(served, fake, client, connect(client, fake)["id"])
                servers = [
                    hostile("h", "${KERNEL_SECRET}"),
                    hostile("lit", literal),
                    hostile("hr", "${KERNEL_SECRET}", "refuse"),
                    hostile("lr", literal, "refuse"),
                ]
                response = client.put("/mcp", json={"servers": servers})
                assert response.status_code == 200, response.text

                def settled() -> bool:
                    found = statuses(client)
                    up = all(found[i]["state"] == "connected" for i in ("h", "lit"))
                    return up and all(found[i].get("error") for i in ("hr", "lr"))

                wait_until(settled, "the hostile servers to connect or fail", BOUND)
                found = statuses(client)
                for server_id in ("hr", "lr"):
                    assert MASK in found[server_id]["error"], found[server_id]
                assert not any(s in json.dumps(found) for s in secrets)

                check_routes(client, secrets)
                frames, history = check_turn(agent, secrets)
                for value in (json.dumps([f.data for f in frames]), json.dumps(history)):
                    assert not any(s in value for s in secrets)
                assert not any(s in json.dumps(statuses(client)) for s in secrets)
            served.kernel.stop()
    finally:
        launcher.close()
    log = served.kernel.stdout() + served.kernel.stderr()
    assert "MCP server failed" in log  # the refusals were logged (with their error)...
    assert MASK in log
    assert not any(s in log for s in secrets)  # ...masked


def check_routes(client: httpx.Client, secrets: tuple[str, ...]) -> None:
    """The resource and prompt routes answer the hostile 1.5 MB texts cut, marked, masked."""
    for server_id in ("h", "lit"):
        read = client.post(
            "/mcp/resources/read", json={"server_id": server_id, "uri": "big://resource"}
        )
        assert read.status_code == 200, read.text
        (content,) = read.json()["contents"]
        assert content["uri"] == "big://resource" and content["mimeType"] == "text/plain"
        assert content["text"].startswith(f"secret={MASK}\n")
        assert len(content["text"]) <= MAX_OUTPUT + len(MARK) and content["text"].endswith(MARK)

        got = client.post("/mcp/prompts/get", json={"server_id": server_id, "name": "big"})
        assert got.status_code == 200, got.text
        (message,) = got.json()["messages"]
        assert message["role"] == "user" and message["content"]["type"] == "text"
        text = message["content"]["text"]
        assert len(text) <= MAX_OUTPUT + len(MARK) and text.endswith(MARK)
        assert not any(s in read.text + got.text for s in secrets)


def check_turn(agent: Agent, secrets: tuple[str, ...]) -> tuple[list[Any], list[Any]]:
    """One step calling every hostile edge, then an answer; the model's second request."""
    session = agent.session("full_access")
    calls = []
    for server_id in ("h", "lit"):
        calls += [
            call(
                f"r-{server_id}",
                "mcp_read_resource",
                {"server_id": server_id, "uri": "big://resource"},
            ),
            call(f"p-{server_id}", "mcp_get_prompt", {"server_id": server_id, "name": "big"}),
            call(f"l-{server_id}", f"mcp__{server_id}__leak", {}),
            call(f"f-{server_id}", f"mcp__{server_id}__fail", {}),
        ]
    frames = session.turn(tools(*calls), answer("Done."))
    chats = session.chats()
    assert len(chats) == 2
    for chat in chats:  # tool descriptions (first request), tool results (second)
        assert not any(s in json.dumps(chat.body) for s in secrets)
    offered = {t["function"]["name"]: t for t in chats[0].body["tools"]}
    assert offered["mcp__h__leak"]["function"]["description"] == f"Leaks. The key is {MASK}."
    results = {m["tool_call_id"]: m["content"] for m in chats[1].messages if m["role"] == "tool"}
    assert set(results) == {c.id for c in calls}
    for server_id in ("h", "lit"):
        for kind in ("r", "p"):
            text = results[f"{kind}-{server_id}"]
            assert len(text) <= MAX_OUTPUT + len(MARK) and MARK in text
        assert results[f"l-{server_id}"] == f"here is what I was given: {MASK}"
        assert MASK in results[f"f-{server_id}"]
    return frames, session.history()


# --------------------------------------------------------------------------- address guard


@pytest.fixture
def http_url() -> Iterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1; its URL."""
    with http_mcp_server() as url:
        yield url


def remote(server_id: str, url: str) -> ServerConfig:
    return ServerConfig(id=server_id, enabled=True, transport="streamable_http", url=url)


def status(rig: InProcess, server_id: str) -> dict[str, Any]:
    return next(s for s in rig.kernel.mcp.statuses() if s["id"] == server_id)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.setenv("FOYA_MCP_CONNECT_TIMEOUT", "5")
    return path


def test_a_plugins_http_server_may_not_reach_loopback(
    home: Path, tmp_path: Path, http_url: str
) -> None:
    """A plugin's server at 127.0.0.1 is refused (web_fetch's rule); the same URL configured by
    the user (`PUT /mcp`) connects: the user's own say-so."""
    with inprocess_kernel(tmp_path / "data") as rig:
        rig.run(rig.kernel.mcp.set_plugin_servers([remote("plug", http_url)]))
        wait_until(
            lambda: bool(status(rig, "plug").get("error")), "the plugin server to fail", BOUND
        )
        assert status(rig, "plug")["state"] == "error"
        assert "refused to connect to 127.0.0.1" in status(rig, "plug")["error"]
        assert not [t for t in rig.kernel.turns.tool_runner.tools if t.startswith("mcp__plug")]

        from app.kernel.mcp import McpConfig

        rig.run(rig.kernel.mcp.replace(McpConfig(servers=[remote("mine", http_url)])))
        wait_until(lambda: status(rig, "mine")["state"] == "connected", "connected", BOUND)


def test_the_allow_list_lets_a_plugins_server_reach_an_allowed_host(
    home: Path, tmp_path: Path, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOYA_WEB_FETCH_ALLOW_HOSTS", "127.0.0.1")
    with inprocess_kernel(tmp_path / "data") as rig:
        rig.run(rig.kernel.mcp.set_plugin_servers([remote("plug", http_url)]))
        wait_until(lambda: status(rig, "plug")["state"] == "connected", "connected", BOUND)
        assert "mcp__plug__echo" in rig.kernel.turns.tool_runner.tools


# ------------------------------------------------------------------------------ the redactor


def test_the_redactor_masks_every_spelling_of_a_secret_but_not_short_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Configured, expanded and JSON-escaped spellings are masked, the longest secret whole;
    values shorter than MIN_SECRET (`true`, `1`) are settings and stay."""
    monkeypatch.setenv("QUOTED_SECRET", 'pa"ss\\word-1')
    server = ServerConfig(
        id="s",
        transport="stdio",
        command="x",
        env={"A": "${QUOTED_SECRET}", "DEBUG": "true", "B": "abcdef", "C": "abcdefgh"},
        headers={"X-Api-Key": "key-123456", "X-Plain": "plain-value"},
        bearer_token="tok-abcdef",
    )
    redact = Redactor.for_server(server)
    said = json.dumps({"err": 'pa"ss\\word-1', "ok": True, "h": "plain-value"})
    assert redact.text(said) == json.dumps({"err": MASK, "ok": True, "h": "plain-value"})
    assert redact.text('got pa"ss\\word-1, abcdefgh, key-123456, tok-abcdef') == (
        f"got {MASK}, {MASK}, {MASK}, {MASK}"
    )
    assert redact.value({"k": ["${QUOTED_SECRET}", "true"]}) == {"k": [MASK, "true"]}
    assert Redactor([]).text("anything") == "anything"
