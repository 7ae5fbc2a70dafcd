"""The workspace routes the desktop client's file browser calls, through a real kernel: what a
session's workspace is, its tree, a file's text, and creating, renaming, deleting entries and
resolving paths by hand — in a project session and in a managed-workspace session alike.

Each case is the request exactly as the desktop builds it and the answer checked against the
TypeScript type it is read as (required fields, JSON types, union values), from the desktop's
`apps/desktop/src/lib/api.ts` and the host commands it invokes:

| `api.ts` function                    | request                                 | read as        |
| ------------------------------------ | --------------------------------------- | -------------- |
| `getSessionWorkspace`                | `GET …/workspace`                       | SessionWorkspace
| `listWorkspaceFiles`                 | `GET …/workspace/files`                 | WorkspaceEntry[]
| `readWorkspaceFile`                  | `GET …/workspace/file?path=`            | string         |
| `readWorkspaceMediaFile`             | `GET …/workspace/file?path=&media=1`    | bytes          |
| `createWorkspaceFile` / `…Directory` | `POST …/workspace/entries {path, kind}` | string (201)   |
| `renameWorkspaceEntry`               | `PATCH …/entries {path, new_name}`      | string         |
| `deleteWorkspaceEntry`               | `DELETE …/workspace/entries?path=`      | nothing (204)  |
| `resolveWorkspacePath`               | `GET …/workspace/path?path=`            | string         |

Every refusal must leave the workspace (and what lies outside it) exactly as it was. A user's
own change is not the agent's: it never shows in file review, while an agent's later change of
the same file does, and undoing it gives the user's file back.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import Agent, Session, agent_kernel
from support.files_helpers import (
    confirm,
    preview,
    resolve,
    review,
    snapshot,
    turn,
    user_seqs,
    write,
)
from support.streams_helpers import assert_error

JSON = {"content-type": "application/json"}  # the desktop sends it on every call


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("entries")) as agent:
        yield agent


@dataclass
class Ws:
    """A session and the directory its workspace routes work in."""

    s: Session
    root: Path
    kind: str

    @property
    def client(self) -> httpx.Client:
        return self.s.client

    def url(self, route: str) -> str:
        return f"/sessions/{self.s.id}/workspace{route}"

    def create(self, path: str, kind: str = "file", **extra: Any) -> httpx.Response:
        return self.client.post(
            self.url("/entries"), json={"path": path, "kind": kind, **extra}, headers=JSON
        )

    def rename(self, path: str, new_name: str, **extra: Any) -> httpx.Response:
        return self.client.patch(
            self.url("/entries"), json={"path": path, "new_name": new_name, **extra}, headers=JSON
        )

    def delete(self, path: str) -> httpx.Response:
        return self.client.delete(self.url("/entries"), params={"path": path}, headers=JSON)

    def resolve(self, path: str) -> httpx.Response:
        return self.client.get(self.url("/path"), params={"path": path}, headers=JSON)

    def files(self) -> list[dict[str, Any]]:
        response = self.client.get(self.url("/files"), headers=JSON)
        assert response.status_code == 200, response.text
        return list(response.json())


def project_session(agent: Agent, root: Path, name: str = "Proj") -> Session:
    root.mkdir(parents=True, exist_ok=True)
    created = agent.client.post("/projects", json={"path": str(root), "name": name})
    assert created.status_code == 201, created.text
    return agent.session(project_id=created.json()["id"])


@pytest.fixture(params=["managed", "project"])
def ws(request: pytest.FixtureRequest, agent: Agent, tmp_path: Path) -> Ws:
    if request.param == "managed":
        s = agent.session("full_access")
        return Ws(s, s.workspace, "managed")
    root = tmp_path / "proj"
    return Ws(project_session(agent, root), root, "project")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside every workspace, with a file that must never change."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "keep.txt").write_text(f"KEEP-{secrets.token_hex(8)}\n")
    return out


def string(response: httpx.Response, status: int = 200) -> str:
    """The answer is a JSON string (the client reads these answers as `string`)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert isinstance(body, str), body
    return body


def umask() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError("no umask in /proc/self/status")


def tree(root: Path) -> dict[str, str]:
    """Every entry below `root` (links not followed): `dir`, `link`, or a file's content."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link"
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_text(errors="replace")
    return out


# ------------------------------------------------------------------------------- the GET shapes


def test_the_session_workspace_is_what_the_client_reads(ws: Ws) -> None:
    response = ws.client.get(ws.url(""), headers=JSON)
    assert response.status_code == 200, response.text
    body = response.json()
    # SessionWorkspace: kind "project" | "managed", name, path required; project_id optional.
    assert body["kind"] == ws.kind
    assert isinstance(body["name"], str) and isinstance(body["path"], str)
    assert body["path"] == str(ws.root)
    if ws.kind == "project":
        assert body["name"] == "Proj"
        assert body["project_id"] == ws.s.row["project_id"]
        assert set(body) == {"kind", "name", "path", "project_id"}
    else:
        assert body["name"] == "Workspace"
        assert set(body) == {"kind", "name", "path"}


def test_the_tree_and_a_file_as_the_client_reads_them(ws: Ws) -> None:
    assert string(ws.create("docs", "directory"), 201) == "docs"
    assert string(ws.create("docs/Read me.md"), 201) == "docs/Read me.md"
    (ws.root / "docs" / "Read me.md").write_text("# héllo\n")
    entries = ws.files()
    assert entries == [
        {"path": "docs", "name": "docs", "is_dir": True},
        {"path": "docs/Read me.md", "name": "Read me.md", "is_dir": False},
    ]
    text = ws.client.get(ws.url("/file"), params={"path": "docs/Read me.md"}, headers=JSON)
    assert string(text) == "# héllo\n"
    media = ws.client.get(ws.url("/file"), params={"path": "docs/Read me.md", "media": "1"})
    assert media.status_code == 200 and media.content == "# héllo\n".encode()


# ------------------------------------------------------------------------ create, rename, delete


def test_create_a_directory_and_a_file_in_it(ws: Ws) -> None:
    assert string(ws.create("notes", "directory"), 201) == "notes"
    assert string(ws.create("notes/todo.md", "file"), 201) == "notes/todo.md"
    # `..` that stays inside is cleaned, as Foya cleans it
    assert string(ws.create("notes/../notes/more.md"), 201) == "notes/more.md"
    directory, file = (ws.root / "notes").lstat(), (ws.root / "notes" / "todo.md").lstat()
    assert stat.S_ISDIR(directory.st_mode) and stat.S_ISREG(file.st_mode)
    assert file.st_size == 0
    # modes as an editor would make them: the umask's, not Foya's 0600
    assert stat.S_IMODE(file.st_mode) == 0o666 & ~umask()
    assert stat.S_IMODE(directory.st_mode) == 0o777 & ~umask()
    assert [e["path"] for e in ws.files()] == ["notes", "notes/more.md", "notes/todo.md"]


def test_rename_a_file_and_a_directory(ws: Ws) -> None:
    (ws.root / "src" / "pkg").mkdir(parents=True)
    (ws.root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    assert string(ws.rename("src/pkg/mod.py", "main.py")) == "src/pkg/main.py"
    assert (ws.root / "src" / "pkg" / "main.py").read_text() == "x = 1\n"
    assert not (ws.root / "src" / "pkg" / "mod.py").exists()
    assert string(ws.rename("src/pkg", "lib")) == "src/lib"
    assert tree(ws.root) == {"src": "dir", "src/lib": "dir", "src/lib/main.py": "x = 1\n"}


def test_delete_a_file_and_a_directory_with_its_contents(ws: Ws, outside: Path) -> None:
    (ws.root / "a" / "b").mkdir(parents=True)
    (ws.root / "a" / "b" / "c.txt").write_text("c")
    (ws.root / "a" / "top.txt").write_text("t")
    (ws.root / "keep.txt").write_text("k")
    os.symlink(outside, ws.root / "a" / "out")  # a link inside goes, never what it points at
    before = tree(outside)

    response = ws.delete("a/top.txt")
    assert response.status_code == 204 and response.content == b""
    assert not (ws.root / "a" / "top.txt").exists()
    assert ws.delete("a").status_code == 204
    assert tree(ws.root) == {"keep.txt": "k"}
    assert tree(outside) == before


def test_resolve_a_path(ws: Ws) -> None:
    (ws.root / "dir").mkdir()
    (ws.root / "dir" / "f.txt").write_text("f")
    assert string(ws.resolve("")) == str(ws.root.resolve())
    assert string(ws.resolve("dir/f.txt")) == str(ws.root.resolve() / "dir" / "f.txt")
    assert string(ws.resolve("dir/../dir")) == str(ws.root.resolve() / "dir")
    assert_error(ws.resolve("dir/absent.txt"), 404, "not_found")


# ----------------------------------------------------------------------------------- refusals


ESCAPES = ["../x", "..", "a/../../x", "/etc/x", "", ".", "a/./../..", "x\x00y"]


def test_escapes_are_refused_everywhere(ws: Ws, outside: Path) -> None:
    (ws.root / "a").mkdir()
    (ws.root / "a" / "f.txt").write_text("f")
    os.symlink(outside, ws.root / "outdir")
    before, beside = tree(ws.root), tree(outside)
    for path in [*ESCAPES, str(ws.root / "a" / "g.txt")]:  # absolute, even pointing inside
        for response in (ws.create(path), ws.create(path, "directory"), ws.rename(path, "n")):
            assert_error(response, 400, "invalid_workspace_path")
        if path:  # an empty path resolves to the workspace itself
            assert_error(ws.resolve(path), 400, "invalid_workspace_path")
        assert_error(ws.delete(path), 400, "invalid_workspace_path")
    for path in ("outdir/new.txt", "outdir/sub/new.txt"):  # through a link that leads out
        assert_error(ws.create(path), 400, "invalid_workspace_path")
    assert_error(ws.create("outdir/keep.txt"), 400, "invalid_workspace_path")
    assert tree(ws.root) == before and tree(outside) == beside


def test_a_link_is_never_acted_on(ws: Ws, outside: Path) -> None:
    os.symlink(outside / "keep.txt", ws.root / "link.txt")
    os.symlink(outside, ws.root / "linkdir")
    before, beside = tree(ws.root), tree(outside)
    for path in ("link.txt", "linkdir", "linkdir/keep.txt"):
        assert_error(ws.delete(path), 400, "invalid_workspace_path")
        assert_error(ws.rename(path, "renamed"), 400, "invalid_workspace_path")
        assert_error(ws.resolve(path), 400, "invalid_workspace_path")
    assert tree(ws.root) == before and tree(outside) == beside


def test_protected_directories_are_never_changed(ws: Ws) -> None:
    for name in (".git", ".foya", ".agents"):
        (ws.root / "sub" / name).mkdir(parents=True)
        (ws.root / "sub" / name / "config").write_text(name)
    (ws.root / "plain.txt").write_text("p")
    before = tree(ws.root)
    for name in (".git", ".foya", ".agents"):
        for response in (
            ws.create(name, "directory"),
            ws.create(f"sub/{name}/new.txt"),
            ws.rename(f"sub/{name}", "other"),
            ws.rename(f"sub/{name}/config", "x"),
            ws.rename("plain.txt", name),
            ws.delete(f"sub/{name}"),
            ws.delete(f"sub/{name}/config"),
        ):
            body = assert_error(response, 400, "invalid_workspace_path")
            assert "protected" in body["message"]
    assert tree(ws.root) == before
    # They stay readable, like the rest of the workspace.
    assert string(ws.resolve("sub/.git/config")) == str(ws.root.resolve() / "sub/.git/config")


def test_an_existing_name_is_a_conflict(ws: Ws) -> None:
    (ws.root / "dir").mkdir()
    (ws.root / "a.txt").write_text("a")
    (ws.root / "b.txt").write_text("b")
    os.symlink("nowhere", ws.root / "dangling")
    before = tree(ws.root)
    for response in (
        ws.create("a.txt"),
        ws.create("a.txt", "directory"),
        ws.create("dir"),
        ws.create("dangling"),
        ws.rename("a.txt", "b.txt"),
        ws.rename("a.txt", "dir"),
        ws.rename("b.txt", "dangling"),
    ):
        assert_error(response, 409, "workspace_entry_exists")
    assert tree(ws.root) == before


def test_a_missing_entry_is_not_found(ws: Ws) -> None:
    (ws.root / "f.txt").write_text("f")
    before = tree(ws.root)
    for response in (
        ws.create("absent/new.txt"),
        ws.rename("absent.txt", "n.txt"),
        ws.rename("absent/x.txt", "n.txt"),
        ws.delete("absent.txt"),
        ws.resolve("absent"),
    ):
        assert_error(response, 404, "not_found")
    assert_error(ws.create("f.txt/new.txt"), 400, "invalid_workspace_path")  # not a directory
    assert tree(ws.root) == before


def test_bad_bodies_are_refused_and_change_nothing(ws: Ws) -> None:
    (ws.root / "a.txt").write_text("a")
    before = tree(ws.root)
    url = ws.url("/entries")
    for response in (
        ws.create("new.txt", "file", overwrite=True),  # Go decodes with DisallowUnknownFields
        ws.create("new.txt", "symlink"),
        ws.client.post(url, json={"path": "new.txt"}, headers=JSON),
        ws.client.post(url, json={"path": 7, "kind": "file"}, headers=JSON),
        ws.client.post(url, content=b"{", headers=JSON),
        ws.rename("a.txt", "b.txt", kind="file"),
        ws.client.patch(url, json={"path": "a.txt", "new_name": ["b.txt"]}, headers=JSON),
    ):
        assert_error(response, 400, "bad_request")
    for name in ("", " ", ".", "..", "x/y", "x\\y", "a\x00b"):
        assert_error(ws.rename("a.txt", name), 400, "invalid_workspace_path")
    assert tree(ws.root) == before


def test_foya_data_inside_a_project_is_refused(agent: Agent) -> None:
    """A project that contains the data directory: nothing in it is created, moved or deleted,
    nor anything holding it."""
    data = agent.data_dir
    inner = Ws(project_session(agent, data.parent, "Beside"), data.parent, "project")
    outer = Ws(project_session(agent, data.parent.parent, "Above"), data.parent.parent, "project")
    listed = sorted(os.listdir(data))
    for response in (
        inner.create(f"{data.name}/evil.txt"),
        inner.create(f"{data.name}/evil", "directory"),
        inner.rename(data.name, "moved"),
        inner.delete(data.name),
        inner.delete(f"{data.name}/foya.db"),
        inner.resolve(f"{data.name}/foya.db"),
        outer.rename(data.parent.name, "moved"),
        outer.delete(data.parent.name),
    ):
        assert_error(response, 400, "invalid_workspace_path")
    assert sorted(os.listdir(data)) == listed


def test_a_project_directory_gone_is_not_found(agent: Agent, tmp_path: Path) -> None:
    root = tmp_path / "gone"
    ws = Ws(project_session(agent, root), root, "project")
    root.rmdir()
    info = ws.client.get(ws.url(""))
    assert info.status_code == 200 and info.json()["kind"] == "project"
    for response in (
        ws.client.get(ws.url("/files")),
        ws.client.get(ws.url("/file"), params={"path": "a.txt"}),
        ws.create("a.txt"),
        ws.delete("a.txt"),
    ):
        assert_error(response, 404, "not_found")
    assert not root.exists()


def test_unknown_session_is_not_found(agent: Agent) -> None:
    url = "/sessions/nope/workspace"
    for response in (
        agent.client.get(url),
        agent.client.post(f"{url}/entries", json={"path": "a", "kind": "file"}),
        agent.client.patch(f"{url}/entries", json={"path": "a", "new_name": "b"}),
        agent.client.delete(f"{url}/entries", params={"path": "a"}),
        agent.client.get(f"{url}/path", params={"path": ""}),
    ):
        assert_error(response, 404, "not_found")


# ----------------------------------------------------------------------- file review and rewind


def review_paths(ws: Ws) -> dict[str, dict[str, Any]]:
    root = ws.root.resolve()
    return {str(Path(f["path"]).relative_to(root)): f for f in review(ws.s)["files"]}


def test_user_changes_are_not_reviewed_but_an_agent_write_after_them_is(ws: Ws) -> None:
    assert string(ws.create("notes", "directory"), 201) == "notes"
    assert string(ws.create("notes/todo.md"), 201) == "notes/todo.md"
    assert string(ws.create("scratch.txt"), 201) == "scratch.txt"
    assert string(ws.rename("scratch.txt", "draft.txt")) == "draft.txt"
    assert ws.delete("draft.txt").status_code == 204
    assert review(ws.s)["files"] == []  # the user's own changes, as in Foya

    turn(ws.s, write("notes/todo.md", "- ship it\n"))
    listed = review(ws.s)
    files = review_paths(ws)
    assert list(files) == ["notes/todo.md"]
    assert files["notes/todo.md"]["status"] == "ready"
    assert files["notes/todo.md"]["additions"] == 1 and files["notes/todo.md"]["deletions"] == 0
    assert "+- ship it" in files["notes/todo.md"]["diff"]

    resolve(ws.s, "undo", listed)  # the agent's change is undone: the user's empty file stays
    assert (ws.root / "notes" / "todo.md").read_bytes() == b""
    assert review(ws.s)["files"] == []


def test_a_user_delete_after_an_agent_change_is_never_silently_undone(ws: Ws) -> None:
    assert string(ws.create("plan.md"), 201) == "plan.md"
    turn(ws.s, write("plan.md", "step 1\n"))
    assert ws.delete("plan.md").status_code == 204
    listed = review(ws.s)
    assert review_paths(ws)["plan.md"]["status"] == "modified"
    before = snapshot(ws.root)
    resolve(ws.s, "undo", listed)  # unforced: a modified file is kept as the user left it
    assert snapshot(ws.root) == before and not (ws.root / "plan.md").exists()


def test_a_rewind_gives_back_the_file_the_user_made(ws: Ws) -> None:
    assert string(ws.create("log.txt"), 201) == "log.txt"
    (ws.root / "log.txt").write_text("mine\n")
    turn(ws.s, write("log.txt", "agent's\n"), message="rewrite it")
    seq = user_seqs(ws.s)[-1]
    shown = preview(ws.s, seq)
    assert [Path(f["path"]).name for f in shown["files"]] == ["log.txt"]
    confirm(ws.s, seq, shown)
    assert (ws.root / "log.txt").read_text() == "mine\n"
