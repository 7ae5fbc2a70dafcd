"""`foya import`, `foya export`, `POST /imports` and the export routes, against real `foya serve`
processes on Unix sockets: what only the wire and the CLI show (statuses, codes, the upload
limit, the progress of a real upload, a kill in the middle of an import). The kernel rules
themselves are tested in process (test_imports.py) and the parsers on their own
(test_import_chatbuddy.py, test_import_transcripts.py).

The commands run in the test's process (`support.cli_inprocess`) against the real kernels; the
first import of a backup runs as a process of its own, progress bars and all."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.chatbuddy_fixtures import encrypted, sample_payload, v2_zip, zip_members
from support.cli_inprocess import run_cli
from support.documents import blocks
from support.helpers import Launcher, base_env, run_foya, short_tmpdir
from support.streams_helpers import Served, assert_error, unix_kernel
from transcript_fixtures import write_claude_tree, write_codex_tree, write_opencode_tree

from app.store.check import check

TITLES = ["Reading a latency chart", "Review of retry helper", "Why the sky is blue"]


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path_factory.mktemp("imports"))
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture
def kernel(request: pytest.FixtureRequest, launcher: Launcher, root: Path) -> Served:
    """A fresh kernel with a HOME of its own (rules are written there)."""
    name = f"k{len(launcher.kernels)}"
    home = root / f"{name}-home"
    home.mkdir()
    return unix_kernel(launcher, root, name, env=base_env(HOME=str(home)))


def argv(served: Served, *args: str) -> tuple[str, ...]:
    """`<command> --socket <the served kernel> <args>`."""
    sock = served.kernel.uds
    assert sock is not None
    return (args[0], "--socket", str(sock), *args[1:])


def foya(served: Served, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`foya <command> --socket <the served kernel> <args>` with `env` added, in process."""
    return run_cli(*argv(served, *args), env=base_env(**env))


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"


def readme_block(name: str) -> str:
    return blocks()[name].text


def titles(client: httpx.Client) -> list[str]:
    return sorted(s["title"] or "" for s in client.get("/sessions").json())


def state(client: httpx.Client) -> tuple[Any, ...]:
    """What an import may change, as clients see it."""
    sessions = client.get("/sessions").json()
    return (
        sorted(s["id"] for s in sessions),
        client.get("/rules", params={"scope": "global"}).json(),
        [c["id"] for c in client.get("/connections").json()],
    )


def upload(client: httpx.Client, data: bytes, **fields: str) -> httpx.Response:
    files = {"file": ("backup.zip", data, "application/zip")}
    return client.post("/imports", files=files, data={"source": "chatbuddy", **fields})


def test_cli_imports_a_chatbuddy_backup_once(kernel: Served, tmp_path: Path) -> None:
    backup = tmp_path / "chatbuddy-backup-20260620-091542.zip"
    backup.write_bytes(v2_zip(sample_payload()))
    # in a process of its own, as a user runs it: `python -m app import ...`
    done = run_foya(*argv(kernel, "import", "chatbuddy", str(backup)), timeout=120)
    assert done.returncode == 0, explain(done)
    assert done.stdout == readme_block("import-summary")  # the README shows this very summary
    assert "reading chatbuddy" in done.stderr and "uploading" in done.stderr  # the progress bars
    with kernel.client() as client:
        assert titles(client) == TITLES
        sky = next(s for s in client.get("/sessions").json() if s["title"] == TITLES[2])
        messages = client.get(f"/sessions/{sky['id']}/history").json()
        assert messages[-1]["reasoning"].startswith("Rayleigh scattering")
        assert messages[-1]["model"] == "deepseek/deepseek-r1"
        rules = [r["name"] for r in client.get("/rules", params={"scope": "global"}).json()]
        assert sorted(rules) == ["ChatBuddy: Code Reviewer", "ChatBuddy: Research Buddy"]
        assert client.get("/connections").json() == []  # no --with-keys
        before = state(client)
        again = foya(kernel, "import", "chatbuddy", str(backup), "--json")
        assert again.returncode == 0, explain(again)
        summary = json.loads(again.stdout)
        assert (summary["sessions_created"], summary["sessions_unchanged"]) == (0, 3)
        assert summary["messages_imported"] == 0
        assert state(client) == before
        keys = foya(kernel, "import", "chatbuddy", str(backup), "--with-keys")
        assert keys.returncode == 0, explain(keys)
        assert "sk-test" not in keys.stdout + keys.stderr
        made = client.get("/connections").json()
        assert sorted(c["name"] for c in made) == ["OpenAI", "OpenRouter"]
        assert all("sk-test" not in json.dumps(c) for c in made)  # keys are never shown


def test_encrypted_backups_need_their_passphrase(kernel: Served, tmp_path: Path) -> None:
    sealed = tmp_path / "chatbuddy-backup.enc.zip"
    sealed.write_bytes(encrypted(v2_zip(sample_payload()), "correct horse"))
    with kernel.client() as client:
        before = state(client)
        for env in ({}, {"FOYA_IMPORT_PASSPHRASE": "wrong"}):
            done = foya(kernel, "import", "chatbuddy", str(sealed), **env)
            assert done.returncode == 1, explain(done)
            assert "passphrase" in done.stderr and "wrong" not in done.stderr.split(":", 1)[1:2]
            assert state(client) == before
        done = foya(
            kernel, "import", "chatbuddy", str(sealed), FOYA_IMPORT_PASSPHRASE="correct horse"
        )
        assert done.returncode == 0, explain(done)
        assert titles(client) == TITLES
        # Over the wire, for remote clients: the passphrase is a form field.
        assert_error(upload(client, sealed.read_bytes()), 400, "wrong_passphrase")
        answer = upload(client, sealed.read_bytes(), passphrase="correct horse")
        assert answer.status_code == 200, answer.text
        assert answer.json()["sessions_unchanged"] == 3


def bad_archives() -> dict[str, tuple[bytes, int, str]]:
    members = zipfile.ZipFile(io.BytesIO(v2_zip(sample_payload())))
    good = {name: members.read(name) for name in members.namelist()}
    newer = json.loads(good["backup.manifest.json"])
    newer["version"] = 3
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("backup.manifest.json", good["backup.manifest.json"])
        z.writestr("sessions/zeros.jsonl", b"\0" * (64 * 1024 * 1024))
    zipped = v2_zip(sample_payload())
    return {
        "newer": (zip_members({**good, "backup.manifest.json": json.dumps(newer).encode()}),
                  400, "unsupported_import_version"),
        "traversal": (zip_members({**good, "../evil.json": b"{}"}), 400, "invalid_import"),
        "truncated": (zipped[: len(zipped) // 2], 400, "invalid_import"),
        "tampered": (zipped.replace(b"Why is the sky blue?", b"Why is the sky green"),
                     400, "invalid_import"),
        "bomb": (bomb.getvalue(), 413, "import_too_large"),
        "not a zip": (b"hello", 400, "invalid_import"),
    }  # fmt: skip


def test_bad_archives_are_refused_and_change_nothing(kernel: Served) -> None:
    with kernel.client() as client:
        upload(client, v2_zip(sample_payload())).raise_for_status()
        before = state(client)
        for name, (data, status, code) in bad_archives().items():
            answer = upload(client, data)
            body = assert_error(answer, status, code)
            assert body["message"], name
            assert state(client) == before, name
        assert_error(upload(client, b"x", source="word"), 400, "invalid_import_source")
        assert_error(upload(client, b"x", with_keys="maybe"), 400, "bad_request")
        no_file = client.post("/imports", data={"source": "chatbuddy"}, files={"x": ("a", b"")})
        assert_error(no_file, 400, "bad_request")
        metrics = client.get("/metrics").text
        assert 'foya_imports_total{outcome="failed",source="chatbuddy"}' in metrics
        assert 'foya_imports_total{outcome="imported",source="chatbuddy"} 1.0' in metrics


def test_the_upload_limit(launcher: Launcher, root: Path) -> None:
    small = unix_kernel(launcher, root, "limited", env=base_env(FOYA_MAX_IMPORT_MB="1"))
    with small.client() as client:
        answer = upload(client, b"\0" * (2 * 1024 * 1024))
        assert_error(answer, 413, "import_too_large")


def test_export_then_import_into_another_kernel(
    kernel: Served, launcher: Launcher, root: Path, tmp_path: Path
) -> None:
    other = unix_kernel(launcher, root, "other", env=base_env(HOME=str(tmp_path)))
    with kernel.client() as client:
        upload(client, v2_zip(sample_payload())).raise_for_status()
        sessions = client.get("/sessions").json()
        expected = {
            s["title"]: [
                {
                    k: v
                    for k, v in m.items()
                    if k not in ("event_seq", "attachments", "source_id", "diff")
                }
                for m in client.get(f"/sessions/{s['id']}/history").json()
            ]
            for s in sessions
        }
        one = sessions[0]["id"]
        zipped = client.get(f"/sessions/{one}/export")
        assert zipped.status_code == 200
        assert zipped.headers["content-type"] == "application/zip"
        assert f"foya-session-{one}.zip" in zipped.headers["content-disposition"]
        markdown = client.get(f"/sessions/{one}/export", params={"format": "markdown"})
        assert markdown.headers["content-type"].startswith("text/markdown")
        assert markdown.text.startswith(f"# {sessions[0]['title']}\n")
        assert_error(client.get("/sessions/nope/export"), 404, "not_found")
        assert_error(client.get("/export", params={"session": "nope"}), 404, "not_found")
    dest = tmp_path / "all.zip"
    done = foya(kernel, "export", str(dest))
    assert done.returncode == 0, explain(done)
    assert dest.stat().st_mode & 0o777 == 0o600
    moved = foya(other, "import", "foya", str(dest))
    assert moved.returncode == 0, explain(moved)
    assert "sessions: 3 new" in moved.stdout
    with other.client() as client:
        got = {
            s["title"]: [
                {
                    k: v
                    for k, v in m.items()
                    if k not in ("event_seq", "attachments", "source_id", "diff")
                }
                for m in client.get(f"/sessions/{s['id']}/history").json()
            ]
            for s in client.get("/sessions").json()
        }
        assert got == expected
        before = state(client)
        assert foya(other, "import", "foya", str(dest)).returncode == 0
        assert state(client) == before
    md = tmp_path / "one.md"
    done = foya(kernel, "export", str(md), "--session", one, "--markdown")
    assert done.returncode == 0, explain(done)
    assert md.read_text().startswith("# ")


@pytest.mark.parametrize("source", ["claude-code", "codex", "opencode"])
def test_agent_cli_transcripts(kernel: Served, tmp_path: Path, source: str) -> None:
    if source == "claude-code":
        path = write_claude_tree(tmp_path / "projects")
    elif source == "codex":
        path = write_codex_tree(tmp_path / "codex")
    else:
        path = write_opencode_tree(tmp_path / "opencode")
    done = foya(kernel, "import", source, str(path))
    assert done.returncode == 0, explain(done)
    assert "sessions: 1 new" in done.stdout
    assert "skipped:" in done.stdout  # the fixtures hold records nobody imports
    with kernel.client() as client:
        (session,) = client.get("/sessions").json()
        messages = client.get(f"/sessions/{session['id']}/history").json()
        assert {"user", "assistant", "tool"} <= {m["role"] for m in messages}
        fork = client.post(f"/sessions/{session['id']}/fork", json={})
        assert fork.status_code in (200, 201), fork.text
    again = foya(kernel, "import", source, str(path))
    assert "sessions: 0 new, 0 updated, 1 unchanged" in again.stdout


def test_a_kill_during_an_import_loses_nothing_and_stores_nothing(
    launcher: Launcher, root: Path, tmp_path: Path
) -> None:
    env = base_env(HOME=str(tmp_path), FOYA_FAILPOINT="import_before_commit")
    dying = unix_kernel(launcher, root, "dying", env=env)
    with dying.client() as client, pytest.raises(httpx.TransportError):
        upload(client, v2_zip(sample_payload()))
    dying.kernel.wait_exit()
    report = check(dying.data_dir / "foya.db")
    assert report.clean, report.differences
    again = unix_kernel(launcher, root, "dying", env=base_env(HOME=str(tmp_path)))
    with again.client() as client:
        assert client.get("/sessions").json() == []
        assert client.get("/rules", params={"scope": "global"}).json() == []
        upload(client, v2_zip(sample_payload())).raise_for_status()
        assert titles(client) == TITLES
