"""A project that contains Foya's own data never exposes it.

The kernel runs with HOME set to a temporary home and its default data dir under it
(`$XDG_CONFIG_HOME/foya` = `~/.config/foya`), over TLS with a token digest file, and its key,
certificate and digest file also live in that home, beside a `~/.foya`. A project is opened at
HOME itself. Neither the workspace routes nor the file tools may read (or change) any of those,
directly, through `..` or through a symbolic link: the routes answer 400
`invalid_workspace_path` saying the path is protected, the tools a tool error, before any
approval is asked (the session is in manual mode). Ordinary files beside them stay readable.
`bash` cannot be policed this way and is not tested here.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.fake_provider import (
    API_KEY,
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    Session,
    call,
    connect,
    only,
    payloads,
)
from support.helpers import Kernel, Launcher, base_env, sha256_hex, short_tmpdir, write_tls_pair
from support.streams_helpers import Served, assert_error

from app.files import ProtectedPaths
from app.settings import Settings

PROTECTED = [
    ".config/foya/connections.json",
    ".config/foya/foya.db",
    ".foya/config.toml",
    "tls/key.pem",
    "tls/cert.pem",
    "token.sha256",
]


@dataclass
class Home:
    root: Path
    kernel: Kernel
    s: Session
    token_digest: str


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    with FakeProvider.running() as fake, short_tmpdir() as root:
        (root / ".foya").mkdir()
        (root / ".foya" / "config.toml").write_text(f"secret = '{secrets.token_hex(8)}'\n")
        tls = write_tls_pair(root / "tls")
        (root / "tls" / "readme.txt").write_text("not a secret\n")
        token = secrets.token_urlsafe(32)
        (root / "token.sha256").write_text(sha256_hex(token) + "\n")
        (root / "notes.txt").write_text("ordinary\n")
        env = base_env(HOME=str(root), XDG_CONFIG_HOME=str(root / ".config"))
        try:
            kernel = launcher.tcp(
                [
                    "--tls-cert",
                    str(tls.cert),
                    "--tls-key",
                    str(tls.key),
                    "--auth-token-hash-file",
                    str(root / "token.sha256"),
                ],
                tls=tls,
                env=env,
            )
            with kernel.client(token) as client:
                client.timeout = httpx.Timeout(READ_TIMEOUT)
                connection = connect(client, fake)["id"]
                data_dir = root / ".config" / "foya"
                assert API_KEY in (data_dir / "connections.json").read_text()
                project = client.post("/projects", json={"path": str(root)})
                assert project.status_code == 201, project.text
                agent = Agent(Served(kernel, data_dir), fake, client, connection)
                s = agent.session("manual", project_id=project.json()["id"])
                os.symlink(".config/foya", root / "data-link")
                os.symlink("tls/key.pem", root / "key-link")
                yield Home(root, kernel, s, sha256_hex(token))
        finally:
            launcher.close()


def file_get(h: Home, path: str, media: bool = False) -> httpx.Response:
    params = {"path": path, **({"media": "1"} if media else {})}
    return h.s.client.get(f"/sessions/{h.s.id}/workspace/file", params=params)


SNEAKY = [
    *PROTECTED,
    "notes/../.config/foya/connections.json",
    "tls/../.foya/config.toml",
    "data-link/connections.json",
    "key-link",
]


@pytest.mark.parametrize("path", SNEAKY)
@pytest.mark.parametrize("media", [False, True])
def test_the_workspace_routes_refuse_foya_data_and_secrets(
    home: Home, path: str, media: bool
) -> None:
    response = file_get(home, path, media)
    body = assert_error(response, 400, "invalid_workspace_path")
    assert "protected" in body["message"]
    assert API_KEY not in response.text and "PRIVATE KEY" not in response.text
    assert home.token_digest not in response.text


@pytest.mark.parametrize("path", [".config/foya", "data-link", ".foya", ".config/foya/artifacts"])
def test_listing_a_protected_directory_is_refused(home: Home, path: str) -> None:
    response = home.s.client.get(f"/sessions/{home.s.id}/workspace/entries", params={"path": path})
    assert_error(response, 400, "invalid_workspace_path")


def test_ordinary_files_beside_them_stay_readable_and_listed(home: Home) -> None:
    for path, text in (("notes.txt", "ordinary\n"), ("tls/readme.txt", "not a secret\n")):
        response = file_get(home, path)
        assert response.status_code == 200, response.text
        assert response.json() == text
    listed = home.s.client.get(f"/sessions/{home.s.id}/workspace/files")
    assert listed.status_code == 200, listed.text
    files = [e["path"] for e in listed.json()]
    assert "notes.txt" in files and "tls/readme.txt" in files
    assert not [f for f in files if f.startswith((".config/foya/", ".foya/"))], files
    assert not {"tls/key.pem", "tls/cert.pem", "token.sha256"} & set(files)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read", {"path": ".config/foya/connections.json"}),
        ("read", {"path": "data-link/connections.json"}),
        ("read", {"path": "key-link"}),
        ("read", {"path": "notes/../token.sha256"}),
        ("write", {"path": ".foya/config.toml", "content": "pwned\n"}),
        ("write", {"path": ".config/foya/new.json", "content": "{}\n"}),
        ("edit", {"path": "tls/cert.pem", "old_string": "-----", "new_string": "x"}),
        ("delete", {"path": ".config/foya/connections.json"}),
        ("delete", {"path": "tls/key.pem"}),
    ],
)
def test_file_tools_refuse_foya_data_and_secrets_without_asking(
    home: Home, tool: str, arguments: dict[str, str]
) -> None:
    """Manual mode asks before a write, never before a read inside the project: either way a
    protected path is refused before any approval request, and nothing on disk changes."""
    watched = [home.root / p for p in PROTECTED]
    before = {p: p.read_bytes() for p in watched}
    frames = home.s.tool_turn(call("p1", tool, arguments))
    end = only(frames, "tool_end")
    assert end["is_error"] is True and "protected" in end["output"], end
    assert payloads(frames, "approval_request") == []
    assert API_KEY not in end["output"] and "PRIVATE KEY" not in end["output"]
    assert {p: p.read_bytes() for p in watched} == before
    assert not (home.root / ".config" / "foya" / "new.json").exists()


def test_a_file_tool_still_reads_an_ordinary_project_file(home: Home) -> None:
    frames = home.s.tool_turn(call("r1", "read", {"path": "notes.txt"}))
    end = only(frames, "tool_end")
    assert end.get("is_error") is not True and end["output"] == "ordinary\n"


# ------------------------------------------------------------------------------ the rule itself


def test_settings_name_every_protected_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    settings = Settings(
        data_dir=tmp_path / "data",
        tls_key_file=tmp_path / "k.pem",
        tls_cert_file=tmp_path / "c.pem",
        auth_token_hash_file=tmp_path / "t.sha256",
    )
    assert set(settings.protected_paths) == {
        tmp_path / "data",
        tmp_path / "h" / ".foya",
        tmp_path / "k.pem",
        tmp_path / "c.pem",
        tmp_path / "t.sha256",
    }


def test_the_rule_resolves_links_and_spares_managed_workspaces(tmp_path: Path) -> None:
    real = tmp_path / "real-config"
    (real / "foya" / "workspaces" / "s1").mkdir(parents=True)
    os.symlink(real, tmp_path / "config")  # the data dir is named through a link
    data = tmp_path / "config" / "foya"
    rule = ProtectedPaths((data,), (data / "workspaces",))
    assert rule.covers(real / "foya")
    assert rule.covers(real / "foya" / "connections.json")
    assert rule.covers(real / "foya" / "workspaces-not")
    assert not rule.covers(real / "foya" / "workspaces" / "s1" / "a.txt")
    assert not rule.covers(real / "foyax" / "other.txt")
    assert not rule.covers(tmp_path)
