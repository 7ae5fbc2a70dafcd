"""Skills (Foya's `skill` package): SKILL.md packages found under
`~/.agents/skills`, `~/.foya/skills` and a project's `.agents/skills` and `.foya/skills`.

The kernel's `Skills` service runs in-process over real files (discovery, precedence, the parse
cache, loading and resource paths); the routes run in a real `foya serve` whose HOME is a temp
directory: listing and inspecting, hand edits, a malformed SKILL.md, enable and pin persisted in
`skills.json` across a restart, and every refused request.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import Served, assert_error, unix_kernel

from app.kernel.projects import Projects
from app.kernel.usercontext.skillmodels import InvalidSkillRef, SkillNotFound
from app.kernel.usercontext.skills import Skills

PID = "p1"


def write_skill(root: Path, directory: str, text: str) -> Path:
    """`<root>/<directory>/SKILL.md` with `text`, its mtime an hour back so that the parse
    cache trusts it at once (a file changed within its clock tick is read again)."""
    path = root / directory / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    past = path.stat().st_mtime - 3600
    os.utime(path, (past, past))
    return path


def skill_md(name: str, description: str, body: str = "Do the work.", extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A home, a data directory and a project directory."""
    paths = {name: tmp_path / name for name in ("home", "data", "project")}
    for path in paths.values():
        path.mkdir()
    return paths


def service(place: dict[str, Path], tools: tuple[str, ...] = ("read", "bash")) -> Skills:
    return Skills(place["home"], place["data"], Projects(place["data"]), lambda: tools)


# ------------------------------------------------------------------------------- in process


def test_four_roots_with_precedence(place: dict[str, Path]) -> None:
    home, project = place["home"], place["project"]
    for base, scope in ((home, "global"), (project, "project")):
        for root in (".agents", ".foya"):
            write_skill(base / root / "skills", "review", skill_md("review", f"{scope} {root}"))
    write_skill(home / ".agents/skills", "lint", skill_md("Lint", "agents only"))
    write_skill(home / ".foya/skills/group", "deep", skill_md("deep", "one level down"))
    write_skill(project / ".agents/skills", "test", skill_md("test", "project agents only"))
    skills = service(place)

    seen = {s.ref: s.description for s in skills.available(PID, project)}
    assert seen == {
        f"project:{PID}:review": "project .foya",  # project over global, .foya over .agents
        f"project:{PID}:test": "project agents only",
        "global:deep": "one level down",
        "global:lint": "agents only",  # the ref's name is lower-cased, the name is kept
    }
    every = skills.files.scan(PID, project).found
    assert [(s.ref, s.description) for s, _ in every] == [
        (f"project:{PID}:review", "project .foya"),
        (f"project:{PID}:test", "project agents only"),
        ("global:deep", "one level down"),
        ("global:lint", "agents only"),
        ("global:review", "global .foya"),
    ]
    assert {s.ref: s.description for s in skills.available(None, None)}["global:review"] == (
        "global .foya"
    )
    skill, body = skills.load("REVIEW", PID, project)  # by name: the winner, any case
    assert (skill.ref, body) == (f"project:{PID}:review", "Do the work.")
    assert skills.load("global:review", PID, project)[0].description == "global .foya"


def test_listing_unchanged_skills_reads_no_file(place: dict[str, Path]) -> None:
    root = place["home"] / ".foya/skills"
    for i in range(20):
        write_skill(root, f"s{i:02d}", skill_md(f"s{i:02d}", f"skill {i}", "x" * 2000))
    skills = service(place)
    assert len(skills.available(None, None)) == 20
    after_first = skills.files.reads
    assert after_first == 20  # each SKILL.md once (skills.json does not exist)
    listed = skills.available(None, None)
    assert [skills.body(s) for s in listed] == ["x" * 2000] * 20
    assert skills.load("s07", None, None)[1] == "x" * 2000
    assert skills.files.reads == after_first  # served from the parse cache
    write_skill(root, "s03", skill_md("s03", "edited"))
    assert {s.name: s.description for s in skills.available(None, None)}["s03"] == "edited"
    assert skills.files.reads == after_first + 1  # only the edited file is read again


def test_load_refuses_disabled_and_unusable_skills(place: dict[str, Path]) -> None:
    root = place["home"] / ".foya/skills"
    write_skill(
        root, "web", skill_md("web", "needs the web", extra="required-tools: [web_fetch]\n")
    )
    write_skill(
        root,
        "shell",
        skill_md("shell", "needs a terminal", extra="required-capabilities:\n  - terminal\n"),
    )
    (place["data"] / "skills.json").write_text(json.dumps({"disabled": ["user:shell"]}))
    skills = service(place, tools=("read",))
    assert skills.available(None, None) == []
    with pytest.raises(SkillNotFound, match="is disabled"):  # Foya's older `user:` ref
        skills.load("shell", None, None)
    with pytest.raises(SkillNotFound, match="web_fetch"):
        skills.load("global:web", None, None)
    with pytest.raises(SkillNotFound, match="not found"):
        skills.load("nothing", None, None)
    assert [s.name for s in service(place, tools=("web_fetch",)).available(None, None)] == ["web"]


def test_resource_paths_cannot_leave_the_package(place: dict[str, Path], tmp_path: Path) -> None:
    package = write_skill(place["home"] / ".foya/skills", "docs", skill_md("docs", "d")).parent
    (package / "references").mkdir()
    (package / "references/api.md").write_text("# API\n")
    (package / "logo.png").write_bytes(b"\x89PNG")
    secret = tmp_path / "secret.md"
    secret.write_text("not for the model")
    (package / "references/leak.md").symlink_to(secret)
    skills = service(place)

    found = skills.read_resource("docs", "references/api.md", None, None)
    assert (found.skill_ref, found.path, found.content) == (
        "global:docs",
        "references/api.md",
        "# API\n",
    )
    assert found.media_type == "text/markdown"
    loaded, _ = skills.load("docs", None, None)
    assert [(r.path, r.media_type) for r in loaded.resources or []] == [
        ("logo.png", "application/octet-stream"),
        ("references/api.md", "text/markdown"),
    ]  # the symbolic link is not listed
    for path, words in (
        ("../docs/SKILL.md", "inside the skill package"),
        ("references/../../x.md", "inside the skill package"),
        (str(secret), "relative"),
        ("references/leak.md", "leaves the skill package"),
        ("logo.png", "not a text resource"),
        ("", "required"),
    ):
        with pytest.raises(InvalidSkillRef, match=words):
            skills.read_resource("docs", path, None, None)
    with pytest.raises(SkillNotFound):
        skills.read_resource("docs", "references/none.md", None, None)


def test_project_skill_links_stay_in_the_project(place: dict[str, Path], tmp_path: Path) -> None:
    outside = write_skill(tmp_path / "elsewhere", "spy", skill_md("spy", "outside")).parent
    write_skill(tmp_path / "elsewhere", "shared", skill_md("shared", "linked from home"))
    inside = write_skill(place["project"] / "tools", "inner", skill_md("inner", "in the repo"))
    roots = place["project"] / ".foya/skills"
    roots.mkdir(parents=True)
    (roots / "spy").symlink_to(outside)
    (roots / "inner").symlink_to(inside.parent)
    (place["home"] / ".agents/skills").mkdir(parents=True)
    (place["home"] / ".agents/skills/shared").symlink_to(tmp_path / "elsewhere/shared")
    skills = service(place)

    assert [s.ref for s in skills.available(PID, place["project"])] == [
        f"project:{PID}:inner",
        "global:shared",  # the user's own home may link anywhere, as in Foya
    ]
    scan = skills.files.scan(PID, place["project"])
    assert [(r.ref, r.diagnostics[0].code) for r in scan.rejected] == [
        (f"project:{PID}:spy", "path_escape")
    ]


# ------------------------------------------------------------------------------------ wire


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One kernel whose HOME is a temp dir."""
    home = tmp_path_factory.mktemp("home")
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path_factory.mktemp("skills"))
        try:
            served = start(launcher, root, home)
            yield {"served": served, "home": home, "data_dir": served.data_dir}
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


def new_project(client: httpx.Client, tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "repo"
    path.mkdir()
    return ok(client.post("/projects", json={"path": str(path)}), 201)["id"], path


def test_routes_list_and_inspect(
    world: dict[str, Any], client: httpx.Client, tmp_path: Path
) -> None:
    home = world["home"]
    pid, project = new_project(client, tmp_path)
    write_skill(home / ".agents/skills", "w-review", skill_md("w-review", "global agents"))
    write_skill(
        home / ".foya/skills",
        "w-review",
        skill_md("w-review", "global foya", extra="allowed-tools:\n  - read\nlicense: MIT\n"),
    )
    package = write_skill(
        project / ".foya/skills", "w-review", skill_md("w-review", "project")
    ).parent
    (package / "notes.md").write_text("notes\n")
    write_skill(home / ".foya/skills", "w-plain", "# Plain\nNo front matter.\n")

    listed = {s["ref"]: s for s in ok(client.get("/skills"))}
    review = listed["global:w-review"]
    assert review["description"] == "global foya" and review["scope"] == "global"
    assert review["enabled"] is True and review["pinned"] is False
    assert review["manifest"] == {
        "name": "w-review",
        "description": "global foya",
        "allowed_tools": ["read"],
        "license": "MIT",
    }
    assert review["allowed_tools"] == ["read"] and "required_tools" not in review
    assert review["path"] == review["main_path"] == str(home / ".foya/skills/w-review/SKILL.md")
    assert len(review["content_hash"]) == 64 and "body" not in review
    plain = listed["global:w-plain"]
    assert plain["description"] == "" and plain["manifest"] == {"name": "w-plain"}
    assert {d["code"] for d in plain["diagnostics"]} == {
        "missing_frontmatter",
        "missing_description",
    }
    assert not any(s["scope"] == "project" for s in listed.values())
    assert {s["ref"] for s in ok(client.get("/skills?all=true"))} == set(listed)
    assert {s["ref"] for s in ok(client.get("/skills?invocable=true"))} == set(listed)

    in_project = {s["ref"]: s for s in ok(client.get(f"/projects/{pid}/skills"))}
    mine = in_project[f"project:{pid}:w-review"]
    assert "global:w-review" not in in_project and "global:w-plain" in in_project
    assert mine["description"] == "project" and mine["resources"] == [
        {"path": "notes.md", "size": 6, "media_type": "text/markdown"}
    ]
    every = [s["ref"] for s in ok(client.get(f"/projects/{pid}/skills?all=true"))]
    assert every.index(f"project:{pid}:w-review") < every.index("global:w-review")

    report = ok(client.get(f"/projects/{pid}/skills/inspect"))
    assert f"project:{pid}:w-review" in [s["ref"] for s in report["skills"]]
    assert "global:w-review" not in [s["ref"] for s in report["skills"]]
    assert "global:w-review" in [s["ref"] for s in report["inventory"]]
    assert_error(client.get("/projects/nope/skills"), 404, "project_not_found")
    assert_error(client.get("/projects/nope/skills/inspect"), 404, "project_not_found")


def test_hand_edit_and_malformed_files(world: dict[str, Any], client: httpx.Client) -> None:
    root = world["home"] / ".foya/skills"
    write_skill(root, "h-edit", skill_md("h-edit", "before"))
    write_skill(root, "h-bad", "---\nname: h-bad\ndescription: never closed\n")
    write_skill(root, "h-list", skill_md("h-list", "bad list", extra="allowed-tools: {a: b}\n"))
    write_skill(root, "h-good", skill_md("h-good", "still loads"))
    listed = {s["name"]: s for s in ok(client.get("/skills"))}
    assert listed["h-edit"]["description"] == "before" and "h-good" in listed
    assert "h-bad" not in listed and "h-list" not in listed

    (root / "h-edit/SKILL.md").write_text(skill_md("h-edit", "after a hand edit"))
    assert {s["name"]: s for s in ok(client.get("/skills"))}["h-edit"]["description"] == (
        "after a hand edit"
    )
    report = ok(client.get("/skills/inspect"))
    rejected = {r["name"]: r for r in report["rejected"]}
    assert rejected["h-bad"]["scope"] == "global"
    assert rejected["h-bad"]["path"] == str(root / "h-bad/SKILL.md")
    assert rejected["h-bad"]["diagnostics"] == [
        {
            "name": "h-bad",
            "path": str(root / "h-bad/SKILL.md"),
            "code": "invalid_skill",
            "severity": "error",
            "message": "unterminated YAML frontmatter",
        }
    ]
    assert "allowed-tools" in rejected["h-list"]["diagnostics"][0]["message"]
    assert rejected["h-bad"]["diagnostics"][0] in report["diagnostics"]


def test_bad_requests_are_refused_and_change_nothing(
    world: dict[str, Any], client: httpx.Client
) -> None:
    write_skill(world["home"] / ".foya/skills", "b-known", skill_md("b-known", "k"))
    state = world["data_dir"] / "skills.json"
    before = state.read_bytes() if state.exists() else None
    for ref in ("global:nothing", "project:nope:b-known", "builtin:b-known", "global:B-KNOWN"):
        assert_error(
            client.patch(f"/skills/{ref}", json={"enabled": False}), 404, "skill_not_found"
        )
        assert_error(
            client.patch(f"/skills/{ref}/pinned", json={"pinned": True}), 404, "skill_not_found"
        )
    for ref in (
        "global:..",
        "global:..%2F..%2Fetc",
        "global:a%2Fb",
        "global:a%5Cb",
        "global:a%00",
        "%20",
    ):
        body = assert_error(
            client.patch(f"/skills/{ref}", json={"enabled": False}), 400, "bad_request"
        )
        assert "ref" in body["message"]
        assert_error(
            client.patch(f"/skills/{ref}/pinned", json={"pinned": True}), 400, "bad_request"
        )
    bad: object
    for bad in ({}, {"enabled": "no"}, {"enabled": 0}, []):
        assert_error(client.patch("/skills/global:b-known", json=bad), 400, "bad_request")
    assert_error(
        client.patch("/skills/global:b-known/pinned", json={"enabled": True}), 400, "bad_request"
    )
    not_json = client.patch(
        "/skills/global:b-known", content=b"{", headers={"content-type": "application/json"}
    )
    assert_error(not_json, 400, "bad_request")
    assert_error(client.get("/skills?all=maybe"), 400, "bad_request")
    assert (state.read_bytes() if state.exists() else None) == before
    assert ok(client.get("/skills/inspect"))["skills"]  # nothing broke


def test_enable_and_pin_persist_across_restart(spawn: Launcher, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_skill(home / ".foya/skills", "alpha", skill_md("alpha", "a"))
    write_skill(home / ".agents/skills", "beta", skill_md("beta", "b"))
    project = tmp_path / "repo"
    write_skill(project / ".foya/skills", "review", skill_md("review", "r"))
    with short_tmpdir() as root:
        served = start(spawn, root, home)
        with served.client() as client:
            pid = ok(client.post("/projects", json={"path": str(project)}), 201)["id"]
            ok(client.patch("/skills/global:alpha", json={"enabled": False}), 204)
            ok(client.patch("/skills/global:beta/pinned", json={"pinned": True}), 204)
            ok(client.patch(f"/skills/project:{pid}:review/pinned", json={"pinned": True}), 204)
            ok(client.patch(f"/skills/project:{pid}:review", json={"enabled": False}), 204)
            ok(client.patch(f"/skills/project:{pid}:review", json={"enabled": True}), 204)
            assert not any(s["name"] == "alpha" for s in ok(client.get("/skills?invocable=true")))
        served.kernel.stop()
        state = served.data_dir / "skills.json"
        assert stat.S_IMODE(state.stat().st_mode) == 0o600
        assert json.loads(state.read_text()) == {
            "disabled": ["global:alpha"],
            "pinned": ["global:beta", f"project:{pid}:review"],
        }

        again = start(spawn, root, home)
        with again.client() as client:
            listed = {s["ref"]: (s["enabled"], s["pinned"]) for s in ok(client.get("/skills"))}
            assert listed == {"global:alpha": (False, False), "global:beta": (True, True)}
            mine = ok(client.get(f"/projects/{pid}/skills"))
            assert [(s["ref"], s["enabled"], s["pinned"]) for s in mine] == [
                (f"project:{pid}:review", True, True),
                ("global:beta", True, True),
            ]
            ok(client.patch("/skills/global:alpha", json={"enabled": True}), 204)
            assert ok(client.get("/skills/inspect"))["skills"][0]["enabled"] is True
