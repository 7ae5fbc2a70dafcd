"""Secrets never on a command line, through real `foya` processes.

Any local user reads a process's arguments (`ps`, /proc/<pid>/cmdline). Every flag or argument
of `foya` that can carry a secret refuses a literal one (exit 2, one line naming the safe channel:
`-` for stdin, an environment variable, a file, a key) before anything starts: `serve
--replicate`, `restore --from-replica`, the client's `--url`, `import --passphrase`,
`web-search set-google API_KEY` and `set-searxng ENDPOINT`, `tunnel DESTINATION`. The safe forms
still work, and the kernel itself hands Litestream a 0600 config file, never the URL, so a
password given in FOYA_REPLICA_URL is on neither process's command line.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.chatbuddy_fixtures import encrypted, sample_payload, v2_zip
from support.helpers import FOYA, REPO, Launcher, base_env, run_foya, short_tmpdir, wait_until
from support.replica_servers import sftp_server
from support.streams_helpers import Served, unix_kernel

from app.ops.secretargs import mask_url, secret_in_url

PASSWORD = "hunter2-Zq8v"  # what must never show
TITLES = ["Reading a latency chart", "Review of retry helper", "Why the sky is blue"]


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    with short_tmpdir() as path:  # Unix socket paths stay short
        yield path


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path_factory.mktemp("secret-args"))
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture(scope="module")
def kernel(launcher: Launcher, root: Path) -> Served:
    home = root / "k-home"
    home.mkdir()
    return unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))


def foya(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """A short-lived `foya` command with `stdin` as its standard input."""
    return subprocess.run(
        [*FOYA, *args],
        cwd=REPO,
        env=base_env(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], flag: str, *instead: str) -> None:
    """Exit 2 with one line that names `flag` and each safe alternative, and no secret."""
    explain = f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    assert done.returncode == 2, explain
    line = done.stderr.strip()
    assert line.startswith(f"foya: {flag}: refused") and "\n" not in line, explain
    assert "/proc/PID/cmdline" in line, explain
    for alternative in instead:
        assert alternative in line, explain
    assert PASSWORD not in done.stderr + done.stdout and "Traceback" not in done.stderr


# ----------------------------------------------------------------------------- foya serve


@pytest.mark.parametrize(
    "url",
    [
        f"sftp://u:{PASSWORD}@127.0.0.1:1/x",
        f"s3://bucket/prefix?endpoint=http://127.0.0.1:1&secret-access-key={PASSWORD}",
        f"abs://account@container/p?sig={PASSWORD}",
    ],
    ids=["sftp-password", "s3-secret-parameter", "azure-signature"],
)
def test_serve_refuses_a_replica_secret_on_its_command_line(root: Path, url: str) -> None:
    data_dir, sock = root / f"refused-{len(url)}", root / f"refused-{len(url)}.sock"
    done = run_foya(
        "serve", "--data-dir", str(data_dir), "--socket", str(sock), "--replicate", url,
        env=base_env(HOME=str(root)), timeout=60,
    )  # fmt: skip
    refused(done, "--replicate", "FOYA_REPLICA_URL", "FOYA_REPLICA_SFTP_KEY", "AWS_")
    assert not sock.exists() and not data_dir.exists()  # it never began to serve


def test_serve_takes_a_replica_url_without_a_secret_from_the_flag(root: Path) -> None:
    """The rule refuses secrets, not the flag: a password-free sftp URL reaches the sftp
    checks (here: the missing host key)."""
    done = run_foya(
        "serve", "--data-dir", str(root / "plain"), "--socket", str(root / "plain.sock"),
        "--replicate", "sftp://u@127.0.0.1:1/x", env=base_env(HOME=str(root)), timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "FOYA_REPLICA_SFTP_HOST_KEY" in done.stderr, done.stderr
    assert "refused" not in done.stderr


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_a_replica_password_in_the_environment_is_on_no_command_line(
    launcher: Launcher, root: Path
) -> None:
    """FOYA_REPLICA_URL with a password, to a real sshd on loopback
    (tests/support/replica_servers.py; it takes the key): the kernel serves and replicates, and
    neither the kernel's nor Litestream's /proc/<pid>/cmdline holds the password; Litestream has
    it from its 0600 config file."""
    home = root / "env-home"
    home.mkdir()
    with sftp_server(root / "sshd") as server:
        replica = root / "backup-machine"
        url = f"sftp://{server.user}:{PASSWORD}@127.0.0.1:{server.port}{replica}"
        env = base_env(
            HOME=str(home),
            FOYA_REPLICA_URL=url,
            FOYA_REPLICA_SFTP_KEY=str(server.client_key),
            FOYA_REPLICA_SFTP_HOST_KEY=server.host_key,
        )
        served = unix_kernel(launcher, root, "env", env=env)
        pid = served.kernel.pid
        assert PASSWORD not in _cmdline(pid)
        lines = [_cmdline(child) for child in _children(pid)]
        assert any("litestream replicate -config" in line for line in lines), lines
        assert all(PASSWORD not in line for line in lines), lines
        wait_until(lambda: (replica / "db").is_dir(), "the first upload to the replica", 60)
        config = served.data_dir / "replica" / "litestream.yml"
        assert config.stat().st_mode & 0o777 == 0o600
        assert PASSWORD in config.read_text()  # it reached Litestream through the file
        started = [r for r in served.kernel.logs() if r.get("event") == "replicating"]
        assert started and PASSWORD not in started[0]["replica"], started
        assert started[0]["replica"] == url.replace(PASSWORD, "***")
        assert PASSWORD not in served.kernel.stdout() + served.kernel.stderr()
        served.kernel.stop()


# ---------------------------------------------------------------------------- foya restore


def test_restore_refuses_a_replica_password_and_reads_the_url_from_stdin(root: Path) -> None:
    target = root / "restored"
    done = foya(
        "restore", "--from-replica", f"sftp://u:{PASSWORD}@127.0.0.1:1/x",
        "--data-dir", str(target), HOME=str(root),
    )  # fmt: skip
    refused(done, "--from-replica", "--from-replica -", "FOYA_REPLICA_SFTP_KEY")
    assert not target.exists()
    # `-`: the URL comes from stdin (here an empty file replica, which Litestream then reports).
    empty = root / "no-replica"
    done = foya(
        "restore", "--from-replica", "-", "--data-dir", str(target),
        stdin=f"file://{empty}\n", HOME=str(root),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"the replica holds no backup at file://{empty}/db" in done.stderr, done.stderr
    assert not target.exists()
    nothing = foya("restore", "--from-replica", "-", "--data-dir", str(target), HOME=str(root))
    assert nothing.returncode == 2 and "--from-replica -: nothing on stdin" in nothing.stderr


# ------------------------------------------------------------------------ the client flags


@pytest.mark.parametrize(
    "url",
    [f"https://me:{PASSWORD}@127.0.0.1:1", f"http://127.0.0.1:1/?access_token={PASSWORD}"],
    ids=["password", "token-parameter"],
)
@pytest.mark.parametrize(
    "command", [("status",), ("sessions",), ("exec", "hi"), ("mcp", "list")], ids=" ".join
)
def test_client_url_refuses_credentials(url: str, command: tuple[str, ...]) -> None:
    done = foya(*command, "--url", url)
    refused(done, "--url", "--token-file", "FOYA_TOKEN")


def test_tunnel_destination_refuses_a_password() -> None:
    done = foya("tunnel", f"ssh://me:{PASSWORD}@127.0.0.1", FOYA_TOKEN="t" * 40)
    refused(done, "DESTINATION", "key")


def test_import_refuses_a_literal_passphrase_and_takes_it_on_stdin(
    kernel: Served, root: Path
) -> None:
    sealed = root / "chatbuddy-backup.enc.zip"
    sealed.write_bytes(encrypted(v2_zip(sample_payload()), PASSWORD))
    sock = str(kernel.kernel.uds)
    with kernel.client() as client:
        done = foya("import", "chatbuddy", str(sealed), "--passphrase", PASSWORD, "--socket", sock)
        refused(done, "--passphrase", "--passphrase -", "FOYA_IMPORT_PASSPHRASE")
        assert client.get("/sessions").json() == []
        done = foya(
            "import", "chatbuddy", str(sealed), "--passphrase", "-", "--socket", sock, "--json",
            stdin=PASSWORD + "\n",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr + kernel.kernel.describe()
        assert json.loads(done.stdout)["sessions_created"] == 3
        assert sorted(s["title"] for s in client.get("/sessions").json()) == TITLES


def test_web_search_refuses_a_literal_api_key_and_takes_it_on_stdin(kernel: Served) -> None:
    sock = str(kernel.kernel.uds)
    with kernel.client() as client:
        before = client.get("/web-search").json()
        done = foya("web-search", "set-google", "g", "cx-1", PASSWORD, "--socket", sock)
        refused(done, "API_KEY", "`-`", "stdin")
        assert client.get("/web-search").json() == before
        done = foya(
            "web-search", "set-google", "g", "cx-1", "-", "--socket", sock, stdin=PASSWORD + "\n"
        )
        assert done.returncode == 0, done.stderr
        stored = client.get("/web-search").json()
        assert stored["default_provider"] == "g" and stored["providers"][0]["has_api_key"]
        assert PASSWORD not in json.dumps(stored) + done.stdout


def test_web_search_endpoint_refuses_credentials_and_takes_a_url_on_stdin(
    kernel: Served,
) -> None:
    sock = str(kernel.kernel.uds)
    with kernel.client() as client:
        before = client.get("/web-search").json()
        for url in (f"https://me:{PASSWORD}@127.0.0.1:1", f"https://127.0.0.1:1/?token={PASSWORD}"):
            done = foya("web-search", "set-searxng", "s", url, "--socket", sock)
            refused(done, "ENDPOINT", "`-`", "stdin")
        assert client.get("/web-search").json() == before
        done = foya(
            "web-search", "set-searxng", "s", "-", "--socket", sock,
            stdin="https://search.example.net\n",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        stored = client.get("/web-search").json()
        assert stored["providers"][0]["endpoint"] == "https://search.example.net"


# ---------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"sftp://u:{PASSWORD}@h:22/p", "sftp://u:***@h:22/p"),
        (f"s3://b/p?region=x&X-Amz-Signature={PASSWORD}", "s3://b/p?region=x&X-Amz-Signature=***"),
        (f"https://[::1/x:{PASSWORD}@", None),  # unparsable, but no userinfo before the path
        (f"https://u:{PASSWORD}@[::1/x", "https://***@[::1/x"),
        ("s3://b/p?endpoint=http://h:9&host-key=ssh-ed25519", None),
        ("file:///srv/replica", None),
    ],
)
def test_secrets_in_urls_are_found_and_masked(url: str, masked: str | None) -> None:
    assert (secret_in_url(url) is not None) == (masked is not None)
    assert mask_url(url) == (masked or url)


def test_every_secret_flag_takes_a_file_or_only_stdin() -> None:
    """Audit: each flag or argument of every command that is named for a secret (token, key,
    password, passphrase, secret) names a file, is a switch, or is one of those that take only
    `-` (stdin, tested above). A new one that takes a literal secret fails here."""
    import typer.main

    from app.cli import cli

    stdin_only = {("foya import", "passphrase"), ("foya web-search set-google", "api_key")}
    words = ("token", "key", "pass", "secret")

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        for param in command.params:
            yield path, param
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, f"{path} {name}")

    found = list(walk(typer.main.get_command(cli), "foya"))
    assert len(found) > 100  # the walk reached every command
    named = [(path, p) for path, p in found if any(w in (p.name or "") for w in words)]
    literal = [
        (path, p.name)
        for path, p in named
        if p.type_descriptor.annotation not in (Path, bool)
        and not (p.name or "").endswith("_file")
        and (path, p.name) not in stdin_only
    ]
    assert literal == [], literal
    assert stdin_only <= {(path, p.name) for path, p in named}
