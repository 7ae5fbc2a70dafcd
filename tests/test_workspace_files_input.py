"""`workspace_files` on a turn, a queued message and a command run (Foya's
`normalizeWorkspaceFiles` and `modelMessage`), against a real `foya serve` and the fake provider.

What the user picks is a list of workspace-relative paths. The kernel keeps each as the canonical
path of an existing regular file of the session's workspace (cleaned, first occurrence kept), on
the queue item and on the stored user message (so `GET /history`, `message_end`, fork and export
carry it), and tells the model of each file by its path, in a text part of the user message: the
model reads the file with its tools, as in Foya. A path that is absolute, leads out of the
workspace, names nothing, a directory or a symbolic link, or a protected file is refused, 400
`invalid_queue_message` (Foya's code), and nothing is stored; so is a 17th file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    TERMINAL,
    Agent,
    Session,
    agent_kernel,
    answer,
    finish,
    payloads,
    text,
    usage,
    wait,
)
from support.streams_helpers import assert_error

SECRET = "the-file-body-stays-on-disk"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("wsfiles")) as made:
        yield made


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def seed(root: Path) -> None:
    """A workspace with two files, a directory and a link."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(f"# notes\n{SECRET}\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "adir").mkdir(exist_ok=True)
    if not (root / "link.md").is_symlink():
        (root / "link.md").symlink_to(root / "notes.md")


def file_notes(message: dict[str, Any]) -> list[str]:
    """The text parts after the first of a user message the model was sent."""
    content = message["content"]
    assert isinstance(content, list), content
    assert all(part["type"] == "text" for part in content), content
    return [part["text"] for part in content[1:]]


def user_messages(session: Session) -> list[dict[str, Any]]:
    return [m for m in session.history() if m["role"] == "user"]


def test_a_turn_names_its_files_to_the_model_and_keeps_them(agent: Agent) -> None:
    session = agent.session()
    seed(session.workspace)
    session.push(answer("Read them."))
    picked = ["notes.md", " src/../src/app.py ", "./notes.md"]
    with session.events() as events:
        accepted = session.submit("look at these", workspace_files=picked)
        frames = events.until_kind(TERMINAL)
    assert accepted["status"] == "started"
    user = payloads(frames, "message_end")[0]
    assert user["role"] == "user" and user["content"] == "look at these"
    assert user["workspace_files"] == ["notes.md", "src/app.py"]

    [request] = session.chats()
    sent = request.messages[-1]
    assert sent["role"] == "user"
    assert sent["content"][0] == {"type": "text", "text": "look at these"}
    notes = file_notes(sent)
    assert len(notes) == 2
    assert "notes.md" in notes[0] and "src/app.py" in notes[1]
    assert SECRET not in json.dumps(request.body)  # named, not copied: the model reads it

    [stored] = user_messages(session)
    assert stored["workspace_files"] == ["notes.md", "src/app.py"]

    # The next turn's request still carries the note on the earlier message.
    session.push(answer("Still here."))
    with session.events() as events:
        session.submit("and now?")
        events.until_kind(TERMINAL)
    earlier = next(m for m in session.chats()[-1].messages if m["role"] == "user")
    assert len(file_notes(earlier)) == 2

    # Fork keeps them; rewind refuses a message it could not give back whole (Foya's rule).
    fork = ok(session.client.post(f"/sessions/{session.id}/fork", json={}))
    forked = ok(session.client.get(f"/sessions/{fork['id']}/history"))
    assert [m.get("workspace_files") for m in forked if m["role"] == "user"] == [
        ["notes.md", "src/app.py"],
        None,
    ]
    rewind = session.client.post(f"/sessions/{session.id}/turns/{stored['event_seq']}/rewind")
    body = assert_error(rewind, 409, "rewind_context_unsupported")
    assert "workspace_files" in body["message"]


def test_files_alone_are_input_enough(agent: Agent) -> None:
    session = agent.session()
    seed(session.workspace)
    session.push(answer("Ok."))
    with session.events() as events:
        session.submit("", workspace_files=["src/app.py"])
        events.until_kind(TERMINAL)
    [stored] = user_messages(session)
    assert stored["content"] == "" and stored["workspace_files"] == ["src/app.py"]
    sent = session.chats()[0].messages[-1]
    assert "src/app.py" in file_notes(sent)[0]


def test_queue_items_keep_them_until_their_turn(agent: Agent) -> None:
    session = agent.session()
    seed(session.workspace)
    gate = agent.fake.gate()
    session.push([text("Working"), wait(gate), usage(), finish()], answer("A."), answer("B."))
    with session.events() as events:
        session.submit("first")
        events.until_kind("message_delta")
        item = ok(
            session.client.post(
                f"/sessions/{session.id}/queue",
                json={"message": "queued", "workspace_files": ["notes.md"]},
            ),
            201,
        )
        assert item["workspace_files"] == ["notes.md"]
        busy = session.submit("while busy", workspace_files=["./src/app.py"])
        assert busy["status"] == "queued"
        assert busy["queued"]["workspace_files"] == ["src/app.py"]
        assert [i.get("workspace_files") for i in session.queue()] == [
            ["notes.md"],
            ["src/app.py"],
        ]
        gate.set()
        events.until_count(TERMINAL, 3)
    stored = user_messages(session)
    assert [m.get("workspace_files") for m in stored] == [None, ["notes.md"], ["src/app.py"]]
    requests = session.chats()
    assert "notes.md" in file_notes(requests[1].messages[-1])[0]
    assert "src/app.py" in file_notes(requests[2].messages[-1])[0]


def command_project(agent: Agent, tmp_path: Path) -> str:
    root = tmp_path / "project"
    seed(root)
    (root / ".foya" / "commands").mkdir(parents=True)
    (root / ".foya" / "commands" / "review.md").write_text("Review $ARGUMENTS.\n")
    return str(ok(agent.client.post("/projects", json={"path": str(root)}), 201)["id"])


def test_a_command_run_takes_them(agent: Agent, tmp_path: Path) -> None:
    session = agent.session(project_id=command_project(agent, tmp_path))
    session.push(answer("Reviewed."), answer("Planned."))
    path = f"/sessions/{session.id}/commands/review"
    body = {"args": "this", "workspace_files": ["src/app.py", "notes.md"]}
    with session.events() as events:
        result = ok(session.client.post(path, json=body))
        frames = events.until_kind(TERMINAL)
    assert result["status"] == "submitted" and result["submission"]["status"] == "started"
    user = payloads(frames, "message_end")[0]
    assert user["command"] == "review" and user["content"] == "Review this."
    assert user["workspace_files"] == ["src/app.py", "notes.md"]
    notes = file_notes(session.chats()[0].messages[-1])
    assert "src/app.py" in notes[0] and "notes.md" in notes[1]

    # The builtin plan command too.
    plan = {"args": "a plan for it", "workspace_files": ["notes.md"]}
    with session.events() as events:
        ok(session.client.post(f"/sessions/{session.id}/commands/plan", json=plan))
        frames = events.until_kind(TERMINAL)
    user = payloads(frames, "message_end")[0]
    assert user["command"] == "plan" and user["workspace_files"] == ["notes.md"]


def refused_paths(root: Path, outside: Path) -> list[Any]:
    """Paths a user may not pick, relative to a seeded workspace at `root`."""
    rel_outside = os.path.relpath(outside, root)
    return [
        rel_outside,  # exists, but outside the workspace
        str(root / "notes.md"),  # absolute
        "missing.md",
        "adir",
        "link.md",  # a symbolic link, even to a file inside
        "",
        "notes.md\x00",
        [f"f{i}" for i in range(17)],  # too many (checked before any file is looked at)
    ]


def test_refused_paths_store_nothing(agent: Agent, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    session = agent.session()
    seed(session.workspace)
    pid = command_project(agent, tmp_path)
    command_session = agent.session(project_id=pid)
    routes = [
        (session, f"/sessions/{session.id}/turns", {"message": "x"}),
        (session, f"/sessions/{session.id}/queue", {"message": "x"}),
        (command_session, f"/sessions/{command_session.id}/commands/review", {"args": "x"}),
        (command_session, f"/sessions/{command_session.id}/commands/plan", {"args": "x"}),
    ]
    for owner, route, base in routes:
        root = owner.workspace if owner is session else tmp_path / "project"
        for bad in refused_paths(root, outside):
            files = bad if isinstance(bad, list) else ["notes.md", bad]
            response = owner.client.post(route, json={**base, "workspace_files": files})
            body = assert_error(response, 400, "invalid_queue_message")
            assert "workspace" in body["message"], body
        wrong_type = owner.client.post(route, json={**base, "workspace_files": [5]})
        assert_error(wrong_type, 400, "bad_request")
    for owner in (session, command_session):
        assert owner.history() == [] and owner.queue() == [] and owner.chats() == []
        assert owner.get().get("agent_mode") in (None, "execute")  # plan mode not entered


def test_protected_files_are_refused(agent: Agent) -> None:
    """A project holding the kernel's data directory: its files are never picked."""
    data_dir = agent.data_dir
    project = ok(agent.client.post("/projects", json={"path": str(data_dir.parent)}), 201)
    session = agent.session(project_id=project["id"])
    picked = [f"{data_dir.name}/foya.db"]
    response = session.client.post(
        f"/sessions/{session.id}/turns", json={"message": "x", "workspace_files": picked}
    )
    body = assert_error(response, 400, "invalid_queue_message")
    assert "protected" in body["message"]
    assert session.history() == [] and session.chats() == []
