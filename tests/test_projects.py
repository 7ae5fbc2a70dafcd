"""Projects REST against a real `foya serve` on a Unix socket, plus the
`<data-dir>/projects.json` file it keeps (mode 0600, survives a restart)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import Launcher, short_tmpdir
from support.streams_helpers import Served, assert_error, module_kernels, new_session, unix_kernel

#: A project as served: the stored record and `available` (its directory is there now).
PROJECT_KEYS = {"id", "name", "path", "pinned", "created_at", "updated_at", "available"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with (
        short_tmpdir() as root,
        module_kernels(tmp_path_factory.mktemp("projects"), root, "k") as kernels,
    ):
        yield kernels["k"]


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as c:
        yield c


def create(client: httpx.Client, path: Path, **fields: Any) -> dict[str, Any]:
    path.mkdir(parents=True, exist_ok=True)
    response = client.post("/projects", json={"path": str(path), **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


def listed(client: httpx.Client) -> list[dict[str, Any]]:
    response = client.get("/projects")
    assert response.status_code == 200, response.text
    return list(response.json())


def by_id(client: httpx.Client, project_id: str) -> dict[str, Any] | None:
    return next((p for p in listed(client) if p["id"] == project_id), None)


def on_disk(served: Served) -> list[dict[str, Any]]:
    return list(json.loads((served.data_dir / "projects.json").read_text()))


def stored(project: dict[str, Any]) -> dict[str, Any]:
    """A served project as the file keeps it: `available` is computed, never stored."""
    return {k: v for k, v in project.items() if k != "available"}


# ------------------------------------------------------------------------------------ create


def test_create_with_default_name(client: httpx.Client, served: Served, tmp_path: Path) -> None:
    body = create(client, tmp_path / "site")
    assert set(body) == PROJECT_KEYS, body
    assert body["name"] == "New project"
    assert body["path"] == str(tmp_path / "site")
    assert body["pinned"] is False
    assert body["created_at"] == body["updated_at"] and body["available"] is True
    assert by_id(client, body["id"]) == body
    assert stored(body) in on_disk(served)


def test_create_with_name(client: httpx.Client, tmp_path: Path) -> None:
    assert create(client, tmp_path, name="  Blog  ")["name"] == "Blog"
    assert create(client, tmp_path, name="")["name"] == "New project"


def test_duplicate_paths_are_allowed(client: httpx.Client, tmp_path: Path) -> None:
    first, second = create(client, tmp_path), create(client, tmp_path)
    assert first["id"] != second["id"]
    assert first["path"] == second["path"]
    ids = {p["id"] for p in listed(client)}
    assert {first["id"], second["id"]} <= ids


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"path": "/tmp", "name": 5}, id="name-not-string"),
        pytest.param({}, id="no-path"),
        pytest.param({"path": 5}, id="path-not-string"),
    ],
)
def test_create_errors(client: httpx.Client, served: Served, body: dict[str, Any]) -> None:
    before = listed(client)
    assert_error(client.post("/projects", json=body), 400, "bad_request")
    assert listed(client) == before


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("", id="empty"),
        pytest.param("relative/dir", id="relative"),
        pytest.param("{tmp}/a\u0000b", id="nul"),
        pytest.param("{tmp}/missing", id="missing"),
        pytest.param("{tmp}/file.txt", id="regular-file"),
        pytest.param("/", id="root"),
        pytest.param("/etc", id="etc"),
        pytest.param("/proc", id="proc"),
        pytest.param("/proc/self", id="under-proc"),
        pytest.param("/sys/kernel", id="sys"),
        pytest.param("{tmp}/to-proc", id="symlink-to-proc"),
    ],
)
def test_create_refuses_paths_that_are_not_project_directories(
    client: httpx.Client, served: Served, tmp_path: Path, path: str
) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "to-proc").symlink_to("/proc")
    before, files = listed(client), on_disk(served)
    body = {"path": path.replace("{tmp}", str(tmp_path))}
    assert_error(client.post("/projects", json=body), 400, "invalid_project_path")
    assert listed(client) == before and on_disk(served) == files


def test_create_with_malformed_json(client: httpx.Client) -> None:
    response = client.post(
        "/projects", content=b'{"path": "/', headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "bad_request")


# ------------------------------------------------------------------------------------- patch


def test_rename(client: httpx.Client, served: Served, tmp_path: Path) -> None:
    project = create(client, tmp_path)
    response = client.patch(f"/projects/{project['id']}", json={"name": "Renamed"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["name"] == "Renamed"
    assert body["path"] == project["path"]
    assert body["created_at"] == project["created_at"]
    assert by_id(client, project["id"]) == body
    assert stored(body) in on_disk(served)
    assert_error(
        client.patch(f"/projects/{project['id']}", json={"name": "  "}), 400, "bad_request"
    )
    assert by_id(client, project["id"]) == body


def test_pin_and_unpin(client: httpx.Client, tmp_path: Path) -> None:
    plain = create(client, tmp_path / "a")
    project = create(client, tmp_path / "b")
    pinned = client.patch(f"/projects/{project['id']}", json={"pinned": True}).json()
    assert pinned["pinned"] is True
    assert "pinned_at" in pinned
    assert pinned["name"] == project["name"]
    order = [p["id"] for p in listed(client)]
    assert order.index(project["id"]) < order.index(plain["id"]), "pinned projects come first"
    unpinned = client.patch(f"/projects/{project['id']}", json={"pinned": False}).json()
    assert unpinned["pinned"] is False
    assert "pinned_at" not in unpinned
    assert by_id(client, project["id"]) == unpinned


def test_patch_errors(client: httpx.Client, tmp_path: Path) -> None:
    project = create(client, tmp_path)
    assert_error(client.patch("/projects/nope", json={"name": "x"}), 404, "not_found")
    response = client.patch(f"/projects/{project['id']}", json={"path": "/elsewhere"})
    assert_error(response, 400, "bad_request")
    assert by_id(client, project["id"]) == project


# ------------------------------------------------------------------------------------ delete


def test_delete_removes_its_sessions_but_not_its_directory(
    client: httpx.Client, served: Served, tmp_path: Path
) -> None:
    directory = tmp_path / "code"
    (directory / "src").mkdir(parents=True)
    (directory / "src" / "main.py").write_text("print('hi')\n")
    project = create(client, directory)
    other = create(client, tmp_path / "other")
    ours = [new_session(client, project_id=project["id"])["id"] for _ in range(2)]
    adopted = new_session(client)["id"]  # joins the project later, through PATCH
    response = client.patch(f"/sessions/{adopted}", json={"project_id": project["id"]})
    assert response.status_code == 200, response.text
    forked = client.post(f"/sessions/{ours[0]}/fork").json()["id"]  # inherits the project
    theirs = new_session(client, project_id=other["id"])["id"]
    free = new_session(client)["id"]

    response = client.delete(f"/projects/{project['id']}")
    assert response.status_code == 204, response.text
    assert response.content == b""

    for sid in (*ours, adopted, forked):
        assert_error(client.get(f"/sessions/{sid}/history"), 404, "not_found")
    listed_sessions = {s["id"] for s in client.get("/sessions").json()}
    assert not listed_sessions & {*ours, adopted, forked}
    assert {theirs, free} <= listed_sessions
    assert by_id(client, project["id"]) is None
    assert by_id(client, other["id"]) == other
    assert all(p["id"] != project["id"] for p in on_disk(served))
    # the directory and its files stay
    assert (directory / "src" / "main.py").read_text() == "print('hi')\n"
    # a session cannot join a project that is gone
    response = client.post("/sessions", json={"project_id": project["id"]})
    assert_error(response, 400, "project_not_found")


def test_delete_unknown_project(client: httpx.Client) -> None:
    assert_error(client.delete("/projects/nope"), 404, "not_found")


# ------------------------------------------------------------------------- the file on disk


def test_projects_file_is_private_and_survives_a_restart(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path / "procs")
    try:
        with short_tmpdir() as root:
            first = unix_kernel(launcher, root, "k")
            with first.client() as c:
                made = create(c, tmp_path / "keep", name="Keep")
                pinned = c.patch(f"/projects/{made['id']}", json={"pinned": True}).json()
                before = listed(c)
            path = first.data_dir / "projects.json"
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert on_disk(first) == [stored(pinned)]
            assert first.kernel.stop() == 0
            second = unix_kernel(launcher, root, "k")
            with second.client() as c:
                assert listed(c) == before
                session = new_session(c, project_id=made["id"])
                assert session["project_id"] == made["id"]
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        launcher.close()
