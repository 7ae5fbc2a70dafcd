"""The `foya` command's helpers and usage rules: help (`-h` everywhere, plain, naming each
flag's environment variable), `--version`, lazy start-up imports, positional arguments,
`foya token`, `foya tls self-signed` (whose output must work for serving) and the deprecated
names of their flags.

The commands run in the test's process (`support.cli_inprocess`); the kernels that serve their
token and certificate are real `foya serve` processes. What only a process shows keeps one:
`python -m app --help`, the `foya` console script's `serve --help`, and the imports each quick
command loads at start-up (`-X importtime`)."""

from __future__ import annotations

import hashlib
import ipaddress
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from support.cli_inprocess import run_cli
from support.helpers import REPO, Launcher, TlsFiles, base_env, run_foya

from app import __version__


def test_python_m_app_help() -> None:
    result = run_foya("--help")  # `python -m app`, in a process of its own
    assert result.returncode == 0, result.stderr
    for command in ("serve", "token", "tls"):
        assert command in result.stdout


def test_console_script_serve_help_lists_every_flag() -> None:
    script = Path(sys.executable).parent / "foya"
    if not script.exists():
        pytest.skip("the foya console script is not installed in this environment")
    result = subprocess.run(
        [str(script), "serve", "--help"], cwd=REPO, env=base_env(), capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for flag in (
        "--listen",
        "--socket",
        "--data-dir",
        "--auth-token-hash-file",
        "--tls-cert",
        "--tls-key",
        "--allow-plaintext",
    ):
        assert flag in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("serve", "--allow-plaintext", "extra"),
        ("no-such-command",),
        ("serve", "--auth-token-sha256", "ab" * 32),  # the digest is an env var only
    ],
    ids=["serve_positional", "bare_positional", "no_digest_flag"],
)
def test_usage_errors(args: tuple[str, ...], tmp_path: Path) -> None:
    result = run_cli(*args, env=base_env(FOYA_DATA_DIR=str(tmp_path / "data")))
    assert result.returncode != 0
    assert result.stderr.strip()
    assert not (tmp_path / "data").exists()  # refused before doing anything


# --------------------------------------------------------------------------- foya token


def read_token(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout  # printed exactly once, and nothing else
    return lines[0]


def test_token_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    hash_file = tmp_path / "token.sha256"
    first = read_token(run_cli("token", "--auth-token-hash-file", str(hash_file)))
    before = hash_file.read_bytes()

    refused = run_cli("token", "--auth-token-hash-file", str(hash_file))
    assert refused.returncode != 0
    assert refused.stdout == ""  # no token printed that would not work
    assert "--force" in refused.stderr
    assert hash_file.read_bytes() == before

    second = read_token(run_cli("token", "--auth-token-hash-file", str(hash_file), "--force"))
    assert second != first
    assert hash_file.read_text().strip() == hashlib.sha256(second.encode()).hexdigest()
    assert stat.S_IMODE(hash_file.stat().st_mode) == 0o600


def test_token_prints_once_and_stores_a_0600_digest_that_serves(
    spawn: Launcher, tmp_path: Path
) -> None:
    hash_file = tmp_path / "secrets" / "token.sha256"
    token = read_token(run_cli("token", "--auth-token-hash-file", str(hash_file)))
    assert len(token) >= 43
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
    assert stat.S_IMODE(hash_file.stat().st_mode) == 0o600
    assert hash_file.read_text().strip() == hashlib.sha256(token.encode()).hexdigest()

    kernel = spawn.tcp(
        [
            "--allow-plaintext",
            "--auth-token-hash-file",
            str(hash_file),
            "--data-dir",
            str(tmp_path / "data"),
        ]
    )
    with kernel.client(token) as authed, kernel.client() as anonymous:
        assert authed.get("/readyz").status_code == 200
        assert anonymous.get("/readyz").status_code == 401
    output = kernel.stdout() + kernel.stderr()
    assert token not in output


# --------------------------------------------------------------------------- foya tls self-signed


def printed_fingerprint(stdout: str) -> str:
    match = re.search(r"sha256 fingerprint: ([0-9A-F]{2}(?::[0-9A-F]{2}){31})\s*$", stdout)
    assert match, stdout
    return match.group(1)


def cert_fingerprint(cert_path: Path) -> str:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def test_tls_self_signed_pair_serves(spawn: Launcher, tmp_path: Path, token: str) -> None:
    cert, key = tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem"
    result = run_cli(
        "tls", "self-signed", "--host", "127.0.0.1", "--host", "localhost",
        "--tls-cert", str(cert), "--tls-key", str(key),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert printed_fingerprint(result.stdout) == cert_fingerprint(cert)

    parsed = x509.load_pem_x509_certificate(cert.read_bytes())
    san = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert "localhost" in san.get_values_for_type(x509.DNSName)

    kernel = spawn.tcp(
        ["--tls-cert", str(cert), "--tls-key", str(key), "--data-dir", str(tmp_path / "data")],
        tls=TlsFiles(cert, key, cert.read_bytes()),
        env=base_env(FOYA_AUTH_TOKEN_SHA256=hashlib.sha256(token.encode()).hexdigest()),
    )
    with kernel.client(token) as client:
        response = client.get("/readyz")
    assert response.status_code == 200


def test_tls_self_signed_defaults_to_data_dir_and_refuses_overwrite(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    args = ("tls", "self-signed", "--host", "localhost", "--data-dir", str(data_dir))
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    cert, key = data_dir / "tls" / "cert.pem", data_dir / "tls" / "key.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert printed_fingerprint(result.stdout) == cert_fingerprint(cert)
    before = cert.read_bytes(), key.read_bytes()

    refused = run_cli(*args)
    assert refused.returncode != 0
    assert "--force" in refused.stderr
    assert (cert.read_bytes(), key.read_bytes()) == before


# --------------------------------------------------------------------------- help and version

COMMANDS = [
    (),
    ("serve",),
    ("status",),
    ("exec",),
    ("sessions",),
    ("history",),
    ("rewind",),
    ("usage",),
    ("tunnel",),
    ("token",),
    ("check",),
    ("backup",),
    ("restore",),
    ("version",),
    ("tls",),
    ("tls", "self-signed"),
    ("rules",),
    ("rules", "list"),
    ("memory",),
    ("memory", "set"),
    ("skills",),
    ("skills", "edit-path"),
    ("import",),
    ("export",),
]
# Every flag that has an environment variable, and that variable.
ENV_VARS = {
    "--listen": "FOYA_LISTEN_ADDR",
    "--socket": "FOYA_SOCKET_PATH",
    "--data-dir": "FOYA_DATA_DIR",
    "--auth-token-hash-file": "FOYA_AUTH_TOKEN_HASH_FILE",
    "--tls-cert": "FOYA_TLS_CERT_FILE",
    "--tls-key": "FOYA_TLS_KEY_FILE",
    "--allow-plaintext": "FOYA_ALLOW_PLAINTEXT",
    "--token-file": "FOYA_TOKEN",
    "--passphrase": "FOYA_IMPORT_PASSPHRASE",
    "--replicate": "FOYA_REPLICA_URL",
}
TYPE_NOISE = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\]|[a-z]+ range)>")


def options_of(help_text: str) -> dict[str, str]:
    """Each option of a help text (by its long name) and its description, lines joined."""
    entries: dict[str, str] = {}
    current = ""
    for line in help_text.split("Options:", 1)[1].splitlines():
        if re.match(r"  -", line):
            current = re.findall(r"--[a-z-]+", line)[0]
            entries[current] = line
        elif line.startswith("   ") and current:
            entries[current] += " " + line.strip()
    return entries


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "foya")
def test_help_is_plain_text_that_names_each_environment_variable(
    command: tuple[str, ...],
) -> None:
    short = run_cli(*command, "-h", env=base_env(COLUMNS="80"))
    assert short.returncode == 0, short.stderr
    text = short.stdout
    assert text == run_cli(*command, "--help", env=base_env(COLUMNS="80")).stdout
    assert not TYPE_NOISE.search(text), text
    assert "…" not in text and "│" not in text, text  # nothing cut off, no boxes
    assert not re.search(r"\w-\n", text), text  # no word broken at a hyphen
    cut = [line for line in text.splitlines()[1:] if line.endswith("...")]
    assert not cut, text  # no command summary cut short
    assert all(len(line) <= 80 for line in text.splitlines()), text
    for flag, described in options_of(text).items():
        if flag in ENV_VARS:
            assert ENV_VARS[flag] in described, described


def test_serve_help_names_every_variable_and_hides_deprecated_names() -> None:
    serve = options_of(run_cli("serve", "-h").stdout)
    assert set(ENV_VARS) - {"--token-file", "--passphrase"} <= set(serve)
    token = run_cli("token", "-h").stdout
    assert "--auth-token-hash-file FILE" in token and "--hash-file" not in token.replace(
        "--auth-token-hash-file", ""
    )
    tls = run_cli("tls", "self-signed", "-h").stdout
    assert "--tls-cert FILE" in tls and "--cert " not in tls and "--key " not in tls
    tunnel = options_of(run_cli("tunnel", "-h").stdout)
    assert "on the remote host" in tunnel["--remote-token-hash-file"]


@pytest.mark.parametrize("args", [("--version",), ("version",)])
def test_version(args: tuple[str, ...]) -> None:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"foya {__version__}\n"


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("version",),
        ("status", "--socket", "/nonexistent/kernel.sock"),
        ("status", "--url", "https://127.0.0.1:9", "--token-file", "/dev/null"),
        ("sessions", "-h"),
    ],
    ids=["help", "version", "status", "status-url", "sessions-help"],
)
def test_quick_commands_import_nothing_heavy(args: tuple[str, ...]) -> None:
    """What keeps `--help`, `version` and `status` starting in <= 150 ms (bench.cli measures
    it): none of them loads pydantic (typer 0.29 did, for every option), pydantic-settings,
    httpx, rich or the server."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "app", *args], cwd=REPO, env=base_env(),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert imported, done.stderr
    heavy = {"pydantic", "pydantic_settings", "httpx", "rich", "fastapi", "hypercorn"}
    assert not imported & heavy, done.stderr


# --------------------------------------------------------------------------- renamed flags


def test_token_takes_the_digest_file_from_its_variable_and_its_old_flag(tmp_path: Path) -> None:
    by_env = tmp_path / "env.sha256"
    token = read_token(run_cli("token", env=base_env(FOYA_AUTH_TOKEN_HASH_FILE=str(by_env))))
    assert by_env.read_text().strip() == hashlib.sha256(token.encode()).hexdigest()

    old = tmp_path / "old.sha256"
    done = run_cli("token", "--hash-file", str(old))
    token = read_token(done)
    assert old.read_text().strip() == hashlib.sha256(token.encode()).hexdigest()
    assert "--hash-file is deprecated; use --auth-token-hash-file" in done.stderr

    both = run_cli("token", "--hash-file", str(tmp_path / "a"), "--auth-token-hash-file", "b")
    assert both.returncode == 2 and both.stdout == ""
    assert "give --auth-token-hash-file only" in both.stderr
    neither = run_cli("token")
    assert neither.returncode == 2 and neither.stdout == ""
    assert "--auth-token-hash-file FILE" in neither.stderr
    assert not (tmp_path / "a").exists() and not (REPO / "b").exists()


def test_tls_self_signed_takes_its_old_flags_and_the_serve_variables(tmp_path: Path) -> None:
    old = run_cli(
        "tls", "self-signed", "--host", "localhost",
        "--cert", str(tmp_path / "old.pem"), "--key", str(tmp_path / "old.key"),
    )  # fmt: skip
    assert old.returncode == 0, old.stderr
    assert printed_fingerprint(old.stdout) == cert_fingerprint(tmp_path / "old.pem")
    assert "--cert is deprecated; use --tls-cert" in old.stderr
    assert "--key is deprecated; use --tls-key" in old.stderr

    env = base_env(
        FOYA_TLS_CERT_FILE=str(tmp_path / "env.pem"), FOYA_TLS_KEY_FILE=str(tmp_path / "env.key")
    )
    by_env = run_cli("tls", "self-signed", "--host", "localhost", env=env)
    assert by_env.returncode == 0, by_env.stderr
    assert printed_fingerprint(by_env.stdout) == cert_fingerprint(tmp_path / "env.pem")
    assert stat.S_IMODE((tmp_path / "env.key").stat().st_mode) == 0o600
