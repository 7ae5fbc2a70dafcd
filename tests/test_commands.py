"""Commands (Foya's `workflow.CommandManager`) against a real `foya serve`
whose HOME is a temp dir: Markdown files under `~/.foya/commands` and `<project>/.foya/commands`
are the source of truth, read afresh (a hand edit shows at once), written atomically (0600) and
never outside those directories. Running a command is a real turn against the fake provider.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    TERMINAL,
    Agent,
    FakeProvider,
    Session,
    answer,
    connect,
    finish,
    payloads,
    text,
    usage,
    wait,
)
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import assert_error, unix_kernel

from app.kernel.usercontext.commandfiles import expand


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One kernel whose HOME is a temp dir, connected to the fake provider, with a project."""
    home = tmp_path_factory.mktemp("home")
    project = tmp_path_factory.mktemp("project")
    with FakeProvider.running() as fake, short_tmpdir() as root:
        launcher = Launcher(tmp_path_factory.mktemp("commands"))
        try:
            served = unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))
            with served.client() as client:
                made = ok(client.post("/projects", json={"path": str(project)}), 201)
                agent = Agent(served, fake, client, connect(client, fake)["id"])
                yield {
                    "home": home,
                    "project": project,
                    "project_id": made["id"],
                    "agent": agent,
                    "client": client,
                }
        finally:
            launcher.close()


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if status != 204 else None


def tree(*roots: Path) -> dict[Path, bytes]:
    """Every file below `roots` with its bytes (to show a refused request wrote nothing)."""
    return {p: p.read_bytes() for r in roots for p in sorted(r.rglob("*")) if p.is_file()}


def names(commands: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in commands]


def write(path: Path, text: str) -> None:
    """A hand edit: a plain write, with an mtime that differs from the one before."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, ns=(before + 1_000_000_000,) * 2)


# ------------------------------------------------------------------------------ the files


@pytest.mark.parametrize("scope", ["global", "project"])
def test_crud_per_scope(world: dict[str, Any], scope: str) -> None:
    client, pid = world["client"], world["project_id"]
    root = (world["home"] if scope == "global" else world["project"]) / ".foya" / "commands"
    where = {"scope": scope, "project_id": pid}
    ref = f"project:{pid}:crud-{scope}" if scope == "project" else f"global:crud-{scope}"

    made = ok(client.post("/commands", json={**where, "name": f"crud-{scope}"}), 201)
    assert made["ref"] == ref and made["scope"] == scope and made["kind"] == "prompt"
    assert made.get("project_id") == (pid if scope == "project" else None)
    assert made["path"] == str(root / f"crud-{scope}.md")
    assert made["body"]  # a placeholder to edit
    file = root / f"crud-{scope}.md"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert f'name: "crud-{scope}"' in file.read_text()

    listed = ok(client.get("/commands", params=where))
    assert ref in [c["ref"] for c in listed]
    other = {"scope": "global"} if scope == "project" else {"scope": "project", "project_id": pid}
    assert ref not in [c["ref"] for c in ok(client.get("/commands", params=other))]

    body = {**where, "name": f"tools:crud-{scope}", "description": "Review it.", "body": "Go."}
    moved = ok(client.patch(f"/commands/{ref}", json=body))
    assert moved["name"] == f"tools:crud-{scope}" and moved["description"] == "Review it."
    assert moved["body"] == "Go." and moved["ref"] == ref.replace("crud", "tools:crud")
    new_file = root / "tools" / f"crud-{scope}.md"
    assert moved["path"] == str(new_file) and not file.exists()
    assert stat.S_IMODE(new_file.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(new_file.stat().st_mode) == 0o600

    # PATCH replaces every field, as Foya's does: a description not sent is cleared.
    again = ok(client.patch(f"/commands/{moved['ref']}", json={**body, "description": None}))
    assert "description" not in again and again["body"] == "Go."

    duplicate = client.post("/commands", json={**where, "name": f"tools:crud-{scope}"})
    assert_error(duplicate, 400, "bad_request")
    ok(client.delete(f"/commands/{moved['ref']}", params=where), 204)
    assert not new_file.exists()
    assert moved["ref"] not in [c["ref"] for c in ok(client.get("/commands", params=where))]
    assert_error(client.delete(f"/commands/{moved['ref']}", params=where), 404, "not_found")
    gone = client.patch(f"/commands/{moved['ref']}", json=body)
    assert_error(gone, 404, "not_found")


def test_hand_edit_is_picked_up(world: dict[str, Any]) -> None:
    client = world["client"]
    root = world["home"] / ".foya" / "commands"
    file = root / "hand" / "made.md"
    write(file, "Explain $ARGUMENTS.\n")  # no front matter: the path names it
    found = {c["name"]: c for c in ok(client.get("/commands", params={"scope": "global"}))}
    assert found["hand:made"]["body"] == "Explain $ARGUMENTS."
    assert found["hand:made"]["ref"] == "global:hand:made"

    write(file, '---\nname: hand-named\ndescription: "By hand."\n---\n\nExplain it all.\n')
    found = {c["name"]: c for c in ok(client.get("/commands", params={"scope": "global"}))}
    assert "hand:made" not in found
    assert found["hand-named"]["body"] == "Explain it all."
    assert found["hand-named"]["description"] == "By hand."

    # Files that are no command are skipped; the others still load.
    write(root / "broken.md", "---\nname: broken\nnever closed\n")
    write(root / "empty.md", "---\nname: empty\n---\n\n")
    write(root / "listed.md", "---\nname: [x, y]\n---\nA name must be a string.\n")
    write(root / "plan.md", "Reserved for Foya's builtin workflow.\n")
    write(root / "a" / "b" / "c" / "deep.md", "Three directories down.\n")
    write(root / "a" / "b" / "c" / "d" / "deeper.md", "---\nname: deeper\n---\nToo deep.\n")
    write(root / "notes.txt", "Not Markdown.\n")
    outside = world["home"] / "outside.md"
    write(outside, "Behind a link.\n")
    (root / "linked.md").symlink_to(outside)
    listed = names(ok(client.get("/commands", params={"scope": "global"})))
    assert {"hand-named", "a:b:c:deep"} <= set(listed)
    for skipped in ("broken", "empty", "listed", "plan", "deeper", "notes", "linked"):
        assert skipped not in listed, skipped


def test_project_command_shadows_global(world: dict[str, Any]) -> None:
    client, pid = world["client"], world["project_id"]
    create = {"name": "shadowed", "body": "From the user."}
    ok(client.post("/commands", json={"scope": "global", **create}), 201)
    ok(client.post("/commands", json={"scope": "global", "name": "zz-global", "body": "G."}), 201)
    local = {"scope": "project", "project_id": pid, **create, "body": "From the project."}
    ok(client.post("/commands", json=local), 201)

    effective = ok(client.get("/commands", params={"scope": "effective", "project_id": pid}))
    by_name = {c["name"]: c for c in effective}
    assert by_name["shadowed"]["scope"] == "project"
    assert by_name["shadowed"]["body"] == "From the project."
    assert by_name["zz-global"]["scope"] == "global"
    assert names(effective).count("shadowed") == 1
    assert effective[0]["ref"] == "builtin:plan", "the builtin plan workflow first"
    scopes = [c["scope"] for c in effective[1:]]
    assert scopes == sorted(scopes, key=lambda s: s != "project"), "then project commands"

    agent: Agent = world["agent"]
    in_project = agent.session(project_id=pid)
    assert ok(client.get(f"/sessions/{in_project.id}/commands")) == effective
    elsewhere = ok(client.get(f"/sessions/{agent.session().id}/commands"))
    assert {c["name"]: c for c in elsewhere}["shadowed"]["body"] == "From the user."
    assert all(c["scope"] == "global" for c in elsewhere[1:])
    global_only = ok(client.get("/commands", params={"scope": "effective"}))
    assert global_only == elsewhere


# ------------------------------------------------------------------------------ running one


def test_expand_arguments() -> None:
    assert expand("Review: $ARGUMENTS", "  PR 7 ") == "Review: PR 7"
    assert expand("Fix $@ now, $@.", "it") == "Fix it now, it."
    assert expand("Explain {{args}}", "this") == "Explain this"
    assert expand("Review", "current PR") == "Review\n\nAdditional user arguments:\ncurrent PR"
    assert expand("Review $ARGUMENTS.", "") == "Review ."
    assert expand("  Review  ", "   ") == "Review"


def run_turn(session: Session, path: str, body: dict[str, Any] | None) -> tuple[Any, list[Any]]:
    """POST the command, then read the session's events up to the end of its turn."""
    with session.events() as events:
        if body is None:
            result = ok(session.client.post(path))
        else:
            result = ok(session.client.post(path, json=body))
        return result, events.until_kind(TERMINAL)


def test_running_a_command_starts_a_turn(world: dict[str, Any]) -> None:
    client, pid = world["client"], world["project_id"]
    template = {"scope": "project", "project_id": pid, "name": "git:summary"}
    made = ok(client.post("/commands", json={**template, "body": "Summarize $ARGUMENTS."}), 201)
    session = world["agent"].session(project_id=pid)
    session.push(answer("Done."), answer("Again."))

    path = f"/sessions/{session.id}/commands/git:summary"
    result, frames = run_turn(session, path, {"args": "the last commit"})
    assert result["status"] == "submitted" and result["command"] == made
    assert result["submission"] == {"run_id": session.id, "status": "started"}
    user = payloads(frames, "message_end")[0]
    assert user["role"] == "user" and user["command"] == "git:summary"
    assert user["content"] == "Summarize the last commit."
    sent = session.chats()[-1].messages
    assert sent[-1]["role"] == "user" and "Summarize the last commit." in str(sent[-1]["content"])
    history = [m for m in session.history() if m["role"] == "user"]
    assert history[-1]["command"] == "git:summary"

    # No body at all: Foya allows it.
    result, frames = run_turn(session, path, None)
    assert result["command"]["name"] == "git:summary"
    assert payloads(frames, "message_end")[0]["content"] == "Summarize ."
    assert len(session.chats()) == 2

    # While a turn runs, the command's input is queued, and its message records it later.
    gate = session.agent.fake.gate()
    session.push([text("Working "), wait(gate), text("on it."), usage(), finish()], answer("Ok."))
    with session.events() as events:
        session.submit("first")
        events.until_kind("message_delta")
        queued = ok(session.client.post(path, json={"args": "the queue"}))
        assert queued["submission"]["status"] == "queued"
        item = queued["submission"]["queued"]
        assert item["text"] == "Summarize the queue." and item["command"] == "git:summary"
        gate.set()
        events.until_count(TERMINAL, 2)
    last = [m for m in session.history() if m["role"] == "user"][-1]
    assert last["content"] == "Summarize the queue." and last["command"] == "git:summary"


def test_unknown_commands_and_sessions(world: dict[str, Any]) -> None:
    client = world["client"]
    session = world["agent"].session()
    for name in ("nope", "spec", "git:summary"):  # git:summary is the project's only
        missing = client.post(f"/sessions/{session.id}/commands/{name}", json={})
        assert_error(missing, 404, "not_found")
    assert_error(client.post("/sessions/nope/commands/anything", json={}), 404, "not_found")
    assert_error(client.get("/sessions/nope/commands"), 404, "not_found")
    assert session.chats() == [] and session.history() == []
    bad = client.post(f"/sessions/{session.id}/commands/x", json={"args": "a", "extra": 1})
    assert_error(bad, 400, "bad_request")


# ------------------------------------------------------------------------------ refused input


BAD_NAMES = [
    "",
    " ",
    "..",
    "../evil",
    "a/../../evil",
    "a\\b",
    "a\x00b",
    "a b",
    "a::b",
    "a:",
    ":a",
    "a:b:c:d:e",
    "x" * 65,
    "plan",
    "-dash",
    "dot.name",
]


def test_bad_names_and_path_tricks_change_nothing(world: dict[str, Any]) -> None:
    client, pid, home = world["client"], world["project_id"], world["home"]
    ok(client.post("/commands", json={"scope": "global", "name": "victim", "body": "V."}), 201)
    ref = "global:victim"
    before = tree(home, world["project"])
    for scope in ("global", "project"):
        where = {"scope": scope, "project_id": pid}
        for name in BAD_NAMES:
            made = client.post("/commands", json={**where, "name": name, "body": "B."})
            assert_error(made, 400, "bad_request")
        for name in BAD_NAMES:
            body = {"scope": "global", "name": name, "body": "B."}
            assert_error(client.patch(f"/commands/{ref}", json=body), 400, "bad_request")
    for where in ({"scope": "user"}, {"scope": ""}, {"scope": "project"}):
        assert_error(client.get("/commands", params=where), 400, "bad_request")
        made = client.post("/commands", json={**where, "name": "fine", "body": "B."})
        assert_error(made, 400, "bad_request")
        assert_error(client.delete(f"/commands/{ref}", params=where), 400, "bad_request")
    unknown = {"scope": "project", "project_id": "nope", "name": "fine"}
    assert_error(client.post("/commands", json=unknown), 404, "not_found")
    assert_error(client.get("/commands", params=unknown), 404, "not_found")
    extra = {"scope": "global", "name": "fine", "workspace": "/"}
    assert_error(client.post("/commands", json=extra), 400, "bad_request")
    empty = {"scope": "global", "name": "victim", "body": "  "}
    assert_error(client.patch(f"/commands/{ref}", json=empty), 400, "bad_request")
    huge = {"scope": "global", "name": "huge", "body": "x" * (256 * 1024)}
    assert_error(client.post("/commands", json=huge), 400, "bad_request")
    assert tree(home, world["project"]) == before

    # A leading slash and '/' are Foya's spelling of a name: they stay inside the root.
    made = ok(client.post("/commands", json={"scope": "global", "name": "/etc/passwd"}), 201)
    assert made["name"] == "etc:passwd"
    assert made["path"] == str(home / ".foya" / "commands" / "etc" / "passwd.md")


def test_symbolic_links_are_never_followed(
    world: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    client = world["client"]
    outside = tmp_path_factory.mktemp("outside")
    (outside / "planted.md").write_text("Planted outside.\n")
    project = tmp_path_factory.mktemp("linked-project")
    (project / ".foya").mkdir()
    (project / ".foya" / "commands").symlink_to(outside)
    pid = ok(client.post("/projects", json={"path": str(project)}), 201)["id"]
    where = {"scope": "project", "project_id": pid}
    assert ok(client.get("/commands", params=where)) == []
    made = client.post("/commands", json={**where, "name": "escape", "body": "B."})
    assert_error(made, 400, "bad_request")

    # A link to a directory inside the global root: not read, not written through.
    (world["home"] / ".foya" / "commands" / "via").symlink_to(outside, target_is_directory=True)
    listed = names(ok(client.get("/commands", params={"scope": "global"})))
    assert "via:planted" not in listed
    made = client.post("/commands", json={"scope": "global", "name": "via:escape", "body": "B."})
    assert_error(made, 400, "bad_request")
    assert sorted(p.name for p in outside.iterdir()) == ["planted.md"]
