"""Fixtures: real kernels (stopped by PID at teardown), a session token, TLS files, short dirs.

Kernels that tests only query are started together, once per session, by `fleet`: starting them
side by side instead of one after another keeps the suite fast. Tests that stop, kill or refuse a
kernel start their own through `spawn`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.helpers import (
    TOKEN_31,
    TOKEN_32,
    Fleet,
    Kernel,
    Launcher,
    TlsFiles,
    UnixSetup,
    base_env,
    free_ports,
    sha256_hex,
    short_tmpdir,
    write_tls_pair,
)


@pytest.fixture(scope="session", autouse=True)
def isolated_config_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep every kernel, in process or not, away from the real `<user config dir>/foya` and
    the real `~/.foya` (rules, memory and skills there would reach the model's requests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        yield


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Launcher]:
    """Start kernels for one test; every one is stopped when the test ends."""
    launcher = Launcher(tmp_path / "procs")
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory under /tmp for Unix socket paths (< 108 bytes)."""
    with short_tmpdir() as path:
        yield path


@pytest.fixture(scope="session")
def token() -> str:
    """The bearer token the shared TCP kernels accept (43 URL-safe characters)."""
    return secrets.token_urlsafe(32)


@pytest.fixture(scope="session")
def digest(token: str) -> str:
    return sha256_hex(token)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A certificate for 127.0.0.1/localhost from `app.ops.certs.self_signed`, written to files."""
    return write_tls_pair(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, digest: str, tls_files: TlsFiles
) -> Iterator[Fleet]:
    """Every shared, query-only kernel, started at once; all stopped by PID at session end."""
    base = tmp_path_factory.mktemp("fleet")
    padded = f"  \n\t{digest.upper()} \n\n"  # trimmed and lowercased by the kernel
    (base / "padded.sha256").write_text(padded)
    plain = ["--allow-plaintext"]
    ports = iter(free_ports(6))  # distinct, picked together
    with short_tmpdir() as unix_root:
        launch = Launcher(base / "procs")
        try:
            kernels = {
                # plaintext TCP: --listen, --allow-plaintext, --data-dir; digest in the env var
                "tcp": launch.tcp(
                    [*plain, "--data-dir", str(base / "tcp")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=digest),
                    port=next(ports),
                    ready=False,
                ),
                # TLS through FOYA_TLS_CERT_FILE / FOYA_TLS_KEY_FILE; padded uppercase digest
                "tls": launch.tcp(
                    ["--data-dir", str(base / "tls")],
                    tls=tls_files,
                    env=base_env(
                        FOYA_AUTH_TOKEN_SHA256=padded,
                        FOYA_TLS_CERT_FILE=str(tls_files.cert),
                        FOYA_TLS_KEY_FILE=str(tls_files.key),
                    ),
                    port=next(ports),
                    ready=False,
                ),
                # a disk floor no file system meets: /readyz must answer 503
                "disk": launch.tcp(
                    [*plain, "--data-dir", str(base / "disk")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=digest, FOYA_MIN_FREE_DISK_MB=str(10**12)),
                    port=next(ports),
                    ready=False,
                ),
                # digests of a 31-char and a 32-char token: only the length rule tells them apart
                "token31": launch.tcp(
                    [*plain, "--data-dir", str(base / "t31")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN_31)),
                    port=next(ports),
                    ready=False,
                ),
                "token32": launch.tcp(
                    [*plain, "--data-dir", str(base / "t32")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN_32)),
                    port=next(ports),
                    ready=False,
                ),
            }
            # TCP configured by variables only; the hash file holds a padded uppercase digest
            port = next(ports)
            kernels["env_only"] = launch(
                ["serve"],
                url=f"http://127.0.0.1:{port}",
                env=base_env(
                    FOYA_LISTEN_ADDR=f"127.0.0.1:{port}",
                    FOYA_DATA_DIR=str(base / "env-data"),
                    FOYA_AUTH_TOKEN_HASH_FILE=str(base / "padded.sha256"),
                    FOYA_ALLOW_PLAINTEXT="1",
                ),
                ready=False,
            )
            # Unix socket; its data dir and socket dir do not exist beforehand. Without --listen
            # the (garbage) digest is ignored; --socket overrides FOYA_SOCKET_PATH.
            sock = unix_root / "run" / "k.sock"
            kernels["unix"] = launch(
                ["serve", "--data-dir", str(unix_root / "data"), "--socket", str(sock)],
                uds=sock,
                env=base_env(
                    FOYA_AUTH_TOKEN_SHA256="not-a-digest",
                    FOYA_SOCKET_PATH=str(unix_root / "env.sock"),
                ),
                ready=False,
            )
            yield Fleet(kernels, unix_root, base / "env-data")
        finally:
            launch.close()


@pytest.fixture(scope="session")
def tcp_kernel(fleet: Fleet) -> Kernel:
    return fleet.ready("tcp")


@pytest.fixture(scope="session")
def tls_kernel(fleet: Fleet) -> Kernel:
    return fleet.ready("tls")


@pytest.fixture(scope="session")
def unix(fleet: Fleet) -> UnixSetup:
    root = fleet.unix_root
    return UnixSetup(
        fleet.ready("unix"), root, root / "data", root / "run" / "k.sock", root / "env.sock"
    )
