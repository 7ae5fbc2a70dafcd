"""Agent definitions (app.kernel.agents.definitions, Foya's `agentdef`): the
built-in roles, the files under `~/.agents/agents`, `~/.foya/agents` and a project's, their
front matter, precedence, refs and digests, and what is left out. Real files in a temp HOME and
project, read by the kernel's own `Definitions`.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from app.kernel.agents.definitions import (
    BUILTINS,
    WORKER,
    Definition,
    Definitions,
    parse_definition,
    parse_duration,
)
from app.kernel.projects import Projects
from app.kernel.usercontext.markdown import Malformed

HELPER = """---
name: helper
description: "Helps out"
model: small-model
tools: [read, bash, agent, read, " edit "]
max_turns: 7
timeout: 1m30s
---
Help with the delegated task.
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def agent_file(name: str, description: str = "does things", body: str = "Do it.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def projects(tmp_path: Path) -> Projects:
    projects = Projects(tmp_path / "data")
    (tmp_path / "data").mkdir()
    projects.load()
    return projects


def add_project(projects: Projects, path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    return asyncio.run(projects.create(str(path), "p"))["id"]


def names(found: list[Definition]) -> list[tuple[str, str]]:
    return [(d.ref, d.scope) for d in found]


def described(definitions: Definitions, name: str) -> str | None:
    found = definitions.find(name)
    return None if found is None else found.description


def test_the_builtins_are_foyas_three_with_their_tools() -> None:
    assert [d.ref for d in BUILTINS] == ["builtin:explorer", "builtin:researcher", "builtin:worker"]
    assert WORKER.tools == (
        "read",
        "bash",
        "write",
        "edit",
        "delete",
        "skill_search",
        "skill_load",
        "skill_read_resource",
    )
    shown = BUILTINS[0].wire()
    assert set(shown) == {"ref", "name", "description", "scope", "tools", "digest"}
    assert len(shown["digest"]) == 64


def test_a_file_is_read_as_foya_reads_it() -> None:
    found = parse_definition(HELPER.encode(), "user", None, "/h/helper.md")
    assert found.wire() == {
        "ref": "user:helper",
        "name": "helper",
        "description": "Helps out",
        "scope": "user",
        "path": "/h/helper.md",
        "model": "small-model",
        "tools": ["bash", "edit", "read"],  # trimmed, no agent tools, no repeats, sorted
        "max_turns": 7,
        "timeout": "1m30s",
        "digest": found.digest,
    }
    assert found.body == "Help with the delegated task."
    assert found.timeout_seconds == 90
    project = parse_definition(HELPER.encode(), "project", "p1", "/p/helper.md")
    assert project.ref == "project:p1:helper"
    assert project.digest == found.digest  # where it lives is not part of it


def test_claude_code_tool_strings_and_block_lists_are_lists() -> None:
    comma = "---\nname: a\ndescription: d\ntools: Read, Grep  Glob\n---\nbody\n"
    block = "---\nname: a\ndescription: d\ntools:\n  - read\n  - spawn_agent\n---\nbody\n"
    assert parse_definition(comma.encode(), "user", None, "x").tools == ("Glob", "Grep", "Read")
    assert parse_definition(block.encode(), "user", None, "x").tools == ("read",)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("name: a\ndescription: d\n", "missing YAML frontmatter"),
        ("---\nname: a\ndescription: d\nbody\n", "unterminated YAML frontmatter"),
        ("---\nname: a b\ndescription: d\n---\nbody\n", "invalid agent name"),
        ("---\nname: -a\ndescription: d\n---\nbody\n", "invalid agent name"),
        (f"---\nname: {'a' * 65}\ndescription: d\n---\nbody\n", "invalid agent name"),
        ("---\nname: a\n---\nbody\n", "agent description is required"),
        ("---\nname: a\ndescription: d\n---\n  \n", "agent instructions are required"),
        ("---\nname: a\ndescription: d\nmax_turns: -1\n---\nb\n", "must not be negative"),
        ("---\nname: a\ndescription: d\nmax_turns: many\n---\nb\n", "must be an integer"),
        ("---\nname: a\ndescription: d\ntimeout: soon\n---\nb\n", "invalid duration"),
        ("---\nname: a\ndescription: d\ntimeout: 0s\n---\nb\n", "timeout must be positive"),
        ("---\nname: [a]\ndescription: d\n---\nb\n", "name must be text"),
        ("---\nname: a\ndescription: d\ntools: {x: 1}\n---\nb\n", "decode frontmatter"),
    ],
)
def test_what_is_not_a_definition_says_why(text: str, reason: str) -> None:
    with pytest.raises(Malformed, match=reason):
        parse_definition(text.encode(), "user", None, "x")


def test_a_file_over_256_kib_is_refused() -> None:
    big = agent_file("a", body="x" * (256 * 1024))
    with pytest.raises(Malformed, match="exceeds"):
        parse_definition(big.encode(), "user", None, "x")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("1h30m", 5400), ("1.5h", 5400), ("300ms", 0.3), (".5s", 0.5), ("0", 0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1x", "s", "1h 30m", "--1s"])
def test_what_go_refuses_as_a_duration(text: str) -> None:
    with pytest.raises(Malformed):
        parse_duration(text)


def test_listing_precedence_and_refs(home: Path, projects: Projects, tmp_path: Path) -> None:
    write(home / ".agents" / "agents" / "g.md", agent_file("global-researcher"))
    write(home / ".agents" / "agents" / "w.md", agent_file("Worker", "my worker"))
    write(home / ".agents" / "agents" / "notes.txt", "not markdown")
    project = add_project(projects, tmp_path / "proj")
    write(tmp_path / "proj" / ".agents" / "agents" / "p.md", agent_file("project-researcher"))
    write(tmp_path / "proj" / ".foya" / "agents" / "w.md", agent_file("worker", "project's"))
    definitions = Definitions(home, projects)

    # Foya's acceptance: the global list has the 3 built-ins and the user's own (here the user's
    # worker shadows the built-in one of the same name, case-insensitively).
    assert names(definitions.effective()) == [
        ("user:global-researcher", "user"),
        ("user:Worker", "user"),
        ("builtin:explorer", "builtin"),
        ("builtin:researcher", "builtin"),
    ]
    assert names(definitions.effective(project)) == [
        ("project:" + project + ":project-researcher", "project"),
        ("project:" + project + ":worker", "project"),
        ("user:global-researcher", "user"),
        ("builtin:explorer", "builtin"),
        ("builtin:researcher", "builtin"),
    ]
    assert len(definitions.all(project)) == 7  # every scope, for provenance
    # A ref finds exactly that one; a name the highest scope's.
    assert definitions.find("builtin:worker", project) == WORKER
    found = definitions.find("WORKER", project)
    assert found is not None and found.scope == "project"
    user_worker = definitions.find("worker")
    assert user_worker is not None and user_worker.scope == "user"
    assert definitions.find("nobody", project) is None
    assert definitions.find("project-researcher") is None  # no project given


def test_foya_dir_wins_over_agents_dir_and_bad_files_are_left_out(
    home: Path, projects: Projects
) -> None:
    write(home / ".agents" / "agents" / "a.md", agent_file("same", "from .agents"))
    write(home / ".foya" / "agents" / "a.md", agent_file("same", "from .foya"))
    write(home / ".foya" / "agents" / "b.md", "---\nname: broken\n---\nno description\n")
    write(home / ".foya" / "agents" / "c.md", agent_file("twice", "first"))
    write(home / ".foya" / "agents" / "d.md", agent_file("TWICE", "second"))
    definitions = Definitions(home, projects)
    users = {d.name: d.description for d in definitions.all() if d.scope == "user"}
    assert users == {"same": "from .foya", "twice": "first"}


def test_links_are_not_followed_and_a_hand_edit_shows_at_once(
    home: Path, projects: Projects, tmp_path: Path
) -> None:
    elsewhere = write(tmp_path / "elsewhere" / "x.md", agent_file("linked"))
    (home / ".agents" / "agents").mkdir(parents=True)
    os.symlink(elsewhere, home / ".agents" / "agents" / "x.md")
    project = add_project(projects, tmp_path / "proj")
    outside = tmp_path / "outside-agents"
    write(outside / "o.md", agent_file("outsider"))
    (tmp_path / "proj" / ".agents").mkdir()
    os.symlink(outside, tmp_path / "proj" / ".agents" / "agents")
    definitions = Definitions(home, projects)
    assert {d.name for d in definitions.all(project) if d.scope != "builtin"} == set()

    path = write(home / ".agents" / "agents" / "e.md", agent_file("edited", "before"))
    assert described(definitions, "edited") == "before"
    path.write_text(agent_file("edited", "after, a longer description"))
    assert described(definitions, "edited") == "after, a longer description"
    path.unlink()
    assert described(definitions, "edited") is None
