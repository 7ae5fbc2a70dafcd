"""The user's context in every model request: rules, memory and `AGENTS.md` are
added to the system prompt in a fixed order; glob rules follow what the session touches; the
context tools (`rule_load`, `memory_remember`) work through the normal tool and approval flow.

One real `foya serve` with its own HOME, a registered project, and the fake provider, whose
recorded requests show exactly what the model received.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    BOUND,
    Agent,
    FakeProvider,
    Session,
    answer,
    call,
    connect,
    only,
    payloads,
    tools,
)
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import unix_kernel

ORDER = ("<project_guidance", "<foya_rules", "<foya_available_rules", "<foya_memories")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("home")
    project = tmp_path_factory.mktemp("project")
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    with FakeProvider.running() as fake, short_tmpdir() as root:
        try:
            served = unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))
            with served.client() as client:
                client.timeout = httpx.Timeout(BOUND)
                connection = connect(client, fake)
                made = client.post("/projects", json={"path": str(project)})
                assert made.status_code == 201, made.text
                yield {
                    "agent": Agent(served, fake, client, connection["id"]),
                    "home": home,
                    "project": project,
                    "pid": made.json()["id"],
                }
        finally:
            launcher.close()


@pytest.fixture
def agent(world: dict[str, Any]) -> Agent:
    agent: Agent = world["agent"]
    return agent


@pytest.fixture(autouse=True)
def clean_context(world: dict[str, Any]) -> Iterator[None]:
    """Each test starts with no rules, memory or instruction files, and memory on."""
    yield
    client: httpx.Client = world["agent"].client
    for scope in ("global", "project"):
        query = f"scope={scope}&project_id={world['pid']}"
        for rule in client.get(f"/rules?{query}").json():
            client.delete(f"/rules/{rule['id']}")
        for memory in client.get(f"/memories?{query}").json():
            client.delete(f"/memories/{memory['id']}")
    for path in (world["home"] / ".foya", world["project"]):
        for name in ("AGENTS.md", "CLAUDE.md", "GEMINI.md"):
            (path / name).unlink(missing_ok=True)
    for path in (world["project"] / ".foya" / "rules").rglob("*.md"):
        path.unlink()
    client.put("/settings/memory", json={"enabled": True})


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if status != 204 else None


def rule(agent: Agent, content: str, scope: str = "global", **fields: Any) -> dict[str, Any]:
    return dict(
        ok(agent.client.post("/rules", json={"scope": scope, "content": content, **fields}), 201)
    )


def system_prompts(s: Session) -> list[str]:
    """The system message of every streamed request of the session, in order."""
    return [str(c.messages[0]["content"]) for c in s.chats(streaming=True)]


def last_system(s: Session) -> str:
    return system_prompts(s)[-1]


def project_session(world: dict[str, Any], **fields: Any) -> Session:
    session: Session = world["agent"].session(project_id=world["pid"], **fields)
    return session


def test_rules_memory_and_agents_md_reach_the_model_in_a_fixed_order(
    world: dict[str, Any], agent: Agent
) -> None:
    pid = world["pid"]
    (world["home"] / ".foya").mkdir(exist_ok=True)
    (world["home"] / ".foya" / "AGENTS.md").write_text("Global guidance: answer tersely.\n")
    (world["project"] / "AGENTS.md").write_text("Project guidance: run make test.\n")
    rule(agent, "Global rule: prefer ruff.")
    rule(agent, "Project rule: Python 3.11 only.", "project", project_id=pid)
    rule(
        agent,
        "Release steps: tag, build, upload.",
        "project",
        project_id=pid,
        name="release",
        trigger="model_decision",
        description="How to cut a release",
    )
    ok(agent.client.post("/memories", json={"scope": "global", "content": "User is Ana."}), 201)
    body = {"scope": "project", "project_id": pid, "content": "The API speaks SSE."}
    ok(agent.client.post("/memories", json=body), 201)

    s = project_session(world)
    s.turn(answer("ok"))
    system = last_system(s)
    positions = [system.find(tag) for tag in ORDER]
    assert all(p > 0 for p in positions) and positions == sorted(positions), positions
    for text in (
        "Global guidance: answer tersely.",
        "Project guidance: run make test.",
        "- Global rule: prefer ruff.",
        "- Project rule: Python 3.11 only.",
        "- release: How to cut a release",
        "- User is Ana.",
        "- The API speaks SSE.",
    ):
        assert text in system, text
    # A model_decision rule is listed by name, its text only comes through rule_load.
    assert "tag, build, upload" not in system
    # The global rules come before the project's.
    assert system.index("Global rule") < system.index("Project rule")

    # A session outside the project sees only the global context.
    outside = agent.session()
    outside.turn(answer("ok"))
    other = last_system(outside)
    assert "Global rule: prefer ruff." in other and "User is Ana." in other
    assert "Project rule" not in other and "API speaks SSE" not in other
    assert "Project guidance" not in other

    # The estimate's share: context_request_accepted says what the context cost.
    frames = s.replay(lambda f: f.event == "turn_complete")
    accepted = only(frames, "context_request_accepted")
    assert accepted["context_tokens"] > 0
    sections = system[system.index("<project_guidance") :]
    assert abs(accepted["context_tokens"] - len(json.dumps({"content": sections})) // 4) < 10


def test_a_hand_edit_shows_in_the_next_request_without_a_restart(
    world: dict[str, Any], agent: Agent
) -> None:
    rule(agent, "Old rule text.")
    s = agent.session()
    s.turn(answer("ok"))
    assert "Old rule text." in last_system(s)
    path = world["home"] / ".foya" / "rules" / "user_rules.md"
    path.write_text(path.read_text().replace("Old rule text.", "Edited by hand."))
    s.turn(answer("ok"))
    assert "Edited by hand." in last_system(s) and "Old rule text." not in last_system(s)


def test_a_malformed_rule_file_is_left_out_and_the_rest_still_load(
    world: dict[str, Any], agent: Agent
) -> None:
    rules = world["project"] / ".foya" / "rules"
    rules.mkdir(parents=True, exist_ok=True)
    (rules / "good.md").write_text("---\nname: good\n---\nGood rule applies.\n")
    (rules / "bad.md").write_text("---\nname: [unclosed\ntrigger: sometimes\n---\nBad rule.\n")
    listed = ok(agent.client.get(f"/rules?scope=project&project_id={world['pid']}"))
    assert any(r.get("error") for r in listed)
    s = project_session(world)
    s.turn(answer("ok"))
    assert "Good rule applies." in last_system(s)
    assert "Bad rule." not in last_system(s)


def test_a_glob_rule_applies_only_once_the_session_touches_a_matching_file(
    world: dict[str, Any], agent: Agent
) -> None:
    pid = world["pid"]
    src = world["project"] / "src" / "pkg"
    src.mkdir(parents=True, exist_ok=True)
    (src / "main.py").write_text("print('hi')\n")
    (world["project"] / "README.txt").write_text("readme\n")
    rule(
        agent,
        "Python files use type hints.",
        "project",
        project_id=pid,
        trigger="glob",
        globs=["src/**/*.py"],
    )
    s = project_session(world)
    s.turn(tools(call("c1", "read", {"path": "README.txt"})), answer("ok"))
    assert all("type hints" not in p for p in system_prompts(s))
    s.turn(tools(call("c2", "read", {"path": "src/pkg/main.py"})), answer("ok"))
    prompts = system_prompts(s)
    # The step that asked for the read did not yet know; the step after it does.
    assert "type hints" not in prompts[-2] and "type hints" in prompts[-1]
    # An absolute path inside the project matches too (from a fresh session).
    fresh = project_session(world)
    fresh.turn(tools(call("c3", "read", {"path": str(src / "main.py")})), answer("ok"))
    assert "type hints" in last_system(fresh)


def test_a_manual_rule_applies_when_the_user_mentions_it(
    world: dict[str, Any], agent: Agent
) -> None:
    rule(agent, "Write commit messages in English.", name="commits", trigger="manual")
    s = agent.session()
    s.turn(answer("ok"), message="hello")
    assert "commit messages in English" not in last_system(s)
    s.turn(answer("ok"), message="follow @commits please")
    assert "commit messages in English" in last_system(s)


def test_memory_is_left_out_while_it_is_switched_off(agent: Agent) -> None:
    ok(agent.client.post("/memories", json={"scope": "global", "content": "Likes tea."}), 201)
    s = agent.session()
    ok(agent.client.put("/settings/memory", json={"enabled": False}))
    s.turn(answer("ok"))
    assert "Likes tea." not in last_system(s)
    ok(agent.client.put("/settings/memory", json={"enabled": True}))
    s.turn(answer("ok"))
    assert "Likes tea." in last_system(s)


def test_rule_load_returns_a_model_decision_rule(world: dict[str, Any], agent: Agent) -> None:
    rule(
        agent,
        "Deploy with the blue-green script.",
        name="deploy",
        trigger="model_decision",
        description="How to deploy",
    )
    s = agent.session()
    s.turn(
        tools(call("c1", "rule_load", {"name": "deploy"}), call("c2", "rule_load", {"name": "x"})),
        answer("ok"),
    )
    results = {m["tool_call_id"]: m for m in s.history() if m["role"] == "tool"}
    assert "Deploy with the blue-green script." in results["c1"]["content"]
    assert results["c2"].get("is_error") and "no rule 'x'" in results["c2"]["content"]


def memory_content(agent: Agent, scope: str, pid: str = "") -> str:
    found = ok(agent.client.get(f"/memories?scope={scope}&project_id={pid}"))
    return str(found[0]["content"]) if found else ""


def test_memory_remember_asks_like_a_write_and_records_the_fact(
    world: dict[str, Any], agent: Agent
) -> None:
    s = project_session(world, approval_mode="manual")
    s.push(
        tools(call("c1", "memory_remember", {"content": "Deploys happen on Fridays."})),
        answer("ok"),
    )
    with s.events() as events:
        s.submit("remember that")
        request = events.until_kind("approval_request")[-1].data["payload"]
        assert request["tool_name"] == "memory_remember" and request["action"] == "write"
        assert request["scope"] == "outside"
        assert request["resource"].endswith("project_memory.md")
        assert memory_content(agent, "project", world["pid"]) == ""
        decide = f"/sessions/{s.id}/approvals/{request['id']}"
        ok(agent.client.post(decide, json={"decision": "approved"}), 204)
        events.until_kind("turn_complete")
    assert memory_content(agent, "project", world["pid"]) == "Deploys happen on Fridays."
    path = Path(request["resource"])
    assert path.stat().st_mode & 0o777 == 0o600
    # The next request carries it.
    s.turn(answer("ok"))
    assert "Deploys happen on Fridays." in last_system(s)

    # Denied: nothing changes.
    s.push(tools(call("c2", "memory_remember", {"content": "Never mind."})), answer("ok"))
    with s.events() as events:
        s.submit("remember this too")
        request = events.until_kind("approval_request")[-1].data["payload"]
        decide = f"/sessions/{s.id}/approvals/{request['id']}"
        ok(agent.client.post(decide, json={"decision": "denied"}), 204)
        events.until_kind("turn_complete")
    assert "Never mind." not in memory_content(agent, "project", world["pid"])


def test_memory_remember_is_refused_while_memory_is_off(agent: Agent) -> None:
    ok(agent.client.put("/settings/memory", json={"enabled": False}))
    s = agent.session()
    frames = s.turn(
        tools(call("c1", "memory_remember", {"content": "A fact.", "scope": "global"})),
        answer("ok"),
    )
    ends = payloads(frames, "tool_end")
    assert ends[0]["is_error"] and re.search("memory is switched off", ends[0]["output"])
    assert memory_content(agent, "global") == ""


def write_skill(root: Path, name: str, description: str, body: str) -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")
    return path


@pytest.fixture
def skills(world: dict[str, Any]) -> Iterator[Path]:
    """`~/.foya/skills`, emptied after the test."""
    root = world["home"] / ".foya" / "skills"
    yield root
    for path in sorted(root.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()


def test_skills_are_listed_and_a_turn_s_skill_reaches_the_model(
    world: dict[str, Any], agent: Agent, skills: Path
) -> None:
    write_skill(skills, "lint", "Run the linters and fix what they report.", "Step 1: ruff.")
    write_skill(world["project"] / ".foya" / "skills", "review", "Review a diff.", "Read it all.")
    s = project_session(world)
    s.turn(answer("ok"), message="tidy up")
    system = last_system(s)
    assert '<skill ref="global:lint" name="lint" scope="global">' in system
    assert "Run the linters and fix what they report." in system
    assert f'ref="project:{world["pid"]}:review"' in system
    assert "Step 1: ruff." not in system  # a catalog lists, the body comes on demand

    s.push(answer("ok"))
    with s.events() as events:
        s.submit("please lint src/", skill_ref="global:lint")
        events.until_kind("turn_complete")
    user = s.chats(streaming=True)[-1].messages[-1]
    assert user["role"] == "user"
    assert '<invoked-skill ref="global:lint" name="lint">\nStep 1: ruff.' in user["content"]
    assert "<user-message>\nplease lint src/\n</user-message>" in user["content"]
    # What the user sees in the history is what they wrote.
    stored = [m for m in s.history() if m["role"] == "user"][-1]
    assert stored["content"] == "please lint src/" and stored["skill_ref"] == "global:lint"

    # A pinned skill's instructions are in the catalog itself.
    pinned = agent.client.patch("/skills/global:lint/pinned", json={"pinned": True})
    assert pinned.status_code == 204, pinned.text
    s.turn(answer("ok"))
    assert "<pinned_instructions>\nStep 1: ruff.\n</pinned_instructions>" in last_system(s)


def test_skill_tools_load_search_and_read_a_resource(agent: Agent, skills: Path) -> None:
    path = write_skill(skills, "deploy", "Deploy the app.", "See references/steps.md.")
    (path.parent / "references").mkdir()
    (path.parent / "references" / "steps.md").write_text("1. build\n2. ship\n")
    s = agent.session()
    s.turn(
        tools(
            call("c1", "skill_load", {"name": "deploy"}),
            call("c2", "skill_search", {"query": "deploy"}),
            call("c3", "skill_read_resource", {"name": "deploy", "path": "references/steps.md"}),
            call("c4", "skill_read_resource", {"name": "deploy", "path": "../../../etc/passwd"}),
            call("c5", "skill_load", {"name": "nope"}),
        ),
        answer("ok"),
    )
    results = {m["tool_call_id"]: m for m in s.history() if m["role"] == "tool"}
    assert "See references/steps.md." in results["c1"]["content"]
    assert json.loads(results["c2"]["content"])[0]["ref"] == "global:deploy"
    assert results["c3"]["content"] == "1. build\n2. ship\n"
    assert results["c4"].get("is_error") and "root:" not in results["c4"]["content"]
    assert results["c5"].get("is_error") and "not found" in results["c5"]["content"]


def test_a_turn_naming_an_unknown_skill_fails_with_an_error(agent: Agent) -> None:
    s = agent.session()
    with s.events() as events:
        s.submit("go", skill_ref="global:missing")
        frames = events.until_kind("turn_complete")
    assert "load selected skill 'global:missing'" in only(frames, "error")
    assert only(frames, "turn_complete")["status"] == "failed"
    assert s.chats(streaming=True) == []
