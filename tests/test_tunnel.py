"""`app.ops.tunnel` end to end: a real `sshd` on a loopback port (throwaway host and client
keys), this machine as the remote, the venv's `foya` as the remote kernel, a real `ssh -N -L` in
between.

Remote kernels are started detached by the tunnel itself, so they are no children of ours: each
is found through `<data-dir>/kernel.lock` (it holds the PID) and stopped by PID at teardown.
sshd accepts XDG_CONFIG_HOME from the client (`-o SetEnv=…`), so a kernel started in the
remote's default data dir lands in a temporary directory.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest
from support.helpers import (
    Kernel,
    Launcher,
    base_env,
    free_port,
    is_listening,
    run_foya,
    sha256_hex,
    wait_until,
)

from app.ops.tunnel.config import TunnelConfig
from app.ops.tunnel.local import CONFIG, FAILED, OK, Tunnel, stop_remote
from app.ops.tunnel.remote import sh_path

SSHD = Path("/usr/sbin/sshd")
REMOTE_FOYA = str(Path(sys.executable).parent / "foya")

pytestmark = pytest.mark.skipif(
    not SSHD.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None,
    reason="needs openssh-server and openssh-client (CI installs them)",
)


def keygen(path: Path) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path)], check=True
    )
    return path


@dataclass(frozen=True)
class Sshd:
    port: int
    options: tuple[str, ...]  # ssh client options that reach it with the authorized key
    stray_key: Path  # a key sshd does not accept
    cli_options: tuple[str, ...]  # `options` as `-o` options only (no -F, -p, -i)
    destination: str = field(default_factory=lambda: f"{getpass.getuser()}@127.0.0.1")


def gone(pid: int) -> bool:
    """The process no longer exists, or is a zombie: a detached kernel's parent is PID 1, which
    reaps when it sees fit (in some sandboxes, seconds later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def stop_pid(pid: int) -> None:
    """SIGTERM, then SIGKILL after 10 s; wait until the process is gone."""
    for sig, deadline in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        with contextlib.suppress(AssertionError):
            wait_until(lambda: gone(pid), f"pid {pid} to exit", deadline)
        if gone(pid):
            break
    assert gone(pid), f"pid {pid} survived SIGKILL"


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@dataclass
class Remote:
    """The 'remote' side of one test: a port, a data dir, the token and its digest file."""

    root: Path
    port: int = field(default_factory=free_port)
    token: str = "t" * 40

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def digest_file(self) -> Path:
        path = self.root / "auth-token.sha256"
        if not path.exists():
            path.write_text(sha256_hex(self.token) + "\n")
        return path

    def kernel_pid(self) -> int:
        return int((self.data_dir / "kernel.lock").read_text().strip())

    def config(self, sshd: Sshd, **overrides: object) -> TunnelConfig:
        config = TunnelConfig(
            destination=sshd.destination,
            token=self.token,
            remote_port=self.port,
            remote_foya=REMOTE_FOYA,
            remote_data_dir=str(self.data_dir),
            remote_token_hash_file=str(self.digest_file),
            ssh_options=sshd.options,
            ready_timeout=20,
        )
        return replace(config, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    remote = Remote(tmp_path / "remote")
    remote.root.mkdir()
    try:
        yield remote
    finally:  # the detached kernel the tunnel started, if any
        with contextlib.suppress(FileNotFoundError, ValueError):
            stop_pid(remote.kernel_pid())


@pytest.fixture(scope="module")
def booting(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[Remote, Kernel]]]:
    """Kernels we start ourselves on 'remote' ports, launched together without waiting: they
    boot while the first tests run. `shared` serves the tests that only use it; `doomed` is
    stopped by the restart test (and the kernel the tunnel starts then is stopped here)."""
    booted: dict[str, tuple[Remote, Kernel]] = {}
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    try:
        for name in ("shared", "doomed"):
            remote = Remote(tmp_path_factory.mktemp(name))
            kernel = launcher.tcp(
                ["--allow-plaintext", "--data-dir", str(remote.root / "own")],
                port=remote.port,
                env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(remote.token)),
                ready=False,
            )
            booted[name] = remote, kernel
        yield booted
    finally:
        launcher.close()
        for remote, _ in booted.values():
            with contextlib.suppress(FileNotFoundError):
                stop_pid(remote.kernel_pid())


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory, booting: object) -> Iterator[Sshd]:
    """sshd on a free loopback port as the current user, with a throwaway host key and one
    authorized client key. (Requesting `booting` starts those kernels before we wait for sshd.)"""
    base = tmp_path_factory.mktemp("sshd")
    host_key, client_key = keygen(base / "host_key"), keygen(base / "client_key")
    stray_key = keygen(base / "stray_key")
    (base / "authorized_keys").write_text((base / "client_key.pub").read_text())
    port = free_port()
    (base / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {base}/sshd.pid\n"
        f"AuthorizedKeysFile {base}/authorized_keys\nStrictModes no\nUsePAM no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nAllowTcpForwarding yes\nLogLevel ERROR\n"
        "AcceptEnv XDG_CONFIG_HOME\n"
    )
    known_hosts = base / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {(base / 'host_key.pub').read_text()}")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    with (base / "sshd.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(base / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        wait_until(lambda: is_listening(port) or proc.poll() is not None, "sshd", 10)
        assert proc.poll() is None, (base / "sshd.log").read_text()
        options = (
            *("-F", "/dev/null", "-p", str(port), "-i", str(client_key)),
            *("-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={known_hosts}"),
            *("-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes"),
        )
        cli_options = (  # the same, as `foya tunnel -o` options
            *("-o", f"Port={port}", "-o", f"IdentityFile={client_key}"),
            *options[6:],
        )
        yield Sshd(port, options, stray_key, cli_options)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def shared(booting: dict[str, tuple[Remote, Kernel]]) -> tuple[Remote, Kernel]:
    """The tunnel's own data dir for this kernel (`remote.data_dir`) must never come to exist."""
    booting["shared"][1].wait_ready()
    return booting["shared"]


@pytest.fixture
def doomed(booting: dict[str, tuple[Remote, Kernel]]) -> tuple[Remote, Kernel]:
    booting["doomed"][1].wait_ready()
    return booting["doomed"]


class Running:
    """A `Tunnel` running in a thread, its ready URLs and its `foya tunnel:` lines."""

    def __init__(self, config: TunnelConfig) -> None:
        self.ready: list[str] = []
        self.stderr = io.StringIO()
        self.stop = threading.Event()
        self.tunnel = Tunnel(config, on_ready=self.ready.append, stop=self.stop, stderr=self.stderr)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.code = self.tunnel.run()

    def wait_ready(self, count: int = 1) -> str:
        wait_until(
            lambda: len(self.ready) >= count or not self.thread.is_alive(),
            f"ready #{count}; messages: {self.stderr.getvalue()}",
        )
        assert len(self.ready) >= count, self.stderr.getvalue()
        return self.ready[-1]

    def wait_exit(self, timeout: float = 30) -> int:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), self.stderr.getvalue()
        assert self.code is not None
        return self.code

    def close(self) -> int:
        self.stop.set()
        return self.wait_exit()


@contextlib.contextmanager
def running(config: TunnelConfig) -> Iterator[Running]:
    run = Running(config)
    try:
        yield run
    finally:
        run.close()


def get(url: str, path: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url + path, headers=headers, timeout=10)


def test_starts_the_remote_kernel_and_reaches_it(sshd: Sshd, remote: Remote) -> None:
    with running(remote.config(sshd)) as run:
        url = run.wait_ready()
        assert url == f"http://127.0.0.1:{run.tunnel.local_port}"
        assert get(url, "/readyz", remote.token).json()["status"] == "ready"
        assert get(url, "/sessions", remote.token).status_code == 200
        assert get(url, "/readyz", None).status_code == 401
        page = get(url, "/ui/", None)  # the web client, without a token, through the tunnel
        assert page.status_code == 200 and "js/main.js" in page.text, page.text[:200]
        kernel = remote.kernel_pid()
        assert f"serve --listen 127.0.0.1:{remote.port}" in cmdline(kernel)
        assert "--allow-plaintext" in cmdline(kernel)
        ssh_pid = run.tunnel.ssh_pid
        assert ssh_pid is not None
        assert f"-L 127.0.0.1:{run.tunnel.local_port}:127.0.0.1:{remote.port}" in cmdline(ssh_pid)
        for pid in (ssh_pid, kernel):
            assert remote.token not in cmdline(pid)
        assert (remote.data_dir / "kernel.log").stat().st_size > 0  # output went to the log
    assert run.code == OK
    assert gone(ssh_pid)
    # The PID the start script saw is the kernel's own (setsid did not fork in between).
    assert f"started the kernel on 127.0.0.1:{remote.port} (pid {kernel}," in run.stderr.getvalue()
    assert remote.token not in run.stderr.getvalue()
    # The kernel outlives the tunnel and keeps serving on the remote's loopback.
    assert not gone(kernel)
    assert get(f"http://127.0.0.1:{remote.port}", "/readyz", remote.token).status_code == 200


def test_reuses_a_running_kernel(sshd: Sshd, shared: tuple[Remote, Kernel]) -> None:
    remote, kernel = shared
    with running(remote.config(sshd)) as run:
        url = run.wait_ready()
        assert get(url, "/sessions", remote.token).status_code == 200
    assert "kernel already running" in run.stderr.getvalue()
    assert not remote.data_dir.exists()  # no second kernel, not even its log
    assert kernel.proc.poll() is None
    assert int((remote.root / "own" / "kernel.lock").read_text()) == kernel.pid


def test_reconnects_after_ssh_is_killed(sshd: Sshd, shared: tuple[Remote, Kernel]) -> None:
    remote, kernel = shared
    with running(remote.config(sshd)) as run:
        url = run.wait_ready()
        first_ssh = run.tunnel.ssh_pid
        assert first_ssh is not None
        os.kill(first_ssh, signal.SIGKILL)
        assert run.wait_ready(2) == url  # same local port after the reconnection
        assert run.tunnel.ssh_pid not in (None, first_ssh)
        assert get(url, "/sessions", remote.token).status_code == 200
    messages = run.stderr.getvalue()
    assert "tunnel closed (ssh killed by signal 9" in messages
    assert messages.count("kernel already running") == 2  # checked again, not started twice
    assert not remote.data_dir.exists()
    assert kernel.proc.poll() is None


def test_wrong_token_fails_fast(sshd: Sshd, shared: tuple[Remote, Kernel]) -> None:
    remote, _ = shared
    wrong = "w" * 40
    run = Running(remote.config(sshd, token=wrong))
    assert run.wait_exit() == CONFIG
    assert run.ready == []
    assert "rejected the token (401)" in run.stderr.getvalue()
    assert wrong not in run.stderr.getvalue()
    assert run.tunnel.ssh_pid is None


SCRIPT = """
import json, os, sys
from app.ops.tunnel.config import TunnelConfig
from app.ops.tunnel.local import run
fields = json.loads(sys.argv[1])
fields["ssh_options"] = tuple(fields["ssh_options"])
config = TunnelConfig(token=os.environ["FOYA_TOKEN"], **fields)
sys.exit(run(config, on_ready=lambda url: print("ready:", url, flush=True)))
"""


def test_sigterm_stops_cleanly(sshd: Sshd, shared: tuple[Remote, Kernel]) -> None:
    """As the CLI runs it: in the main thread, stopped by SIGTERM (SIGINT takes the same
    handler), leaving no ssh behind although ssh runs in a session of its own."""
    remote, _ = shared
    config = remote.config(sshd)
    fields = {k: v for k, v in vars(config).items() if k != "token"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, json.dumps(fields)],
        env=base_env(FOYA_TOKEN=remote.token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ready: http://127.0.0.1:"), (
            proc.stderr.read() if proc.stderr else ""
        )
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1 and "ssh" in cmdline(int(children[0]))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == OK
        assert gone(int(children[0]))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_restarts_a_kernel_that_stopped(sshd: Sshd, doomed: tuple[Remote, Kernel]) -> None:
    remote, kernel = doomed
    with running(remote.config(sshd, health_interval=0.2)) as run:
        url = run.wait_ready()
        kernel.stop()
        run.wait_ready(2)
        restarted = remote.kernel_pid()  # started by the tunnel, in its data dir
        assert restarted != kernel.pid and not gone(restarted)
        assert get(url, "/readyz", remote.token).status_code == 200
    messages = run.stderr.getvalue().splitlines()
    assert "kernel already running" in messages[0]
    assert "the kernel stopped answering" in messages[1]
    assert "started the kernel" in messages[2]


def test_ssh_refusal_fails_fast(sshd: Sshd, remote: Remote) -> None:
    options = tuple(str(sshd.stray_key) if "client_key" in o else o for o in sshd.options)
    run = Running(remote.config(sshd, ssh_options=options))
    assert run.wait_exit() == FAILED
    assert "Permission denied" in run.stderr.getvalue()
    assert not remote.data_dir.exists()


def test_missing_remote_digest_fails_fast(sshd: Sshd, remote: Remote) -> None:
    config = remote.config(sshd, remote_token_hash_file=str(remote.root / "nope"))
    run = Running(config)
    assert run.wait_exit() == CONFIG
    assert "cannot read the token digest" in run.stderr.getvalue()
    assert not remote.data_dir.exists()


def test_kernel_that_cannot_start_fails_fast(sshd: Sshd, remote: Remote) -> None:
    (remote.root / "bad.sha256").write_text("not a digest\n")
    run = Running(remote.config(sshd, remote_token_hash_file=str(remote.root / "bad.sha256")))
    assert run.wait_exit() == CONFIG
    message = run.stderr.getvalue()
    assert "foya serve exited at once: foya: " in message, message
    assert "64 hex" in message, message


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ssh": "/nonexistent/ssh"}, "/nonexistent/ssh: command not found"),
        ({"token": "short"}, "at least 32 printable characters"),
        ({"destination": "-oProxyCommand=x"}, "bad ssh destination"),
    ],
)
def test_configuration_errors(overrides: dict[str, str], message: str) -> None:
    config = replace(TunnelConfig(destination="host", token="t" * 40), **overrides)  # type: ignore[arg-type]
    stderr = io.StringIO()
    assert Tunnel(config, on_ready=lambda _: None, stderr=stderr).run() == CONFIG
    assert message in stderr.getvalue()


def test_local_port_in_use() -> None:
    with contextlib.closing(socket.create_server(("127.0.0.1", 0))) as busy:
        port = busy.getsockname()[1]
        config = TunnelConfig(destination="host", token="t" * 40, local_port=port)
        stderr = io.StringIO()
        assert Tunnel(config, on_ready=lambda _: None, stderr=stderr).run() == CONFIG
    assert f"local port {port}" in stderr.getvalue()


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("~", "/home/u"),
        ("~/a b/'c'$(x)", "/home/u/a b/'c'$(x)"),
        ("/srv/~x/$HOME", "/srv/~x/$HOME"),
    ],
)
def test_remote_paths_are_quoted(path: str, expected: str) -> None:
    script = f"printf %s {sh_path(path)}"
    out = subprocess.run(
        ["sh", "-c", script], env={"HOME": "/home/u"}, capture_output=True, text=True, check=True
    )
    assert out.stdout == expected, shlex.quote(script)


def test_default_data_dir_holds_the_log_and_stop_stops_the_kernel(
    sshd: Sshd, remote: Remote
) -> None:
    """Without --remote-data-dir the kernel runs in the remote's default data dir
    (`$XDG_CONFIG_HOME/foya` there) and logs to `kernel.log` in it, as the docs say;
    `stop_remote` (`foya tunnel --stop`) then stops it, and the clean stop removes its lock."""
    xdg = remote.root / "xdg"
    options = (*sshd.options, "-o", f"SetEnv=XDG_CONFIG_HOME={xdg}")
    config = remote.config(sshd, remote_data_dir=None, ssh_options=options)
    data_dir = xdg / "foya"
    with running(config) as run:
        run.wait_ready()
    pid = int((data_dir / "kernel.lock").read_text())
    try:
        assert f"--data-dir {data_dir} " in cmdline(pid)
        assert (data_dir / "kernel.log").stat().st_size > 0
        assert f"log {data_dir}/kernel.log)" in run.stderr.getvalue()
        assert not remote.data_dir.exists()

        reports: list[str] = []
        stderr = io.StringIO()
        assert stop_remote(config, on_done=reports.append, stderr=stderr) == OK, stderr.getvalue()
        assert reports == [f"stopped the kernel on 127.0.0.1:{remote.port} (pid {pid})"]
        assert gone(pid)
        assert not (data_dir / "kernel.lock").exists()
        assert not is_listening(remote.port)

        assert stop_remote(config, on_done=reports.append, stderr=stderr) == OK
        assert reports[-1] == f"no kernel is running on {data_dir}"
    finally:
        if not gone(pid):
            stop_pid(pid)


def test_foya_tunnel_stop_on_the_command_line(sshd: Sshd, remote: Remote) -> None:
    with running(remote.config(sshd)) as run:
        run.wait_ready()
    pid = remote.kernel_pid()
    args = [
        "tunnel", "--stop", sshd.destination, "--remote-port", str(remote.port),
        "--remote-data-dir", str(remote.data_dir), *sshd.cli_options,
    ]  # fmt: skip
    done = run_foya(*args, timeout=60)  # no token needed to stop
    assert done.returncode == OK, done.stderr
    assert done.stdout == f"stopped the kernel on 127.0.0.1:{remote.port} (pid {pid})\n"
    assert gone(pid)
    assert not (remote.data_dir / "kernel.lock").exists()


def test_stop_leaves_alone_a_process_that_is_no_tunnel_kernel(sshd: Sshd, remote: Remote) -> None:
    """A lock naming a live process that is not a kernel serving --remote-port (a reused PID,
    another kernel): refused, and that process keeps running."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        remote.data_dir.mkdir()
        (remote.data_dir / "kernel.lock").write_text(f"{other.pid}\n")
        stderr = io.StringIO()
        code = stop_remote(remote.config(sshd), on_done=lambda _: None, stderr=stderr)
        assert code == CONFIG
        assert f"pid {other.pid} (from {remote.data_dir}/kernel.lock) is not a kernel" in (
            stderr.getvalue()
        )
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
