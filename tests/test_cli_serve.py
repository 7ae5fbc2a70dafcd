"""`foya serve --check` (the settings, TLS files, token digest and data dir checked, what would
be served printed, nothing served or written) and the life of `<data-dir>/kernel.lock`: held
while a kernel runs, removed by a clean stop, left by a crash without blocking the next start."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.helpers import (
    Launcher,
    TlsFiles,
    base_env,
    free_port,
    is_listening,
    run_foya,
    sha256_hex,
    write_tls_pair,
)


def tree(root: Path) -> list[str]:
    """Every path under `root` (the root included), sorted; [] when it does not exist."""
    return sorted(str(p) for p in [root, *root.rglob("*")] if p.exists()) if root.exists() else []


def checked(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_foya("serve", "--check", *args, env=env)


def refused(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    """One `foya:` line on stderr, exit 2, nothing on stdout; the line."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("foya: ")
    for needle in needles:
        assert needle in line, line
    return line


def test_check_describes_a_unix_socket_kernel_and_creates_nothing(short_dir: Path) -> None:
    data_dir, sock = short_dir / "data", short_dir / "run" / "k.sock"
    done = checked("--data-dir", str(data_dir), "--socket", str(sock))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "foya serve --check: the settings pass; `foya serve` would serve:",
        f"  listen:   Unix socket {sock} (mode 0600; no token)",
        "  token:    none: only this user can reach the socket",
        f"  data dir: {data_dir} (created at start)",
    ]
    assert tree(short_dir) == [str(short_dir)]  # no data dir, no socket, no lock


def test_check_describes_tls_with_a_digest_file(tmp_path: Path, tls_files: TlsFiles) -> None:
    digest_file = tmp_path / "auth.sha256"
    digest_file.write_text(sha256_hex("t" * 40) + "\n")
    digest_file.chmod(0o600)
    port = free_port()
    done = checked(
        "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"),
        "--auth-token-hash-file", str(digest_file),
        "--tls-cert", str(tls_files.cert), "--tls-key", str(tls_files.key),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == (
        f"  listen:   https://127.0.0.1:{port} (TLS: {tls_files.cert}, {tls_files.key})"
    )
    assert lines[2] == f"  token:    SHA-256 digest from {digest_file}"
    assert sha256_hex("t" * 40) not in done.stdout
    assert not is_listening(port)
    assert not (tmp_path / "data").exists()


def test_check_reads_the_settings_from_the_environment(tmp_path: Path) -> None:
    port = free_port()
    env = base_env(
        FOYA_LISTEN_ADDR=f"127.0.0.1:{port}",
        FOYA_ALLOW_PLAINTEXT="1",
        FOYA_AUTH_TOKEN_SHA256=sha256_hex("t" * 40),
        FOYA_DATA_DIR=str(tmp_path / "data"),
    )
    done = checked(env=env)
    assert done.returncode == 0, done.stderr
    assert f"  listen:   http://127.0.0.1:{port} (plaintext)" in done.stdout
    assert "  token:    SHA-256 digest from FOYA_AUTH_TOKEN_SHA256" in done.stdout


def test_check_refuses_a_data_dir_a_kernel_holds(short_dir: Path, spawn: Launcher) -> None:
    data_dir, sock = short_dir / "data", short_dir / "k.sock"
    kernel = spawn(["serve", "--data-dir", str(data_dir), "--socket", str(sock)], uds=sock)
    done = checked("--data-dir", str(data_dir), "--socket", str(short_dir / "other.sock"))
    refused(done, f"--data-dir {data_dir}: another foya kernel (pid {kernel.pid}) is using it")
    assert not (short_dir / "other.sock").exists()
    with kernel.client() as client:
        assert client.get("/readyz").status_code == 200  # its start-up probe did not disturb it


@pytest.mark.parametrize("case", ["mismatched-pair", "no-digest", "data-dir-is-a-file", "newer"])
def test_check_refusals_name_what_to_fix(case: str, tmp_path: Path, tls_files: TlsFiles) -> None:
    data_dir = tmp_path / "data"
    args = ["--data-dir", str(data_dir)]
    env = base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex("t" * 40))
    if case == "mismatched-pair":
        other = write_tls_pair(tmp_path / "other")
        listen = f"127.0.0.1:{free_port()}"
        args += ["--listen", listen, "--tls-cert", str(tls_files.cert), "--tls-key", str(other.key)]
        needles: tuple[str, ...] = ("--tls-cert", "--tls-key")
    elif case == "no-digest":
        args += ["--listen", f"127.0.0.1:{free_port()}", "--allow-plaintext"]
        env = base_env()
        needles = ("--auth-token-hash-file", "FOYA_AUTH_TOKEN_SHA256")
    elif case == "data-dir-is-a-file":
        data_dir.write_text("not a directory\n")
        needles = ("--data-dir", "not a directory")
    else:
        data_dir.mkdir()
        with sqlite3.connect(data_dir / "foya.db") as db:
            db.execute("PRAGMA user_version = 999")
        db.close()
        needles = ("schema is version 999", "upgrade Foya")
    before = {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    refused(checked(*args, env=env), *needles)
    assert {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")} == before


def test_check_reports_the_schema_of_an_existing_database(short_dir: Path, spawn: Launcher) -> None:
    data_dir, sock = short_dir / "data", short_dir / "k.sock"
    args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]
    assert spawn(args, uds=sock).stop(signal.SIGTERM) == 0
    before = tree(data_dir)
    done = checked("--data-dir", str(data_dir), "--socket", str(sock))
    assert done.returncode == 0, done.stderr
    assert f"  data dir: {data_dir} (foya.db schema version " in done.stdout
    assert tree(data_dir) == before  # not even -wal or -shm beside the database


def test_kernel_lock_goes_with_a_clean_stop_and_a_stale_one_blocks_nothing(
    short_dir: Path, spawn: Launcher
) -> None:
    data_dir, sock = short_dir / "data", short_dir / "k.sock"
    lock = data_dir / "kernel.lock"
    args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]

    first = spawn(args, uds=sock)
    assert lock.read_text() == f"{first.pid}\n"
    assert first.stop(signal.SIGTERM) == 0
    assert not lock.exists()  # a clean stop leaves no lock behind

    crashed = spawn(args, uds=sock)
    crashed.send(signal.SIGKILL)
    assert crashed.wait_exit() == -signal.SIGKILL
    assert lock.read_text() == f"{crashed.pid}\n"  # names the kernel that died holding it
    assert checked("--data-dir", str(data_dir), "--socket", str(sock)).returncode == 0

    second = spawn(args, uds=sock)  # nobody holds the stale lock: the start takes it
    assert lock.read_text() == f"{second.pid}\n"
    with second.client() as client:
        assert client.get("/readyz").status_code == 200
    assert second.stop(signal.SIGINT) == 0
    assert not lock.exists()
