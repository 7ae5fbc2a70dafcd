"""Rules and memory against a real `foya serve`:
the Markdown files under `$HOME/.foya` and `<project>/.foya/rules` are the source of truth, and
the REST routes read them afresh, write them atomically (0600) and never leave their directories.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import Served, assert_error, unix_kernel

RULES = ("global", "project")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One kernel whose HOME is a temp dir, with one registered project."""
    home = tmp_path_factory.mktemp("home")
    project = tmp_path_factory.mktemp("project")
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path_factory.mktemp("context"))
        try:
            served = start(launcher, root, home)
            with served.client() as client:
                made = client.post("/projects", json={"path": str(project)})
                assert made.status_code == 201, made.text
                yield {
                    "launcher": launcher,
                    "root": root,
                    "home": home,
                    "served": served,
                    "project": project,
                    "project_id": made.json()["id"],
                }
        finally:
            launcher.close()


def start(launcher: Launcher, root: Path, home: Path) -> Served:
    return unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))


@pytest.fixture
def client(world: dict[str, Any]) -> Iterator[httpx.Client]:
    with world["served"].client() as c:
        yield c


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if status != 204 else None


def tree(*roots: Path) -> dict[Path, bytes]:
    """Every file below `roots` with its bytes (to show a refused request wrote nothing)."""
    return {p: p.read_bytes() for r in roots for p in sorted(r.rglob("*")) if p.is_file()}


def test_scopes_are_separate(world: dict[str, Any], client: httpx.Client) -> None:
    pid = world["project_id"]
    rule = ok(client.post("/rules", json={"scope": "global", "content": "Use ruff."}), 201)
    memory = ok(
        client.post(
            "/memories", json={"scope": "project", "project_id": pid, "content": "API uses SSE."}
        ),
        201,
    )
    assert rule["scope"] == "global" and "project_id" not in rule
    assert memory["scope"] == "project" and memory["project_id"] == pid
    assert rule["id"] in [r["id"] for r in ok(client.get("/rules?scope=global"))]
    assert rule["id"] not in [
        r["id"] for r in ok(client.get(f"/rules?scope=project&project_id={pid}"))
    ]
    assert [m["id"] for m in ok(client.get(f"/memories?scope=project&project_id={pid}"))] == [
        memory["id"]
    ]
    assert memory["id"] not in [m["id"] for m in ok(client.get("/memories?scope=global"))]
    home = world["home"]
    assert "Use ruff." in (home / ".foya/rules/user_rules.md").read_text()
    memory_file = home / ".foya/memory/projects" / str(world["project"]).lstrip("/")
    assert "API uses SSE." in (memory_file / "project_memory.md").read_text()
    ok(client.delete(f"/memories/{memory['id']}"), 204)
    assert ok(client.get(f"/memories?scope=project&project_id={pid}")) == []


def test_content_only_patch_keeps_metadata(world: dict[str, Any], client: httpx.Client) -> None:
    pid = world["project_id"]
    for scope in RULES:
        body = {
            "scope": scope,
            "project_id": pid,
            "content": "Review migrations.",
            "name": "migrations",
            "description": "Schema changes.",
            "trigger": "model_decision",
        }
        rule = ok(client.post("/rules", json=body), 201)
        patched = ok(client.patch(f"/rules/{rule['id']}", json={"content": "Review every one."}))
        assert patched["content"] == "Review every one."
        for key in ("name", "description", "trigger", "scope", "path"):
            assert patched.get(key) == rule.get(key), key
        if scope == "global":  # a project rule file holds no times: they are its mtime
            assert patched["created_at"] == rule["created_at"]
        listed = ok(client.get(f"/rules?scope={scope}&project_id={pid}"))
        assert next(r for r in listed if r["id"] == rule["id"])["name"] == "migrations"


def test_memory_appends_then_patch_replaces(world: dict[str, Any], client: httpx.Client) -> None:
    first = ok(client.post("/memories", json={"scope": "global", "content": "Likes tea."}), 201)
    second = ok(
        client.post("/memories", json={"scope": "global", "content": "Lives in Oslo."}), 201
    )
    assert second["id"] == first["id"]
    assert second["content"] == "Likes tea.\n\nLives in Oslo."
    replaced = ok(client.patch(f"/memories/{first['id']}", json={"content": "Likes coffee."}))
    assert ok(client.get("/memories?scope=global")) == [replaced]
    assert_error(client.patch(f"/memories/{first['id']}", json={"name": "x"}), 400, "bad_request")


def test_hand_edit_is_read_without_restart(world: dict[str, Any], client: httpx.Client) -> None:
    rule = ok(client.post("/rules", json={"scope": "global", "content": "Old text here."}), 201)
    assert rule in ok(client.get("/rules?scope=global"))  # read (and cached) before the edit
    path = world["home"] / ".foya/rules/user_rules.md"
    path.write_text(path.read_text().replace("Old text here.", "Edited by hand."))
    listed = {r["id"]: r for r in ok(client.get("/rules?scope=global"))}
    assert listed[rule["id"]]["content"] == "Edited by hand."

    rules_dir = world["project"] / ".foya/rules/web"
    rules_dir.mkdir(parents=True, exist_ok=True)
    (rules_dir / "css.md").write_text("---\nname: css\nglobs: ['*.css']\n---\nUse BEM.\n")
    pid = world["project_id"]
    found = [
        r for r in ok(client.get(f"/rules?scope=project&project_id={pid}")) if r["name"] == "css"
    ]
    assert len(found) == 1 and found[0]["globs"] == ["*.css"] and found[0]["trigger"] == "glob"
    assert found[0]["path"] == "web/css.md" and "error" not in found[0]


def test_malformed_front_matter_is_reported(world: dict[str, Any], client: httpx.Client) -> None:
    rules_dir = world["project"] / ".foya/rules"
    rules_dir.mkdir(parents=True, exist_ok=True)
    (rules_dir / "broken.md").write_text("---\nname: [unclosed\n---\nBroken rule.\n")
    (rules_dir / "fine.md").write_text("---\nname: fine\ntrigger: manual\n---\nFine rule.\n")
    pid = world["project_id"]
    listed = {r["path"]: r for r in ok(client.get(f"/rules?scope=project&project_id={pid}"))}
    assert "error" not in listed["fine.md"] and listed["fine.md"]["trigger"] == "manual"
    assert "front matter" in listed["broken.md"]["error"]
    assert listed["broken.md"]["content"].startswith("---")
    ok(client.delete(f"/rules/{listed['broken.md']['id']}"), 204)
    assert not (rules_dir / "broken.md").exists()


@pytest.mark.parametrize(
    "path",
    ["../escape.md", "/etc/escape.md", "a/../../escape", "a\0b.md", "a\\..\\x.md", "a/b/c/d/e.md"],
)
def test_path_tricks_are_refused(world: dict[str, Any], client: httpx.Client, path: str) -> None:
    siblings = sorted(world["project"].parent.iterdir())
    before = tree(world["project"], world["home"])
    body = {"scope": "project", "project_id": world["project_id"], "content": "x", "path": path}
    assert_error(client.post("/rules", json=body), 400, "invalid_context_item")
    assert tree(world["project"], world["home"]) == before
    assert sorted(world["project"].parent.iterdir()) == siblings


def test_symlink_out_of_the_project_is_refused(
    world: dict[str, Any], client: httpx.Client, tmp_path: Path
) -> None:
    rules_dir = world["project"] / ".foya/rules"
    rules_dir.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (rules_dir / "out").symlink_to(outside)
    (outside / "leak.md").write_text("---\nname: leak\n---\nSecret.\n")
    try:
        body = {
            "scope": "project",
            "project_id": world["project_id"],
            "content": "x",
            "path": "out/evil.md",
        }
        assert_error(client.post("/rules", json=body), 400, "invalid_context_item")
        assert sorted(p.name for p in outside.iterdir()) == ["leak.md"]
        pid = world["project_id"]
        listed = ok(client.get(f"/rules?scope=project&project_id={pid}"))
        assert "Secret." not in [r["content"] for r in listed]
    finally:
        (rules_dir / "out").unlink()


def test_bad_scope_and_unknown_ids(client: httpx.Client) -> None:
    assert_error(client.get("/rules?scope=team"), 400, "invalid_context_item")
    assert_error(client.get("/rules?scope=project"), 400, "invalid_context_item")
    assert_error(client.get("/memories?scope=project&project_id=nope"), 404, "not_found")
    body = {"scope": "project", "project_id": "nope", "content": "x"}
    assert_error(client.post("/rules", json=body), 404, "not_found")
    assert_error(
        client.post("/rules", json={"scope": "global", "content": "  "}),
        400,
        "invalid_context_item",
    )
    bad_trigger = {"scope": "global", "content": "x", "trigger": "sometimes"}
    assert_error(client.post("/rules", json=bad_trigger), 400, "invalid_context_item")
    assert_error(
        client.post("/rules", json={"scope": "global", "content": "x", "x": 1}), 400, "bad_request"
    )
    assert_error(client.patch("/rules/nope", json={"content": "x"}), 404, "not_found")
    assert_error(client.delete("/memories/nope"), 404, "not_found")


def test_files_are_private(world: dict[str, Any], client: httpx.Client) -> None:
    pid = world["project_id"]
    body = {"scope": "project", "project_id": pid, "content": "Private.", "path": "deep/er/p.md"}
    ok(client.post("/rules", json=body), 201)
    ok(client.post("/memories", json={"scope": "global", "content": "Private too."}), 201)
    home = world["home"]
    files = [
        home / ".foya/rules/user_rules.md",
        home / ".foya/memory/user_profile.md",
        world["project"] / ".foya/rules/deep/er/p.md",
    ]
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for directory in (
        home / ".foya",
        home / ".foya/memory",
        world["project"] / ".foya/rules/deep/er",
    ):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


def test_memory_switch_survives_a_restart(world: dict[str, Any], client: httpx.Client) -> None:
    assert ok(client.get("/settings/memory")) == {"enabled": True}
    assert ok(client.put("/settings/memory", json={"enabled": False})) == {"enabled": False}
    assert_error(client.put("/settings/memory", json={"enabled": "no"}), 400, "bad_request")
    world["served"].kernel.stop()
    world["served"] = start(world["launcher"], world["root"], world["home"])
    with world["served"].client() as fresh:
        assert ok(fresh.get("/settings/memory")) == {"enabled": False}
    settings = world["served"].data_dir / "context/memory-settings.json"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
