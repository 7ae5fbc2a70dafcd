"""Workspace browsing over HTTP: the session's workspace, directory
listings, the tree, text and raw reads.

A real kernel on a Unix socket; each test writes straight into its session's managed workspace
(`<data-dir>/workspaces/<session>`) and reads it back through the routes. Paths that leave the
workspace — `..`, absolute paths, NUL bytes, symbolic links pointing outside — must be refused with
`invalid_workspace_path` and must never return the outside file's content.

The answers are the desktop client's shapes (`SessionWorkspace`, `WorkspaceEntry[]`, the file's
text as a JSON string); the directory listing, beyond Foya, is `GET …/workspace/entries`.
Creating, renaming and deleting entries: tests/test_workspace_entries.py.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import Agent, Session, agent_kernel
from support.helpers import wait_until
from support.streams_helpers import assert_error

MIB = 1024 * 1024
STAMP = 1_700_000_000  # 2023-11-14T22:13:20Z
STAMP_ISO = "2023-11-14T22:13:20.000000Z"
TEXT_LIMIT = 2 * MIB
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("workspace")) as agent:
        yield agent


@pytest.fixture
def s(agent: Agent) -> Session:
    return agent.session("full_access")


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A directory outside every workspace holding `secret.txt` with a unique marker."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"SECRET-{secrets.token_hex(8)}\n")
    return outside


def write(s: Session, rel: str, data: bytes | str) -> Path:
    path = s.workspace / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


def get(s: Session, route: str, **params: str) -> httpx.Response:
    return s.client.get(f"/sessions/{s.id}/{route}", params=params)


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return dict(response.json())


# -------------------------------------------------------------------------------------- listing


def test_listing_puts_directories_first(s: Session) -> None:
    write(s, "b.txt", "hello")
    write(s, "a.md", "")
    write(s, "zdir/inner.txt", "x")
    (s.workspace / "adir").mkdir()
    os.symlink("b.txt", s.workspace / "link")
    os.mkfifo(s.workspace / "pipe")
    for name in ("b.txt", "a.md", "zdir", "adir"):
        os.utime(s.workspace / name, (STAMP, STAMP))

    body = ok(get(s, "workspace/entries"))
    assert body["root"] == str(s.workspace)
    assert body["path"] == ""
    assert body["truncated"] is False
    entries = {e["name"]: e for e in body["entries"]}
    assert [e["name"] for e in body["entries"]] == ["adir", "zdir", "a.md", "b.txt", "link", "pipe"]
    assert entries["b.txt"] == {
        "name": "b.txt",
        "path": "b.txt",
        "kind": "file",
        "size": 5,
        "modified_at": STAMP_ISO,
    }
    assert entries["a.md"]["size"] == 0 and entries["a.md"]["kind"] == "file"
    assert entries["zdir"] == {
        "name": "zdir",
        "path": "zdir",
        "kind": "dir",
        "size": 0,
        "modified_at": STAMP_ISO,
    }
    assert entries["link"]["kind"] == "other"  # a link is never followed by the listing
    assert entries["pipe"]["kind"] == "other"


def test_listing_of_a_subdirectory(s: Session) -> None:
    write(s, "src/pkg/mod.py", "x = 1\n")
    write(s, "src/main.py", "print(1)\n")
    body = ok(get(s, "workspace/entries", path="src"))
    assert body["path"] == "src"
    assert [(e["name"], e["path"], e["kind"]) for e in body["entries"]] == [
        ("pkg", "src/pkg", "dir"),
        ("main.py", "src/main.py", "file"),
    ]
    nested = ok(get(s, "workspace/entries", path="src/pkg"))
    assert [e["path"] for e in nested["entries"]] == ["src/pkg/mod.py"]
    # `..` that stays inside is fine and reported as the normalized path
    assert ok(get(s, "workspace/entries", path="src/pkg/.."))["path"] == "src"


def test_listing_of_an_empty_workspace(s: Session) -> None:
    body = ok(get(s, "workspace/entries"))
    assert body["entries"] == [] and body["truncated"] is False


def test_listing_of_a_missing_directory_is_404(s: Session) -> None:
    assert_error(get(s, "workspace/entries", path="nope"), 404, "not_found")


# -------------------------------------------------------------------------------------- files


def tree(s: Session) -> list[dict[str, Any]]:
    response = get(s, "workspace/files")
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, list)
    for entry in body:  # the client's `WorkspaceEntry`: exactly these fields, these types
        assert set(entry) == {"path", "name", "is_dir"}, entry
        assert isinstance(entry["path"], str) and isinstance(entry["name"], str)
        assert isinstance(entry["is_dir"], bool)
    return list(body)


def test_files_is_the_tree_depth_first_without_git_or_links(s: Session, secret: Path) -> None:
    write(s, "z.txt", "z")
    write(s, "a/b/c.txt", "c")
    write(s, "a/a.txt", "a")
    write(s, "B.txt", "B")
    write(s, ".hidden", "h")
    write(s, ".git/HEAD", "ref: refs/heads/main\n")
    write(s, "sub/.git/config", "[core]\n")
    write(s, "web/node_modules/left-pad/index.js", "module.exports = 1\n")
    write(s, "dist/out.js", "1\n")
    (s.workspace / "empty").mkdir()
    os.symlink("z.txt", s.workspace / "to-z")
    os.symlink(secret, s.workspace / "outdir")
    os.symlink(secret / "secret.txt", s.workspace / "outfile")
    os.mkfifo(s.workspace / "pipe")

    # Foya's order: each directory's entries by lower-cased name, a directory's contents
    # right after it; directories are entries too.
    assert [(e["path"], e["name"], e["is_dir"]) for e in tree(s)] == [
        (".hidden", ".hidden", False),
        ("a", "a", True),
        ("a/a.txt", "a.txt", False),
        ("a/b", "b", True),
        ("a/b/c.txt", "c.txt", False),
        ("B.txt", "B.txt", False),
        ("empty", "empty", True),
        ("sub", "sub", True),
        ("web", "web", True),
        ("z.txt", "z.txt", False),
    ]


def test_files_of_an_empty_workspace(s: Session) -> None:
    assert tree(s) == []


def test_the_session_workspace_is_managed(s: Session) -> None:
    body = ok(get(s, "workspace"))
    assert body == {"kind": "managed", "name": "Workspace", "path": str(s.workspace)}


# --------------------------------------------------------------------------------------- file


def text_of(s: Session, path: str) -> str:
    """The file route's answer: the text itself, as a JSON string (what the client reads)."""
    response = get(s, "workspace/file", path=path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert isinstance(body, str)
    return body


def test_a_text_file(s: Session) -> None:
    text = "héllo, wörld ✓\nsecond line\n"
    write(s, "docs/readme.txt", text)
    assert text_of(s, "docs/readme.txt") == text


def test_an_empty_file_is_text(s: Session) -> None:
    write(s, "empty.py", b"")
    assert text_of(s, "empty.py") == ""


def test_non_utf8_is_refused_as_text_and_served_as_media(s: Session) -> None:
    data = PNG_MAGIC + bytes(range(256))
    write(s, "pic.png", data)
    assert_error(get(s, "workspace/file", path="pic.png"), 415, "binary_file")
    write(s, "old.txt", "caf\xe9".encode("latin-1"))
    assert_error(get(s, "workspace/file", path="old.txt"), 415, "binary_file")
    assert get(s, "workspace/file", path="pic.png", media="1").content == data


def test_text_over_2_mib_is_refused_whole(s: Session) -> None:
    write(s, "big.txt", "a" * TEXT_LIMIT + "b")
    body = assert_error(get(s, "workspace/file", path="big.txt"), 413, "file_too_large")
    assert "a" * 100 not in str(body)


def test_a_file_of_exactly_2_mib_is_whole(s: Session) -> None:
    write(s, "full.txt", "b" * (TEXT_LIMIT - 2) + "é")
    assert text_of(s, "full.txt") == "b" * (TEXT_LIMIT - 2) + "é"


def test_media_returns_the_bytes(s: Session) -> None:
    data = PNG_MAGIC + secrets.token_bytes(3000)
    write(s, "img/pic.png", data)
    for flag in ("1", "true"):
        response = get(s, "workspace/file", path="img/pic.png", media=flag)
        assert response.status_code == 200, response.text
        assert response.content == data
        assert response.headers["content-type"] == "image/png"
        assert response.headers["content-security-policy"] == "sandbox"


def test_media_serves_html_sandboxed(s: Session) -> None:
    page = "<html><script>fetch('/sessions')</script></html>"
    write(s, "page.html", page)
    response = get(s, "workspace/file", path="page.html", media="1")
    assert response.status_code == 200
    assert response.text == page
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == "sandbox"


def test_media_of_an_unknown_type_is_octet_stream(s: Session) -> None:
    data = secrets.token_bytes(100)
    write(s, "blob.weirdext", data)
    response = get(s, "workspace/file", path="blob.weirdext", media="1")
    assert response.content == data
    assert response.headers["content-type"] == "application/octet-stream"


def test_a_link_inside_the_workspace_is_read(s: Session) -> None:
    write(s, "real/target.txt", "inside\n")
    os.symlink("real/target.txt", s.workspace / "alias.txt")
    os.symlink("real", s.workspace / "aliasdir")
    assert text_of(s, "alias.txt") == "inside\n"
    assert text_of(s, "aliasdir/target.txt") == "inside\n"
    assert get(s, "workspace/file", path="alias.txt", media="1").content == b"inside\n"


def test_a_missing_file_is_404(s: Session) -> None:
    write(s, "dir/present.txt", "x")
    for path in ("absent.txt", "dir/absent.txt", "nodir/absent.txt"):
        assert_error(get(s, "workspace/file", path=path), 404, "not_found")
        assert_error(get(s, "workspace/file", path=path, media="1"), 404, "not_found")


def test_a_directory_is_not_a_file(s: Session) -> None:
    write(s, "dir/x.txt", "x")
    for path in ("dir", "dir/", ".", "dir/.."):
        assert_error(get(s, "workspace/file", path=path), 400, "invalid_workspace_path")
        assert_error(get(s, "workspace/file", path=path, media="1"), 400, "invalid_workspace_path")


def test_a_fifo_is_not_a_file(s: Session) -> None:
    os.mkfifo(s.workspace / "pipe")  # opening it must neither block nor read
    assert_error(get(s, "workspace/file", path="pipe"), 400, "invalid_workspace_path")
    assert_error(get(s, "workspace/file", path="pipe", media="1"), 400, "invalid_workspace_path")


def test_a_path_is_required(s: Session) -> None:
    assert_error(get(s, "workspace/file", path=""), 400, "invalid_workspace_path")
    assert get(s, "workspace/file").status_code == 400  # the query parameter itself is missing


# ------------------------------------------------------------------------------------ escapes


def escapes(s: Session, secret: Path, agent: Agent) -> list[str]:
    """Paths that lead out of `s`'s workspace (links are created here)."""
    neighbour = agent.session()
    (neighbour.workspace / "theirs.txt").write_text("NEIGHBOUR\n")
    os.symlink(secret / "secret.txt", s.workspace / "out.txt")
    os.symlink(secret, s.workspace / "outdir")
    os.symlink("../" + neighbour.id, s.workspace / "sibling")
    write(s, "inner/ok.txt", "ok")
    return [
        "../x",
        "..",
        f"../{neighbour.id}/theirs.txt",
        "inner/../../x",
        "/etc/passwd",
        str(secret / "secret.txt"),
        str(s.workspace / "inner" / "ok.txt"),  # absolute, even when it points inside
        "out.txt",
        "outdir",
        "outdir/secret.txt",
        "sibling/theirs.txt",
        "inner/ok.txt\x00",
        "inner\x00/ok.txt",
    ]


def test_escapes_are_refused_by_file(s: Session, secret: Path, agent: Agent) -> None:
    marker = (secret / "secret.txt").read_text()
    for path in escapes(s, secret, agent):
        for media in ("", "1"):
            response = get(s, "workspace/file", path=path, media=media)
            assert response.status_code == 400, (path, media, response.text[:200])
            assert response.json()["code"] == "invalid_workspace_path", (path, response.text)
            assert marker not in response.text and "NEIGHBOUR" not in response.text
            assert "root:" not in response.text


def test_escapes_are_refused_by_listing(s: Session, secret: Path, agent: Agent) -> None:
    for path in escapes(s, secret, agent):
        if path.startswith("inner/ok.txt") or path == str(s.workspace / "inner" / "ok.txt"):
            continue  # files, not directories: covered by the file route
        response = get(s, "workspace/entries", path=path)
        assert response.status_code == 400, (path, response.text[:200])
        assert response.json()["code"] == "invalid_workspace_path", (path, response.text)
        assert "entries" not in response.json(), (path, response.text)
    assert_error(get(s, "workspace/entries", path="inner\x00"), 400, "invalid_workspace_path")


def test_the_workspace_itself_is_listed_through_dot(s: Session) -> None:
    write(s, "f.txt", "f")
    assert [e["name"] for e in ok(get(s, "workspace/entries", path="."))["entries"]] == ["f.txt"]


# ------------------------------------------------------------------------- sessions, projects


def test_unknown_session_is_404(agent: Agent) -> None:
    for route, params in (
        ("workspace", {}),
        ("workspace/files", {}),
        ("workspace/file", {"path": "a.txt"}),
        ("workspace/file", {"path": "a.txt", "media": "1"}),
        ("workspace/entries", {}),
        ("workspace/path", {}),
    ):
        response = agent.client.get(f"/sessions/nope/{route}", params=params)
        assert_error(response, 404, "not_found")


def test_a_project_session_browses_the_project(agent: Agent, tmp_path: Path) -> None:
    project_dir = tmp_path / "proj"
    (project_dir / "src").mkdir(parents=True)
    (project_dir / "src" / "app.py").write_text("print('project')\n")
    created = agent.client.post("/projects", json={"path": str(project_dir), "name": "Proj"})
    assert created.status_code == 201, created.text
    project_id = created.json()["id"]
    s = agent.session(project_id=project_id)
    assert not s.workspace.exists()  # no managed workspace for a project session
    assert ok(get(s, "workspace")) == {
        "kind": "project",
        "name": "Proj",
        "path": str(project_dir),
        "project_id": project_id,
    }
    assert ok(get(s, "workspace/entries"))["root"] == str(project_dir)
    assert [e["path"] for e in tree(s)] == ["src", "src/app.py"]
    assert text_of(s, "src/app.py") == "print('project')\n"
    (tmp_path / "beside.txt").write_text("BESIDE\n")
    escaped = get(s, "workspace/file", path="../beside.txt")
    assert_error(escaped, 400, "invalid_workspace_path")
    assert "BESIDE" not in escaped.text


def test_fork_copies_the_workspace(agent: Agent, s: Session, secret: Path) -> None:
    write(s, "notes/todo.md", "- fork me\n")
    os.symlink(secret / "secret.txt", s.workspace / "out.txt")
    response = s.client.post(f"/sessions/{s.id}/fork", json={})
    assert response.status_code == 200, response.text
    fork = Session(agent, response.json())
    assert [e["path"] for e in tree(fork)] == ["notes", "notes/todo.md"]
    assert text_of(fork, "notes/todo.md") == "- fork me\n"
    # The copy is independent of the source, and a copied link still cannot lead out.
    write(s, "notes/todo.md", "changed\n")
    assert text_of(fork, "notes/todo.md") == "- fork me\n"
    assert_error(get(fork, "workspace/file", path="out.txt"), 400, "invalid_workspace_path")


def test_deleting_the_session_removes_its_workspace(agent: Agent, s: Session) -> None:
    write(s, "keep/me.txt", "bye")
    other = agent.session()
    write(other, "mine.txt", "stay")
    assert s.workspace.is_dir()
    assert s.client.delete(f"/sessions/{s.id}").status_code == 204
    wait_until(lambda: not s.workspace.exists(), "the workspace to be removed", 5)
    assert_error(get(s, "workspace"), 404, "not_found")
    assert text_of(other, "mine.txt") == "stay"
