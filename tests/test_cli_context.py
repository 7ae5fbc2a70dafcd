"""`foya rules`, `foya memory` and `foya skills` against a real `foya serve` on a Unix socket
whose HOME is a temp dir (so `~/.foya` is this module's). The commands run in the test's
process (`support.cli_inprocess`); one test runs them as the console script's own process.

The commands are judged by what they print and exit with, and against the kernel's own REST
answers and files: `edit-path` must print the very file the kernel reads and writes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import pytest
from support.cli_inprocess import run_cli
from support.helpers import FOYA, REPO, Launcher, base_env, free_port, short_tmpdir
from support.streams_helpers import Served, unix_kernel

from app.kernel.usercontext.files import ContextFiles
from app.ops.context_commands import project_memory_file

SKILL = "---\nname: {name}\ndescription: {about}\n---\n{body}\n"


@dataclass(frozen=True)
class World:
    served: Served
    sock: Path
    home: Path
    project: Path
    project_id: str

    def client(self) -> httpx.Client:
        return self.served.client()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One kernel whose HOME is a temp dir with a global skill, and one registered project with
    a skill of its own."""
    home = tmp_path_factory.mktemp("home")
    project = tmp_path_factory.mktemp("project")
    write_skill(home / ".foya" / "skills" / "lint", "lint", "Run the linters.")
    write_skill(project / ".foya" / "skills" / "review", "review", "Review a diff.")
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path_factory.mktemp("procs"))
        try:
            sock = root / "k.sock"
            served = unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))
            with served.client() as client:
                made = client.post("/projects", json={"path": str(project)})
                assert made.status_code == 201, made.text
            yield World(served, sock, home, project, made.json()["id"])
        finally:
            launcher.close()


def write_skill(directory: Path, name: str, about: str) -> Path:
    directory.mkdir(parents=True)
    path = directory / "SKILL.md"
    path.write_text(SKILL.format(name=name, about=about, body=f"How to {name}."))
    return path


def foya(
    world: World | None,
    *args: str,
    stdin: str = "",
    env: dict[str, str] | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`foya <group> <command> <args> --socket <the module's kernel>`, with this module's HOME
    (no `--socket` without `world`); in a process of its own with `process`."""
    extra = ("--socket", str(world.sock)) if world is not None else ()
    home = {"HOME": str(world.home)} if world is not None else {}
    env = env if env is not None else base_env(**home)
    if not process:
        return run_cli(*args, *extra, env=env, stdin=stdin)
    return subprocess.run(
        [*FOYA, *args, *extra],
        cwd=REPO,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that exited 0 and said nothing on stderr."""
    assert done.returncode == 0 and done.stderr == "", explain(done)
    return done.stdout


def failed(done: subprocess.CompletedProcess[str], code: int, stderr: str) -> None:
    """The command printed nothing, and exactly one line on stderr, and exited `code`."""
    assert (done.returncode, done.stdout, done.stderr) == (code, "", f"foya: {stderr}\n"), explain(
        done
    )


def line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a command that exited 0 printed (a path, say)."""
    out = ok(done)
    assert out.count("\n") == 1, out
    return out.rstrip("\n")


def rest(world: World, method: str, path: str, body: Any = None) -> Any:
    """The kernel's own answer, through httpx."""
    with world.client() as client:
        response = client.request(method, path, json=body)
    assert response.is_success, response.text
    return response.json() if response.content else None


def table(text: str) -> list[list[str]]:
    """The rows of a printed table, split on runs of two spaces or more."""
    return [[c.strip() for c in line.split("  ") if c.strip()] for line in text.splitlines()]


# ----------------------------------------------------------------------------------------- rules


def test_rules_add_list_show_edit_delete(world: World) -> None:
    added = ok(foya(world, "rules", "add", "Prefer", "small", "functions."))
    assert added.startswith("added rule ") and added.endswith(" (global)\n")
    rule_id = added.split()[2]
    # TEXT from stdin, kept as it is written (lines and all), into the project's scope; this
    # once through the console script's own process
    args = ("rules", "add", "--project", world.project_id, "--json")
    piped = json.loads(ok(foya(world, *args, stdin="One\nTwo\n", process=True)))
    assert (piped["scope"], piped["project_id"], piped["content"]) == (
        "project",
        world.project_id,
        "One\nTwo",
    )

    rows = table(ok(foya(world, "rules", "list")))
    assert rows[0] == ["ID", "TRIGGER", "NAME", "PATH"]
    assert [rule_id, "always", f"rule-{rule_id[:8]}"] in rows
    assert piped["id"] not in {r[0] for r in rows}  # scopes are separate
    listed = json.loads(ok(foya(world, "rules", "list", "--json")))
    assert listed == rest(world, "GET", "/rules?scope=global")
    rows = table(ok(foya(world, "rules", "list", "--project-id", world.project_id)))
    assert [piped["id"], "always", piped["name"], piped["path"]] in rows

    shown = ok(foya(world, "rules", "show", rule_id)).splitlines()
    assert shown[:4] == [
        f"id:         {rule_id}",
        f"name:       rule-{rule_id[:8]}",
        "trigger:    always",
        "scope:      global",
    ]
    assert shown[-2:] == ["", "Prefer small functions."]
    # a project's rule is found without --project too
    assert ok(foya(world, "rules", "show", piped["id"])).endswith("\nOne\nTwo\n")
    assert json.loads(ok(foya(world, "rules", "show", rule_id, "--json")))["id"] == rule_id

    # `edit` replaces the content only: a name, trigger and globs set through the API stay
    fields = {"name": "py", "trigger": "glob", "globs": ["*.py"]}
    globbed = rest(world, "POST", "/rules", {"scope": "global", "content": "old", **fields})
    assert ok(foya(world, "rules", "edit", globbed["id"], "new", "text")) == (
        f"updated rule {globbed['id']}\n"
    )
    after = {r["id"]: r for r in rest(world, "GET", "/rules?scope=global")}[globbed["id"]]
    assert after["content"] == "new text"
    assert {k: after[k] for k in fields} == fields

    for gone in (rule_id, piped["id"], globbed["id"]):
        assert ok(foya(world, "rules", "delete", gone)) == f"deleted rule {gone}\n"
    remaining = {r["id"] for r in rest(world, "GET", "/rules?scope=global")}
    assert not {rule_id, globbed["id"]} & remaining
    assert not (world.project / ".foya" / "rules" / piped["path"]).exists()


def test_edit_paths_are_the_files_the_kernel_uses(world: World) -> None:
    """What `edit-path` prints is where the kernel wrote; a hand edit there is what it serves."""
    pid = world.project_id
    rules_file = Path(line(foya(world, "rules", "edit-path")))
    assert rules_file == world.home / ".foya" / "rules" / "user_rules.md"
    rule_id = ok(foya(world, "rules", "add", "Answer in English.")).split()[2]
    assert "Answer in English." in rules_file.read_text()
    assert Path(line(foya(world, "rules", "edit-path", rule_id))) == rules_file

    rules_dir = line(foya(world, "rules", "edit-path", "--project", pid))
    assert rules_dir == f"{world.project / '.foya' / 'rules'}/"
    added = foya(world, "rules", "add", "--project", pid, "Keep SQL in store/.", "--json")
    project_rule = json.loads(ok(added))
    rule_file = Path(line(foya(world, "rules", "edit-path", project_rule["id"])))
    assert rule_file == Path(rules_dir) / project_rule["path"]
    assert "Keep SQL in store/." in rule_file.read_text()

    memory_file = Path(line(foya(world, "memory", "edit-path")))
    assert memory_file == world.home / ".foya" / "memory" / "user_profile.md"
    project_memory = Path(line(foya(world, "memory", "edit-path", "--project", pid)))
    assert project_memory.is_relative_to(world.home / ".foya" / "memory" / "projects")
    ok(foya(world, "memory", "set", "--project", pid, "The API speaks SSE."))
    assert "The API speaks SSE." in project_memory.read_text()
    project_memory.write_text("# Foya Project Memory\n\nEdited by hand.\n")
    assert ok(foya(world, "memory", "show", "--project", pid)) == "Edited by hand.\n"

    for args in (("rules", "delete", rule_id), ("rules", "delete", project_rule["id"])):
        ok(foya(world, *args))


def test_project_memory_file_is_the_kernels(tmp_path: Path) -> None:
    """The client names a project's memory file by the kernel's rule (it cannot import it)."""
    files = ContextFiles(tmp_path / ".foya")
    for project in ("/srv/app", "/srv/app/", "/a/../b/c", "/x:y/z", "/", "/data/My Project"):
        assert project_memory_file(tmp_path / ".foya", project) == files.memory_file(Path(project))
    remote = project_memory_file(PurePosixPath("~/.foya"), "/srv/app")
    assert str(remote) == "~/.foya/memory/projects/srv/app/project_memory.md"


def test_edit_path_of_a_kernel_elsewhere_is_in_its_home(world: World) -> None:
    """With --url the kernel's home is not this one: the path keeps its `~`. A global path needs
    no answer from the kernel; a project's does."""
    url = f"http://127.0.0.1:{free_port()}"
    env = base_env(HOME=str(world.home))
    done = foya(None, "rules", "edit-path", "--url", url, env=env)
    assert ok(done) == "~/.foya/rules/user_rules.md\n"
    assert ok(foya(None, "memory", "edit-path", "--url", url, env=env)) == (
        "~/.foya/memory/user_profile.md\n"
    )
    assert ok(foya(None, "skills", "edit-path", "--url", url, env=env)) == "~/.foya/skills/\n"
    down = foya(None, "memory", "edit-path", "--project", world.project_id, "--url", url, env=env)
    assert down.returncode == 2, explain(down)
    assert "Connection refused" in down.stderr


# ---------------------------------------------------------------------------------------- memory


def test_memory_set_show_clear(world: World) -> None:
    assert ok(foya(world, "memory", "set", "I like tea.")) == "set global memory\n"
    assert ok(foya(world, "memory", "set", stdin="I like coffee.\n")) == "set global memory\n"
    assert ok(foya(world, "memory", "show")) == "I like coffee.\n"  # replaced, not appended
    listed = json.loads(ok(foya(world, "memory", "show", "--json")))
    assert listed == rest(world, "GET", "/memories?scope=global")

    assert ok(foya(world, "memory", "clear")) == "cleared global memory\n"
    assert rest(world, "GET", "/memories?scope=global") == []
    again = foya(world, "memory", "clear")
    assert (again.returncode, again.stdout, again.stderr) == (
        0,
        "",
        "foya: no global memory to clear\n",
    )
    empty = foya(world, "memory", "show")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "foya: no global memory\n")
    assert json.loads(ok(foya(world, "memory", "show", "--json"))) == []


def test_memory_switch(world: World) -> None:
    try:
        assert ok(foya(world, "memory", "disable")) == "memory: disabled\n"
        assert rest(world, "GET", "/settings/memory") == {"enabled": False}
        assert ok(foya(world, "memory", "status")) == "memory: disabled\n"
        assert json.loads(ok(foya(world, "memory", "status", "--json"))) == {"enabled": False}
    finally:
        assert ok(foya(world, "memory", "enable")) == "memory: enabled\n"
    assert rest(world, "GET", "/settings/memory") == {"enabled": True}


def test_a_group_alone_runs_its_first_command(world: World) -> None:
    env = base_env(HOME=str(world.home), FOYA_SOCKET_PATH=str(world.sock))
    rule_id = ok(foya(world, "rules", "add", "Alone.")).split()[2]
    assert rule_id in ok(foya(None, "rules", env=env))
    ok(foya(world, "memory", "set", "Alone too."))
    assert ok(foya(None, "memory", env=env)) == "Alone too.\n"
    ok(foya(world, "rules", "delete", rule_id))
    ok(foya(world, "memory", "clear"))


# ------------------------------------------------------------------------------------------ help

GROUPS = {
    "rules": ("list", "show", "add", "edit", "delete", "edit-path"),
    "memory": ("show", "status", "enable", "disable", "set", "clear", "edit-path"),
    "skills": ("list", "show", "enable", "disable", "edit-path"),
}


@pytest.mark.parametrize("group", GROUPS)
def test_help_lists_each_command_uncut(group: str) -> None:
    """The house rules of tests/test_cli.py: plain text in 80 columns, nothing cut short, and
    the socket flag names its variable."""
    for command in ((), *((c,) for c in GROUPS[group])):
        done = foya(None, group, *command, "-h", env=base_env(COLUMNS="80"))
        text = ok(done)
        lines = text.splitlines()
        assert all(len(line) <= 80 for line in lines), text
        assert "…" not in text and not any(line.endswith("...") for line in lines[1:]), text
        if command:
            assert "FOYA_SOCKET_PATH" in text, text
        else:
            listed = [line.split()[0] for line in text.split("Commands:")[1].splitlines()[1:]]
            assert listed == list(GROUPS[group]), text


# ---------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("rules", "show", "nope"), "rule nope not found"),
        (("rules", "edit-path", "nope"), "rule nope not found"),
        (("rules", "edit", "nope", "x"), "the kernel answered 404 not_found: rule nope not found"),
        (("rules", "delete", "nope"), "the kernel answered 404 not_found: rule nope not found"),
        (("skills", "show", "global:nope"), "skill global:nope not found"),
        (("skills", "disable", "nope"), "skill nope not found"),
        (("skills", "edit-path", "nope"), "skill nope not found"),
    ],
)
def test_an_unknown_id_exits_1(world: World, args: tuple[str, ...], message: str) -> None:
    failed(foya(world, *args), 1, message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("rules", "list", "--project", "nope"), "404 not_found: project nope not found"),
        (("memory", "show", "--project", "nope"), "404 not_found: project nope not found"),
        # Foya's project skill routes answer `project_not_found`, its rule routes `not_found`
        (("skills", "list", "--project", "nope"), "404 project_not_found: project nope not found"),
        (
            ("rules", "add", "--project", "", "x"),
            "400 invalid_context_item: project_id is required for scope project",
        ),
        (
            ("memory", "set", "--project", "", "x"),
            "400 invalid_context_item: project_id is required for scope project",
        ),
    ],
)
def test_a_bad_scope_is_the_kernels_answer(
    world: World, args: tuple[str, ...], message: str
) -> None:
    failed(foya(world, *args), 1, f"the kernel answered {message}")


@pytest.mark.parametrize("group", ["rules", "memory", "skills"])
def test_an_unknown_project_has_no_edit_path(world: World, group: str) -> None:
    failed(foya(world, group, "edit-path", "--project", "nope"), 1, "project nope not found")


def test_empty_text_is_refused_and_writes_nothing(world: World) -> None:
    before = rest(world, "GET", "/rules?scope=global")
    for args in (("rules", "add"), ("rules", "add", " "), ("memory", "set")):
        failed(foya(world, *args, stdin="\n"), 2, "give TEXT, or pipe it on stdin")
    assert rest(world, "GET", "/rules?scope=global") == before


@pytest.mark.parametrize(
    "args",
    [
        ("rules", "list"),
        ("rules", "show", "x"),
        ("rules", "add", "x"),
        ("rules", "edit-path", "--project", "p"),
        ("memory", "show"),
        ("memory", "status"),
        ("memory", "set", "x"),
        ("memory", "clear"),
        ("skills", "list"),
        ("skills", "enable", "x"),
    ],
)
def test_a_kernel_that_is_down_exits_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    gone = tmp_path / "nobody.sock"
    done = foya(None, *args, "--socket", str(gone))
    failed(
        done,
        2,
        f"cannot reach the kernel at {gone} (No such file or directory); is `foya serve` running?",
    )


# ---------------------------------------------------------------------------------------- skills


def test_skills_list_show_enable_disable(world: World) -> None:
    rows = table(ok(foya(world, "skills", "list")))
    assert rows[0] == ["REF", "SCOPE", "STATE", "DESCRIPTION"]
    assert ["global:lint", "global", "enabled", "Run the linters."] in rows
    assert not any(r[0].startswith("project:") for r in rows)
    assert json.loads(ok(foya(world, "skills", "list", "--json"))) == rest(
        world, "GET", "/skills?all=true"
    )
    ref = f"project:{world.project_id}:review"
    rows = table(ok(foya(world, "skills", "list", "--project", world.project_id)))
    assert [ref, "project", "enabled", "Review a diff."] in rows

    shown = ok(foya(world, "skills", "show", ref)).splitlines()
    assert shown[:5] == [
        f"ref:         {ref}",
        "name:        review",
        "scope:       project",
        "state:       enabled",
        "description: Review a diff.",
    ]
    assert json.loads(ok(foya(world, "skills", "show", "lint", "--json")))["ref"] == "global:lint"

    try:
        assert ok(foya(world, "skills", "disable", ref)) == f"disabled skill {ref}\n"
        listed = rest(world, "GET", f"/projects/{world.project_id}/skills?all=true")
        assert {s["ref"]: s["enabled"] for s in listed}[ref] is False
        rows = table(ok(foya(world, "skills", "list", "--project", world.project_id)))
        assert [ref, "project", "disabled", "Review a diff."] in rows
    finally:
        assert ok(foya(world, "skills", "enable", ref)) == f"enabled skill {ref}\n"
    listed = rest(world, "GET", f"/projects/{world.project_id}/skills?all=true")
    assert {s["ref"]: s["enabled"] for s in listed}[ref] is True


def test_skills_edit_path(world: World) -> None:
    ref = f"project:{world.project_id}:review"
    path = line(foya(world, "skills", "edit-path", ref))
    assert path == str(world.project / ".foya" / "skills" / "review" / "SKILL.md")
    lint = line(foya(world, "skills", "edit-path", "global:lint"))
    assert lint == str(world.home / ".foya" / "skills" / "lint" / "SKILL.md")
    assert ok(foya(world, "skills", "edit-path")) == f"{world.home / '.foya' / 'skills'}/\n"
    assert ok(foya(world, "skills", "edit-path", "--project", world.project_id)) == (
        f"{world.project / '.foya' / 'skills'}/\n"
    )
