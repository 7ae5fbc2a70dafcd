"""Fixtures: real kernels (stopped by PID at teardown), a session token, TLS files, short dirs.

Kernels that tests only query are shared through `fleet`, which starts each the first time a
test of its worker asks for it: a start costs about a second of CPU, and most workers need few.
Tests that stop, kill or refuse a kernel start their own through `spawn`.

A test that runs past the per-test limit (`timeout` in pyproject.toml) fails as a timeout, never
as whatever the code it interrupted made of the interruption.
"""

from __future__ import annotations

import secrets
import signal
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from support import dummy_capability
from support.helpers import (
    TOKEN_31,
    TOKEN_32,
    Fleet,
    Kernel,
    Launcher,
    TlsFiles,
    UnixSetup,
    base_env,
    free_port,
    sha256_hex,
    short_tmpdir,
    write_tls_pair,
)


class TimeLimitExceeded(BaseException):
    """A test ran past its time limit.

    A BaseException, so that neither an `except Exception` in the test nor Hypothesis takes it
    for the test's own failure: pytest-timeout's `Failed` is one Hypothesis catches, replays
    the case without the clock, and then reports as a flaky test, which hides the timeout."""


_TIMED_OUT = pytest.StashKey[float]()
_AGAIN = 10.0  # seconds between further TimeLimitExceeded once the limit has passed


def _timeout_message(limit: float) -> str:
    return f"Timeout: the test ran longer than its limit of {limit:g} s"


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """Arm pytest-timeout's signal method with `TimeLimitExceeded` in place of its `Failed`.

    Off the main thread (no SIGALRM there) or with the thread method, pytest-timeout's own
    timer runs; its cancel hook calls the `cancel_timeout` set here."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None
    limit = float(settings.timeout)

    def expire(signum: int, frame: FrameType | None) -> None:
        item.stash[_TIMED_OUT] = limit
        raise TimeLimitExceeded(_timeout_message(limit))

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    setattr(item, "cancel_timeout", cancel)  # noqa: B010 (pytest-timeout reads this name)
    signal.signal(signal.SIGALRM, expire)
    # Again every `_AGAIN` seconds: code that swallows the exception (Hypothesis turns one
    # raised while it draws data into an error of its own) does not keep the test running.
    signal.setitimer(signal.ITIMER_REAL, limit, _AGAIN)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The phase in which the limit passed fails as a timeout, whatever it raised or swallowed
    (the original report follows the timeout line)."""
    report = yield
    limit = item.stash.get(_TIMED_OUT, None)
    if limit is not None:
        del item.stash[_TIMED_OUT]
        if not (report.failed and call.excinfo and call.excinfo.errisinstance(TimeLimitExceeded)):
            report.outcome = "failed"
            report.longrepr = f"{_timeout_message(limit)}\n\n{report.longrepr or ''}".rstrip()
    return report


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
    """The shared, query-only kernels, each started on first use; all stopped by PID at the end."""
    base = tmp_path_factory.mktemp("fleet")
    padded = f"  \n\t{digest.upper()} \n\n"  # trimmed and lowercased by the kernel
    (base / "padded.sha256").write_text(padded)
    plain = ["--allow-plaintext"]
    with short_tmpdir() as unix_root:
        launch = Launcher(base / "procs")

        def env_only() -> Kernel:
            # TCP configured by variables only; the hash file holds a padded uppercase digest
            port = free_port()
            return launch(
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

        def unix_socket() -> Kernel:
            # Unix socket; its data dir and socket dir do not exist beforehand. Without --listen
            # the (garbage) digest is ignored; --socket overrides FOYA_SOCKET_PATH.
            sock = unix_root / "run" / "k.sock"
            return launch(
                ["serve", "--data-dir", str(unix_root / "data"), "--socket", str(sock)],
                uds=sock,
                env=base_env(
                    FOYA_AUTH_TOKEN_SHA256="not-a-digest",
                    FOYA_SOCKET_PATH=str(unix_root / "env.sock"),
                ),
                ready=False,
            )

        try:
            starters: dict[str, Callable[[], Kernel]] = {
                # plaintext TCP: --listen, --allow-plaintext, --data-dir; digest in the env var
                "tcp": lambda: launch.tcp(
                    [*plain, "--data-dir", str(base / "tcp")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=digest),
                    ready=False,
                ),
                # TLS through FOYA_TLS_CERT_FILE / FOYA_TLS_KEY_FILE; padded uppercase digest
                "tls": lambda: launch.tcp(
                    ["--data-dir", str(base / "tls")],
                    tls=tls_files,
                    env=base_env(
                        FOYA_AUTH_TOKEN_SHA256=padded,
                        FOYA_TLS_CERT_FILE=str(tls_files.cert),
                        FOYA_TLS_KEY_FILE=str(tls_files.key),
                    ),
                    ready=False,
                ),
                # a disk floor no file system meets: /readyz must answer 503
                "disk": lambda: launch.tcp(
                    [*plain, "--data-dir", str(base / "disk")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=digest, FOYA_MIN_FREE_DISK_MB=str(10**12)),
                    ready=False,
                ),
                # digests of a 31-char and a 32-char token: only the length rule tells them apart
                "token31": lambda: launch.tcp(
                    [*plain, "--data-dir", str(base / "t31")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN_31)),
                    ready=False,
                ),
                "token32": lambda: launch.tcp(
                    [*plain, "--data-dir", str(base / "t32")],
                    env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN_32)),
                    ready=False,
                ),
                "env_only": env_only,
                "unix": unix_socket,
            }
            yield Fleet(starters, unix_root, base / "env-data")
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


@pytest.fixture
def dummy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The dummy capability's router module, importable until the test ends (never imported
    here: whether a start imports it is what the tests ask)."""
    dummy_capability.write(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield dummy_capability.MODULE
    sys.modules.pop(dummy_capability.MODULE, None)
