"""Plugins (Foya's `plugin` package): packages of skills, commands,
agent definitions and MCP servers installed under `~/.foya/plugins`.

A real `foya serve` whose HOME is a temp directory, and whose git configuration
(`GIT_CONFIG_GLOBAL`) names a hook template and a hooks path that would each leave a marker file
if git ran a hook: installs from a local directory and from a `file://` git repository made with
`git init`, the plugin's skill, command and agent appearing in `GET /skills`, `GET /commands`
and `GET /agents` while it is enabled, removal, every refused install (nothing left behind),
and marketplaces. The MCP server definitions are checked in process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import assert_error, unix_kernel

from app.kernel.plugins import Plugins
from app.kernel.plugins.git import parse_source
from app.kernel.plugins.manifest import MANIFEST_SCHEMA
from app.kernel.plugins.mcpspec import MCP_SCHEMA
from app.kernel.plugins.models import Problem

HOOK = "#!/bin/sh\ntouch {marker}\n"


def make_plugin(place: Path, name: str, **manifest: Any) -> Path:
    """A package named `name` with one skill, one command, one agent definition, an MCP
    server, and scripts that would leave a marker file if anything ran them."""
    place.mkdir(parents=True)
    plugin_json = {"$schema": MANIFEST_SCHEMA, "name": name, "version": "1.0.0", **manifest}
    (place / "plugin.json").write_text(json.dumps(plugin_json))
    skill = place / "skills" / f"{name}-skill" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f"---\nname: {name}-skill\ndescription: a plugin skill\n---\nDo it.\n")
    (place / "commands").mkdir()
    (place / "commands" / f"{name}-cmd.md").write_text("---\ndescription: run\n---\nRun $@\n")
    (place / "agents").mkdir()
    agent = f"---\nname: {name}-agent\ndescription: a plugin agent\n---\nWork.\n"
    (place / "agents" / f"{name}-agent.md").write_text(agent)
    server = {"type": "stdio", "command": "./server.sh", "args": ["${PLUGIN_DATA}/db"]}
    mcp = {"$schema": MCP_SCHEMA, "mcpServers": {"tools": server}}
    (place / "mcp.json").write_text(json.dumps(mcp))
    for script in ("install.sh", "setup.sh"):
        (place / script).write_text(HOOK.format(marker=place.parent / "ran-from-package"))
        (place / script).chmod(0o755)
    # The MCP server is the plugin's code the kernel does run, once installed and enabled (as a
    # configured server is); this one fails at once and is retried with a backoff.
    (place / "server.sh").write_text("#!/bin/sh\nexit 1\n")
    (place / "server.sh").chmod(0o755)
    return place


def git(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def git_repo(place: Path) -> str:
    """Make `place` a git repository holding its files (and a hook of its own in `.git`)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
    git("init", "-q", "-b", "main", cwd=place, env=env)
    hook = place / ".git" / "hooks" / "post-checkout"
    hook.write_text(HOOK.format(marker=place.parent / "ran-repo-hook"))
    hook.chmod(0o755)
    git("add", "-A", cwd=place, env=env)
    who = ["-c", "user.name=t", "-c", "user.email=t@t"]
    git(*who, "commit", "-qm", "plugin", cwd=place, env=env)
    return place.resolve().as_uri()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One kernel whose HOME is a temp dir and whose git configuration would run hooks."""
    base = tmp_path_factory.mktemp("plugins")
    home, markers = base / "home", base / "markers"
    home.mkdir()
    markers.mkdir()
    template = base / "template" / "hooks"
    template.mkdir(parents=True)
    hooks_path = base / "hooks"
    hooks_path.mkdir()
    for hook in ("post-checkout", "post-merge", "reference-transaction"):
        for place, tag in ((template, "template"), (hooks_path, "hookspath")):
            (place / hook).write_text(HOOK.format(marker=markers / f"{tag}-{hook}"))
            (place / hook).chmod(0o755)
    gitconfig = base / "gitconfig"
    gitconfig.write_text(
        f"[init]\n\ttemplateDir = {template.parent}\n[core]\n\thooksPath = {hooks_path}\n"
    )
    env = base_env(HOME=str(home), GIT_CONFIG_GLOBAL=str(gitconfig))
    with short_tmpdir() as root:
        launcher = Launcher(base / "procs")
        try:
            served = unix_kernel(launcher, root, "k", env=env)
            yield {"served": served, "home": home, "markers": markers, "env": env, "base": base}
        finally:
            launcher.close()


@pytest.fixture
def client(world: dict[str, Any]) -> Iterator[httpx.Client]:
    with world["served"].client() as c:
        yield c


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if status != 204 else None


def visible(client: httpx.Client, name: str) -> dict[str, bool]:
    """Whether the plugin's skill, command, agent and MCP server are listed now."""
    skills = {s["name"] for s in ok(client.get("/skills"))}
    commands = {c["name"] for c in ok(client.get("/commands", params={"scope": "effective"}))}
    agents = {a["name"] for a in ok(client.get("/agents"))}
    servers = {s["id"] for s in ok(client.get("/mcp/status"))}
    return {
        "skill": f"{name}-skill" in skills,
        "command": f"{name}-cmd" in commands,
        "agent": f"{name}-agent" in agents,
        "mcp": f"plugin:{name}:tools" in servers,
    }


def installed(world: dict[str, Any]) -> list[str]:
    """Every entry of the install directory, staging ones included."""
    root = world["home"] / ".foya" / "plugins"
    return sorted(os.listdir(root)) if root.exists() else []


def test_local_install_list_disable_enable_remove(
    world: dict[str, Any], client: httpx.Client, tmp_path: Path
) -> None:
    source = make_plugin(tmp_path / "src", "alpha", description="the alpha plugin")
    assert visible(client, "alpha") == {
        "skill": False,
        "command": False,
        "agent": False,
        "mcp": False,
    }

    item = ok(client.post("/plugins/install", json={"source": str(source)}), 201)
    root = world["home"] / ".foya" / "plugins" / "alpha"
    assert item == {
        "$schema": MANIFEST_SCHEMA,
        "name": "alpha",
        "version": "1.0.0",
        "description": "the alpha plugin",
        "path": str(root),
        "data_path": str(world["home"] / ".foya" / "plugin-data" / "alpha"),
        "source": str(source),
        "enabled": True,
        "valid": True,
        "skill_count": 1,
        "mcp_server_count": 1,
        "command_count": 1,
        "agent_count": 1,
    }
    assert (root / "skills" / "alpha-skill" / "SKILL.md").is_file()
    assert oct(root.stat().st_mode & 0o777) == "0o700"
    assert [p["name"] for p in ok(client.get("/plugins"))] == ["alpha"]
    assert visible(client, "alpha") == {"skill": True, "command": True, "agent": True, "mcp": True}

    off = ok(client.patch("/plugins/alpha", json={"enabled": False}))
    assert [(p["name"], p["enabled"]) for p in off] == [("alpha", False)]
    assert visible(client, "alpha") == {
        "skill": False,
        "command": False,
        "agent": False,
        "mcp": False,
    }
    state = json.loads((world["served"].data_dir / "plugins.json").read_text())
    assert state == {"disabled": ["alpha"], "sources": {"alpha": str(source)}}
    assert oct((world["served"].data_dir / "plugins.json").stat().st_mode & 0o777) == "0o600"

    on = ok(client.patch("/plugins/alpha", json={"enabled": True}))
    assert [(p["name"], p["enabled"]) for p in on] == [("alpha", True)]
    assert visible(client, "alpha") == {"skill": True, "command": True, "agent": True, "mcp": True}

    ok(client.delete("/plugins/alpha"), 204)
    assert ok(client.get("/plugins")) == []
    assert not root.exists()
    assert visible(client, "alpha") == {
        "skill": False,
        "command": False,
        "agent": False,
        "mcp": False,
    }
    assert_error(client.delete("/plugins/alpha"), 400, "plugin_remove_failed")
    assert_error(
        client.patch("/plugins/alpha", json={"enabled": True}), 400, "plugin_update_failed"
    )
    assert not (tmp_path / "ran-from-package").exists()


def test_git_install_runs_no_hook_and_nothing_of_the_package(
    world: dict[str, Any], client: httpx.Client, tmp_path: Path
) -> None:
    url = git_repo(make_plugin(tmp_path / "repo", "beta"))
    # The same clone without the kernel's guards runs the configured hooks: the test can fail.
    git("clone", "-q", url, str(tmp_path / "plain"), cwd=tmp_path, env=world["env"])
    assert "hookspath-post-checkout" in os.listdir(world["markers"])
    for marker in os.listdir(world["markers"]):
        os.remove(world["markers"] / marker)

    item = ok(client.post("/plugins/install", json={"source": url}), 201)
    assert (item["name"], item["source"], item["enabled"]) == ("beta", url, True)
    assert os.listdir(world["markers"]) == []
    assert not (tmp_path / "ran-repo-hook").exists()
    assert not (tmp_path / "ran-from-package").exists()
    root = Path(item["path"])
    assert not (root / ".git").exists()
    assert os.access(root / "server.sh", os.X_OK)  # kept executable, never run
    assert visible(client, "beta") == {"skill": True, "command": True, "agent": True, "mcp": True}
    assert installed(world) == ["beta"]  # no staging directory left

    again = client.post("/plugins/install", json={"source": url})
    assert (
        "plugin already exists: beta"
        in assert_error(again, 400, "plugin_install_failed")["message"]
    )
    replaced = ok(client.post("/plugins/install", json={"source": url, "replace": True}), 201)
    assert replaced["name"] == "beta"
    assert installed(world) == ["beta"]
    ok(client.delete("/plugins/beta"), 204)


def bad_package(tmp_path: Path, case: str) -> Path:
    place = make_plugin(tmp_path / case, "gamma")
    manifest = json.loads((place / "plugin.json").read_text())
    if case == "not-json":
        (place / "plugin.json").write_text("{not json")
    elif case == "no-schema":
        (place / "plugin.json").write_text(json.dumps({"name": "gamma"}))
    elif case == "traversal-name":
        (place / "plugin.json").write_text(json.dumps({**manifest, "name": "../../escape"}))
    elif case == "upper-name":
        (place / "plugin.json").write_text(json.dumps({**manifest, "name": "Gamma"}))
    elif case == "bad-author":
        (place / "plugin.json").write_text(json.dumps({**manifest, "author": "someone"}))
    elif case == "no-manifest":
        (place / "plugin.json").unlink()
    elif case == "symlink-escape":
        os.symlink("/etc", place / "skills" / "etc")
    elif case == "symlink-file":
        os.symlink(tmp_path / "outside.txt", place / "agents" / "linked.md")
    elif case == "fifo":
        os.mkfifo(place / "pipe")
    elif case == "mcp-not-object":
        (place / "mcp.json").write_text("[]")
    return place


BAD = {
    "not-json": "plugin.json is not valid JSON",
    "no-schema": "$schema must be",
    "traversal-name": "is not a valid plugin name",
    "upper-name": "is not a valid plugin name",
    "bad-author": "author must be an object",
    "no-manifest": "plugin.json is missing",
    "symlink-escape": "symbolic links are not accepted in a plugin: skills/etc",
    "symlink-file": "symbolic links are not accepted in a plugin: agents/linked.md",
    "fifo": "only regular files and directories: pipe",
    "mcp-not-object": "mcp.json may contain only $schema and mcpServers",
}


def test_bad_packages_and_sources_are_refused_and_leave_nothing(
    world: dict[str, Any], client: httpx.Client, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    state = world["served"].data_dir / "plugins.json"
    before = state.read_bytes() if state.exists() else None
    for case, message in BAD.items():
        source = bad_package(tmp_path, case)
        refused = client.post("/plugins/install", json={"source": str(source)})
        assert message in assert_error(refused, 400, "plugin_install_failed")["message"], case
    inside = world["home"] / ".foya" / "plugins"
    sources = {
        "https://user:hunter2@example.com/p.git": "credential-free",
        "http://example.com/p.git": "credential-free",
        "https://example.com/p.git?token=hunter2": "credential-free",
        "ext::sh -c touch% /tmp/pwned": "only credential-free",
        str(tmp_path / "missing"): "expected a local directory",
        str(inside): "inside the plugin install directory",
    }
    for named, message in sources.items():
        said = assert_error(
            client.post("/plugins/install", json={"source": named}), 400, "plugin_install_failed"
        )
        assert message in said["message"], named
        assert "hunter2" not in said["message"]
    for body in ({"source": "  "}, {"source": 1}, {"source": "x", "other": 1}, {}):
        assert_error(client.post("/plugins/install", json=body), 400, "bad_request")
    assert_error(client.patch("/plugins/x", json={}), 400, "bad_request")
    assert ok(client.get("/plugins")) == []
    assert installed(world) == []
    assert (state.read_bytes() if state.exists() else None) == before
    assert visible(client, "gamma") == {
        "skill": False,
        "command": False,
        "agent": False,
        "mcp": False,
    }
    assert not (tmp_path / "ran-from-package").exists()


def test_marketplace_register_browse_preview_install_remove(
    world: dict[str, Any], client: httpx.Client, tmp_path: Path
) -> None:
    market = tmp_path / "market"
    make_plugin(market / "plugins" / "delta", "delta")
    remote = git_repo(make_plugin(tmp_path / "remote", "epsilon"))
    catalog = {
        "name": "shop",
        "metadata": {"description": "a test marketplace"},
        "owner": {"name": "Tester"},
        "plugins": [
            {"name": "delta", "description": "local", "source": "./plugins/delta"},
            {"name": "escape", "source": "../outside"},
            {"name": "epsilon", "source": {"source": "url", "url": remote}},
            {"name": "npm-one", "source": {"source": "npm", "package": "x"}},
        ],
    }
    (market / ".claude-plugin").mkdir()
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(catalog))

    added = ok(client.post("/plugin-marketplaces", json={"source": str(market)}), 201)
    assert added == {
        "id": "shop",
        "name": "shop",
        "description": "a test marketplace",
        "repository": str(market),
        "owner": {"name": "Tester"},
        "source": str(market),
        "format": "claude",
        "enabled": True,
    }
    assert ok(client.get("/plugin-marketplaces")) == [added]
    again = client.post("/plugin-marketplaces", json={"source": str(market)})
    assert_error(again, 400, "plugin_marketplace_add_failed")

    entries = {p["name"]: p for p in ok(client.get("/plugin-marketplaces/shop"))["plugins"]}
    assert entries["delta"]["installable"] and not entries["delta"]["installed"]
    assert "escapes its root" in entries["escape"]["reason"]
    assert not entries["escape"]["installable"]
    assert entries["epsilon"]["installable"]
    assert "npm" in entries["npm-one"]["reason"]

    preview = ok(client.get("/plugin-marketplaces/shop/plugins/delta"))
    assert (preview["valid"], preview["compatibility"], preview["skill_count"]) == (
        True,
        "compatible",
        1,
    )
    assert_error(
        client.get("/plugin-marketplaces/shop/plugins/escape"), 404, "plugin_preview_failed"
    )

    delta = ok(client.post("/plugin-marketplaces/shop/plugins/delta/install"), 201)
    assert (delta["name"], delta["source"]) == ("delta", "marketplace:shop:delta")
    epsilon = ok(client.post("/plugin-marketplaces/shop/plugins/epsilon/install", json={}), 201)
    assert epsilon["source"] == "marketplace:shop:epsilon"
    missing = client.post("/plugin-marketplaces/shop/plugins/escape/install")
    assert_error(missing, 404, "plugin_install_failed")
    entries = {p["name"]: p for p in ok(client.get("/plugin-marketplaces/shop"))["plugins"]}
    assert (entries["delta"]["installed"], entries["delta"]["installed_version"]) == (True, "1.0.0")
    assert os.listdir(world["markers"]) == []

    catalog["metadata"] = {"description": "refreshed"}
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(catalog))
    assert ok(client.post("/plugin-marketplaces/shop/refresh"))["description"] == "refreshed"
    assert ok(client.get("/plugin-marketplaces/shop"))["description"] == "refreshed"

    off = ok(client.patch("/plugin-marketplaces/shop", json={"enabled": False}))
    assert [m["enabled"] for m in off] == [False]
    assert_error(client.get("/plugin-marketplaces/shop"), 502, "plugin_marketplace_failed")
    ok(client.delete("/plugin-marketplaces/shop"), 204)
    assert ok(client.get("/plugin-marketplaces")) == []
    assert_error(client.get("/plugin-marketplaces/shop"), 404, "plugin_marketplace_failed")
    assert_error(
        client.delete("/plugin-marketplaces/shop"), 400, "plugin_marketplace_remove_failed"
    )
    for name in ("delta", "epsilon"):
        ok(client.delete(f"/plugins/{name}"), 204)
    assert installed(world) == []


# ------------------------------------------------------------------------------ in process


def test_mcp_server_definitions_of_enabled_plugins(tmp_path: Path) -> None:
    source = make_plugin(tmp_path / "src", "zeta")
    servers = json.loads((source / "mcp.json").read_text())
    servers["mcpServers"]["escape"] = {"type": "stdio", "command": "./../../bin/sh"}
    servers["mcpServers"]["web"] = {"type": "streamable-http", "url": "https://mcp.example/x"}
    servers["mcpServers"]["plain"] = {"type": "sse", "url": "http://mcp.example/x"}
    (source / "mcp.json").write_text(json.dumps(servers))
    plugins = Plugins(tmp_path / "home" / ".foya", tmp_path / "data")
    item = asyncio.run(plugins.install(str(source), False))
    assert item.mcp_server_count == 2
    assert {d.component for d in item.diagnostics or ()} == {"mcp:escape", "mcp:plain"}

    root = tmp_path / "home" / ".foya" / "plugins" / "zeta"
    data = tmp_path / "home" / ".foya" / "plugin-data" / "zeta"
    found = [s.model_dump(exclude_none=True) for s in plugins.mcp_servers()]
    assert found == [
        {
            "id": "plugin:zeta:tools",
            "name": "zeta/tools",
            "enabled": True,
            "plugin_id": "zeta",
            "transport": "stdio",
            "command": str(root / "server.sh"),
            "args": [f"{data}/db"],
            "env": {"PLUGIN_ROOT": str(root), "PLUGIN_DATA": str(data)},
            "cwd": str(root),
        },
        {
            "id": "plugin:zeta:web",
            "name": "zeta/web",
            "enabled": True,
            "plugin_id": "zeta",
            "transport": "streamable_http",
            "url": "https://mcp.example/x",
        },
    ]
    assert data.is_dir()
    asyncio.run(plugins.set_enabled("zeta", False))
    assert plugins.mcp_servers() == []
    assert plugins.enabled_dirs() == []


def test_sources_git_may_fetch() -> None:
    assert parse_source("owner/repo").location == "https://github.com/owner/repo.git"
    assert parse_source("git@github.com:o/r.git").kind == "git"
    assert parse_source("file:///srv/repo").kind == "git"
    for bad in ("file://host/srv/repo", "ssh://u:p@h/r", "https://h/r#frag", "-c core.x=y"):
        with pytest.raises(Problem):
            parse_source(bad)
