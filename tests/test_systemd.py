"""systemd/foya.service: `systemd-analyze verify` and `security`, and its ExecStart served for real.

These run where systemd is installed but is not PID 1 (a CI container): `verify` and
`security --offline=true` read the unit file alone. `verify` checks that the ExecStart binary
exists, so it runs on a copy pointing at this venv's `foya`; it does not look the
`User=` up, and it reports unknown or misspelt keys as warnings with exit status 0, so its output
must be empty too. The sandboxing options themselves need a running systemd and are not exercised
here; the command line, environment, credential and notify protocol are.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.helpers import REPO, STOP_DEADLINE, UNAUTHORIZED, free_port, sha256_hex, short_tmpdir

UNIT = REPO / "systemd" / "foya.service"
INSTALLED_FOYA = "/opt/foya/bin/foya"
VENV_FOYA = Path(sys.executable).parent / "foya"
STATE = "/var/lib/foya"
MAX_EXPOSURE = 2.0  # systemd-analyze security: 0 (locked down) to 10 (unprotected)


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    assert found, "systemd-analyze is missing: install the `systemd` package (.ci/run does)"
    return found


def read_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections → key → every value in order (keys repeat in units); continuations joined."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, f"{line!r} outside a section"
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    return read_unit(UNIT.read_text())["Service"]


def one(service: dict[str, list[str]], key: str) -> str:
    values = service.get(key, [])
    assert len(values) == 1, f"{key}: {values}"
    return values[0]


def unit_copy(directory: Path, text: str | None = None) -> Path:
    """The unit with ExecStart pointing at this venv's foya, under the same file name."""
    text = UNIT.read_text() if text is None else text
    assert INSTALLED_FOYA in text
    copy = directory / UNIT.name
    copy.write_text(text.replace(INSTALLED_FOYA, str(VENV_FOYA)))
    return copy


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [systemd_analyze(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_PAGER": ""},
    )


def about_the_unit(done: subprocess.CompletedProcess[str]) -> list[str]:
    """Lines of systemd-analyze output about our unit (not about units it depends on, which
    belong to the installed systemd)."""
    return [line for line in (done.stdout + done.stderr).splitlines() if UNIT.name in line]


def test_verify_is_clean(tmp_path: Path) -> None:
    assert VENV_FOYA.is_file() and os.access(VENV_FOYA, os.X_OK), VENV_FOYA
    done = analyze("verify", "--man=no", str(unit_copy(tmp_path)))
    assert done.returncode == 0 and not about_the_unit(done), done

    # The same check does catch a mistake: a misspelt key is only a warning, exit status 0.
    broken = unit_copy(tmp_path, UNIT.read_text().replace("UMask=", "UMsk="))
    done = analyze("verify", "--man=no", str(broken))
    assert done.returncode == 0 and "Unknown key 'UMsk'" in about_the_unit(done)[0], done


def test_security_exposure_is_low(tmp_path: Path) -> None:
    threshold = str(int(MAX_EXPOSURE * 10))  # --threshold counts tenths
    done = analyze(
        "security", "--offline=true", f"--threshold={threshold}", str(unit_copy(tmp_path))
    )
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert level, done
    assert done.returncode == 0 and float(level.group(1)) <= MAX_EXPOSURE, done.stdout


def test_unit_keeps_the_required_settings(service: dict[str, list[str]]) -> None:
    required = {
        "Type": "notify",
        "NotifyAccess": "main",
        "User": "foya",
        "Group": "foya",
        "StateDirectory": "foya",
        "UMask": "0077",
        "Restart": "on-failure",
        "TimeoutStopSec": "30s",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
    }
    assert {k: one(service, k) for k in required} == required
    # Writable: the state directory and the projects directory, nothing else.
    (paths,) = service["ReadWritePaths"]
    assert shlex.split(paths) == [STATE, "-/srv/foya"]
    # JIT compilers in the agent's tools need writable+executable memory.
    assert "MemoryDenyWriteExecute" not in service
    # The digest comes in as a credential, never as a readable file or environment variable.
    assert "FOYA_AUTH_TOKEN_SHA256" not in " ".join(service.get("Environment", []))


@contextlib.contextmanager
def notify_socket(directory: Path) -> Iterator[socket.socket]:
    """The datagram socket systemd hands a Type=notify service as NOTIFY_SOCKET."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(directory / "notify"))
    sock.settimeout(30)
    try:
        yield sock
    finally:
        sock.close()


def expect_notify(sock: socket.socket, state: str) -> None:
    seen: list[str] = []
    while state not in seen:
        seen += sock.recv(4096).decode().splitlines()


def test_execstart_serves_as_systemd_would_start_it(
    service: dict[str, list[str]], token: str
) -> None:
    """ExecStart and Environment= as systemd runs them: ${STATE_DIRECTORY} and
    ${CREDENTIALS_DIRECTORY} expanded, the LoadCredential= file in place (0400), UMask applied,
    READY=1 over NOTIFY_SOCKET; only the binary, the port and the state path are this test's."""
    name, _, source = one(service, "LoadCredential").partition(":")
    assert source.startswith("/etc/foya/"), source
    with short_tmpdir() as root:
        state, creds = root / "state", root / "credentials"
        state.mkdir(mode=0o700)
        creds.mkdir(mode=0o500)
        (creds / name).write_text(sha256_hex(token) + "\n")
        (creds / name).chmod(0o400)
        port = free_port()
        expand = {"STATE_DIRECTORY": str(state), "CREDENTIALS_DIRECTORY": str(creds)}

        def host(value: str) -> str:
            value = re.sub(r"\$\{(\w+)\}", lambda m: expand[m.group(1)], value)
            return value.replace(STATE, str(state)).replace("127.0.0.1:8787", f"127.0.0.1:{port}")

        argv = [host(a) for a in shlex.split(one(service, "ExecStart"))]
        assert argv[0] == INSTALLED_FOYA
        argv[0] = str(VENV_FOYA)
        env = {"PATH": os.environ["PATH"], **expand}
        for line in service.get("Environment", []):
            env.update(dict(host(item).split("=", 1) for item in shlex.split(line)))
        assert env["HOME"] == str(state), "HOME is the state directory, never under /home"
        log = root / "journal.log"
        with notify_socket(root) as notify, log.open("wb") as journal:
            env["NOTIFY_SOCKET"] = str(root / "notify")
            proc = subprocess.Popen(
                argv,
                cwd="/",
                env=env,
                umask=int(one(service, "UMask"), 8),
                stdin=subprocess.DEVNULL,
                stdout=journal,
                stderr=subprocess.STDOUT,
            )
            try:
                expect_notify(notify, "READY=1")
                url = f"http://127.0.0.1:{port}"
                unauthenticated = httpx.get(f"{url}/readyz", timeout=10)
                assert unauthenticated.status_code == 401
                assert unauthenticated.json() == UNAUTHORIZED
                auth = {"Authorization": f"Bearer {token}"}
                ready = httpx.get(f"{url}/readyz", headers=auth, timeout=10)
                assert ready.status_code == 200, ready.text
                os.kill(proc.pid, signal.SIGTERM)
                expect_notify(notify, "STOPPING=1")
                code = proc.wait(timeout=STOP_DEADLINE)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert code == 0, log.read_text()
        data = state / "data"
        assert (data / "foya.db").is_file(), sorted(p.name for p in state.iterdir())
        # UMask=0077: nothing the kernel created is readable by anyone else.
        for path in [data, *data.rglob("*")]:
            assert path.stat().st_mode & 0o077 == 0, f"{path}: {oct(path.stat().st_mode)}"
