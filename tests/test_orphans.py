"""What a crash leaves on disk is swept at the next start; what nothing owns, `foya check` reports
and `foya check --repair` removes.

A real `foya serve` (HOME a temp directory) killed in the middle of a plugin install
(`FOYA_FAILPOINT=plugin_install_copied`: the package is copied and checked, not yet renamed into
place) or of a replacement (`plugin_replace_moved_aside`: the old copy moved aside, the new one
not yet in place) is started again: no staging is left, the killed install is not there at all,
and the replaced plugin is back as it was. Staging of the data directory and the `.install-*`
directories of earlier versions are swept at the same start. `foya check` on a data directory
with planted orphans (a never-stored session's artifacts and workspace, a removed canvas's
assets, staging leftovers) lists exactly them and exits 1; `--repair` removes exactly them, while
a live session's and a live canvas's directories, and whatever a symbolic link points to, stay.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import Launcher, base_env, run_foya, short_tmpdir
from support.streams_helpers import Served, new_session, unix_kernel

from app.kernel.plugins.manifest import MANIFEST_SCHEMA

KILLED = 137


def make_plugin(place: Path, name: str, version: str) -> Path:
    """A package with one skill, `version` in its manifest."""
    place.mkdir(parents=True)
    manifest = {"$schema": MANIFEST_SCHEMA, "name": name, "version": version}
    (place / "plugin.json").write_text(json.dumps(manifest))
    skill = place / "skills" / f"{name}-skill" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f"---\nname: {name}-skill\ndescription: a plugin skill\n---\nDo it.\n")
    return place


def tree(root: Path) -> list[str]:
    """Every path below `root`, relative, links not followed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            found.append(str(Path(dirpath, name).relative_to(root)))
    return sorted(found)


def plant(path: Path, *files: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in files:
        (path / name).write_text("left behind\n")
    return path


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    home = tmp_path / "home"
    home.mkdir()
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path / "procs")
        try:
            yield {"home": home, "root": root, "launcher": launcher, "tmp": tmp_path}
        finally:
            launcher.close()


def start(world: dict[str, Any], **env: str) -> Served:
    """`foya serve` on `<root>/k` (the same data directory every time) with HOME `home`."""
    return unix_kernel(
        world["launcher"], world["root"], "k", env=base_env(HOME=str(world["home"]), **env)
    )


def install(served: Served, source: Path, replace: bool = False) -> httpx.Response:
    with served.client() as client:
        return client.post("/plugins/install", json={"source": str(source), "replace": replace})


def plugins(served: Served) -> list[tuple[str, str | None, bool]]:
    with served.client() as client:
        response = client.get("/plugins")
        assert response.status_code == 200, response.text
        return [(p["name"], p.get("version"), p["valid"]) for p in response.json()]


def killed_install(served: Served, source: Path, replace: bool = False) -> None:
    with pytest.raises(httpx.TransportError):
        install(served, source, replace)
    assert served.kernel.wait_exit() == KILLED, served.kernel.describe()


def test_a_plugin_install_killed_midway_leaves_nothing_after_the_next_start(
    world: dict[str, Any],
) -> None:
    plugins_dir = world["home"] / ".foya" / "plugins"
    source = make_plugin(world["tmp"] / "src" / "beta", "beta", "1.0.0")
    crashing = start(world, FOYA_FAILPOINT="plugin_install_copied:1")
    killed_install(crashing, source)
    # The kill came with the package copied into staging, before it was moved into place.
    assert [p.name.split("-")[0] for p in (plugins_dir / ".staging").iterdir()] == ["install"]
    assert "package/plugin.json" in tree(next((plugins_dir / ".staging").iterdir()))
    # Leftovers of earlier versions and of an import a crash cut short.
    legacy = plant(plugins_dir / ".install-ab12cd34" / "package", "plugin.json")
    register = plant(world["home"] / ".foya" / "marketplaces" / ".register-x1y2z3w4", "a")
    data_staging = plant(world["root"] / "k" / ".staging" / "import-0123abcd", "artifact.png")
    kept = plant(plugins_dir / ".install-notes", "mine.txt")  # not a name we ever staged

    restarted = start(world)
    assert plugins(restarted) == []
    assert tree(plugins_dir) == [".install-notes", ".install-notes/mine.txt"]
    assert not legacy.parent.exists() and not register.exists()
    assert not data_staging.exists() and tree(world["root"] / "k" / ".staging") == []
    assert kept.is_dir()
    # The same install now goes through, and leaves only the plugin.
    assert install(restarted, source).status_code == 201
    assert plugins(restarted) == [("beta", "1.0.0", True)]
    assert sorted(os.listdir(plugins_dir)) == [".install-notes", "beta"]


def test_a_replacement_killed_between_its_renames_puts_the_old_plugin_back(
    world: dict[str, Any],
) -> None:
    plugins_dir = world["home"] / ".foya" / "plugins"
    old = make_plugin(world["tmp"] / "v1" / "gamma", "gamma", "1.0.0")
    new = make_plugin(world["tmp"] / "v2" / "gamma", "gamma", "2.0.0")
    crashing = start(world, FOYA_FAILPOINT="plugin_replace_moved_aside:1")
    assert install(crashing, old).status_code == 201
    killed_install(crashing, new, replace=True)
    assert not (plugins_dir / "gamma").exists()  # the kill came with the old copy moved aside

    restarted = start(world)
    assert plugins(restarted) == [("gamma", "1.0.0", True)]
    assert sorted(os.listdir(plugins_dir)) == ["gamma"]  # the new copy was swept, staging too
    assert install(restarted, new, replace=True).status_code == 201
    assert plugins(restarted) == [("gamma", "2.0.0", True)]


def check(world: dict[str, Any], *flags: str) -> tuple[int, list[str], str]:
    done = run_foya(
        "check", *flags, "--data-dir", str(world["root"] / "k"),
        env=base_env(HOME=str(world["home"])),
    )  # fmt: skip
    return done.returncode, done.stdout.splitlines(), done.stderr


def test_foya_check_reports_orphans_and_repair_removes_exactly_them(
    world: dict[str, Any],
) -> None:
    data_dir, foya_home = world["root"] / "k", world["home"] / ".foya"
    served = start(world)
    with served.client() as client:
        live = new_session(client)["id"]
        response = client.post("/canvases", json={"title": "kept"})
        assert response.status_code == 201, response.text
        canvas = response.json()["id"]
        removed_canvas = client.post("/canvases", json={"title": "gone"}).json()["id"]
        assert client.delete(f"/canvases/{removed_canvas}").status_code in (200, 204)
    served.kernel.stop()
    # A live session's and a live canvas's directories (its workspace the kernel made).
    assert (data_dir / "workspaces" / live).is_dir()
    plant(data_dir / "workspaces" / live, "work.txt")
    plant(data_dir / "artifacts" / live, "a1.png", "a1.json")
    plant(data_dir / "canvas-assets" / canvas, "c1.png")
    # Outside the data directory, reachable only through a link: never followed nor removed.
    outside = plant(world["tmp"] / "outside", "precious.txt")
    (data_dir / "workspaces" / "linked").symlink_to(outside, target_is_directory=True)
    (data_dir / "artifacts" / "not-a-dir").write_text("a file, not an owner's directory\n")
    orphans = [
        plant(data_dir / "artifacts" / "never-stored", "x.png"),
        plant(data_dir / "workspaces" / "never-stored", "y.txt"),
        plant(data_dir / "canvas-assets" / removed_canvas, "z.png"),
        plant(data_dir / ".staging" / "import-feed0001", "w.png"),
        plant(data_dir / "canvas-assets" / ".incoming") / "upload-1.part",
        plant(foya_home / "plugins" / ".install-ab12cd34", "plugin.json"),
        plant(foya_home / "plugins" / ".staging" / "install-00ff00ff00ff00ff", "p"),
    ]
    live_dirs = {
        p: tree(p)
        for p in (
            data_dir / "workspaces" / live,
            data_dir / "artifacts" / live,
            data_dir / "canvas-assets" / canvas,
            outside,
        )
    }

    orphans[4].write_bytes(b"half an upload")
    (orphans[1] / "escape").symlink_to(outside, target_is_directory=True)  # removed, not followed
    code, lines, stderr = check(world)
    assert code == 1, (lines, stderr)
    assert sorted(lines) == sorted(f"orphan {kind}: {path}" for kind, path in zip(
        ("artifacts", "workspace", "canvas-assets", *["staging"] * 4),
        orphans, strict=True,
    )), lines  # fmt: skip
    assert "0 difference(s); 7 orphan(s)" in stderr
    assert all(p.exists() for p in orphans), "a plain check removes nothing"

    code, lines, stderr = check(world, "--repair")
    assert code == 0, (lines, stderr)
    assert "7 orphan(s), 7 removed" in stderr
    assert [p for p in orphans if os.path.lexists(p)] == []
    assert {p: tree(p) for p in live_dirs} == live_dirs
    assert (data_dir / "workspaces" / "linked").is_symlink()
    assert (data_dir / "artifacts" / "not-a-dir").is_file()
    assert (data_dir / "canvas-assets" / ".incoming").is_dir()  # only what was in it went

    code, lines, stderr = check(world)
    assert (code, lines) == (0, []), stderr
    assert "0 orphan(s)" in stderr
    again = start(world)  # the repaired data directory serves its live session
    with again.client() as client:
        listed = client.get("/sessions")
        assert listed.status_code == 200, listed.text
        assert [s["id"] for s in listed.json()] == [live]
        assert (data_dir / "workspaces" / live / "work.txt").is_file()
