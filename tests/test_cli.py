"""The `foya` command's helpers and usage rules: `--help`, positional arguments, `foya token`,
`foya tls self-signed` (whose output must work for serving)."""

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
from helpers import REPO, Launcher, TlsFiles, base_env, run_foya


def test_python_m_app_help() -> None:
    result = run_foya("--help")
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
    result = run_foya(*args, env=base_env(FOYA_DATA_DIR=str(tmp_path / "data")))
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
    first = read_token(run_foya("token", "--hash-file", str(hash_file)))
    before = hash_file.read_bytes()

    refused = run_foya("token", "--hash-file", str(hash_file))
    assert refused.returncode != 0
    assert refused.stdout == ""  # no token printed that would not work
    assert "--force" in refused.stderr
    assert hash_file.read_bytes() == before

    second = read_token(run_foya("token", "--hash-file", str(hash_file), "--force"))
    assert second != first
    assert hash_file.read_text().strip() == hashlib.sha256(second.encode()).hexdigest()
    assert stat.S_IMODE(hash_file.stat().st_mode) == 0o600


def test_token_prints_once_and_stores_a_0600_digest_that_serves(
    spawn: Launcher, tmp_path: Path
) -> None:
    hash_file = tmp_path / "secrets" / "token.sha256"
    token = read_token(run_foya("token", "--hash-file", str(hash_file)))
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
    result = run_foya(
        "tls", "self-signed", "--host", "127.0.0.1", "--host", "localhost",
        "--cert", str(cert), "--key", str(key),
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
    result = run_foya(*args)
    assert result.returncode == 0, result.stderr
    cert, key = data_dir / "tls" / "cert.pem", data_dir / "tls" / "key.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert printed_fingerprint(result.stdout) == cert_fingerprint(cert)
    before = cert.read_bytes(), key.read_bytes()

    refused = run_foya(*args)
    assert refused.returncode != 0
    assert "--force" in refused.stderr
    assert (cert.read_bytes(), key.read_bytes()) == before
