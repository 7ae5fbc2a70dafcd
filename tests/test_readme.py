"""The recipes of the README and of docs/, as written: every code block is run, checked, or
excused with a reason.

Each block is named by the HTML comment before it (`<!-- test: NAME -->`), unique across the
documents (support.documents reads them), so a recipe is found by name wherever it moved; a
block without one fails `test_every_block_is_named_and_accounted_for`, and so does a name that
is neither in RUN, CHECKED nor NOT_RUN below. Shell blocks run in a sandbox the way a reader
pastes them into terminals: the blocks of one test go, in order, into one bash (variables,
functions and background jobs carry over), and a block that serves until Ctrl-C (`foya serve`,
`caddy run`) gets a terminal of its own, is waited for, and is stopped by its process group.

What differs in the sandbox, and nothing else of a block's text:
- HOME is a fresh short directory, without XDG_* or FOYA_* variables: `~`, `$HOME`, the default
  data directory and socket (`~/.config/foya`) and Caddy's `~/.local/share/caddy` are in it.
- `foya` is this venv's (its bin first on PATH, as in an activated venv); blocks run from the
  repository root, as in a clone.
- Ports 8787 (the kernel), 8443 (Caddy) and 11434 (the local model server, here the fake
  provider of tests/support/fake_provider.py) become free ports; `homeserver.lan` becomes
  `localhost` and `0.0.0.0` becomes `127.0.0.1` (no DNS here, and nothing listens beyond
  loopback). Caddy gets those ports through Caddyfile.local's FOYA_PORT and FOYA_UPSTREAM.
- Bash runs with `set -euo pipefail`: a failing command, a failed pipe or an unset variable fails
  the test where a reader's terminal would show the failure and go on.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from support.documents import Block, blocks, hand_written, unnamed_blocks
from support.fake_provider import FakeProvider, agent_kernel, answer, call, tools
from support.helpers import REPO, STOP_DEADLINE, free_ports, short_tmpdir, wait_until

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
VENV_BIN = Path(sys.executable).parent
WAIT = 60.0  # upper bound on any wait here, only to never hang
MODEL = "qwen3"  # the model of the README's connection

# Shell blocks the tests below run.
RUN = {
    "serve-unix",
    "unix-curl",
    "exec",
    "rewind",
    "token",
    "tls-self-signed",
    "serve-tls",
    "check-tls",
    "serve-plaintext",
    "caddy-local",
    "check-caddy-local",
    "prometheus-check",
    "backup",
    "restore",
}
# Other blocks, compared with shipped files or with what a real kernel answers.
CHECKED = {
    "event-example",
    "rewind-preview",
    "rewind-confirm-request",
    "rewind-confirm-response",
    "file-review",
    "file-review-request",
    "prometheus-config",
    "prometheus-rules",
}
NOT_RUN = {
    "channel-telegram": "needs a real bot token and Telegram's servers; "
    "tests/test_channels_e2e.py sends the same request to a kernel polling a fake Bot API",
    "install": "a fresh `pip install .` from the package index takes minutes; .ci/run installs "
    "the same package (editable, with the dev extras) and these tests run its `foya`",
    "dev-install": "it is what .ci/run runs: the test suite cannot run itself",
    "caddy-drop-in": "a drop-in for Debian's caddy.service needs a running systemd; "
    "tests/test_caddy.py runs the Caddyfile it configures",
    "systemd-install": "installs a system service as root (useradd, /opt, /etc, systemctl); "
    "tests/test_systemd.py verifies the unit and serves its ExecStart, and "
    "test_systemd_recipe_matches_the_unit its paths",
    "docker": "needs a Docker daemon (none on the test machines); tests/test_container.py runs "
    "the image's command on a read-only root, and test_docker_recipe_matches_compose its paths",
    "tunnel": "needs ssh to another machine; tests/test_tunnel.py runs `foya tunnel` against a "
    "real sshd on loopback",
    "tunnel-exec": "needs the tunnel above; tests/test_tunnel.py runs exec through one",
    "prometheus-install": "writes /etc/prometheus as root for the prometheus user; "
    "test_prometheus_scrapes_the_kernel_as_configured installs the same files in its sandbox",
    "import-export": "its paths are the reader's own files; tests/test_import_cli.py runs the "
    "same commands on fixtures of each format",
    "import-summary": "the summary of ChatBuddy's documented example backup: "
    "test_cli_imports_a_chatbuddy_backup_once compares it with what `foya import` prints",
    "replica-sftp-backup-host": "runs on another machine as root; "
    "tests/test_replica_transports.py serves SFTP with the same authorized_keys line",
    "replica-sftp-key": "writes /etc/foya as root; test_replica_transports runs the same "
    "Litestream options",
    "replica-env": "a root-only file for the systemd service; "
    "test_systemd_unit_reads_the_replica_env_file_and_takes_the_sftp_drop_in verifies the unit "
    "with it",
    "replica-drop-in": "a drop-in for the systemd service; "
    "test_systemd_unit_reads_the_replica_env_file_and_takes_the_sftp_drop_in verifies it",
    "replica-s3-env": "a root-only file for the systemd service; tests/test_replica_transports.py "
    "replicates to a local S3 server with the same variables",
    "replica-docker": "needs a Docker daemon (none on the test machines)",
    "replica-drill": "needs the systemd service and a replica machine; "
    "test_serve_replicates_to_sftp_and_restores_from_it runs foya restore --from-replica "
    "against a real sshd",
    "backup-systemd": "needs the systemd service and its foya user; the same commands run in "
    "test_backup_and_restore_recipes",
    "architecture-diagram": "a drawing; tests/test_docs.py checks that every path "
    "docs/architecture.md names exists",
}


# --------------------------------------------------------------------------------- blocks


def block(name: str) -> Block:
    return blocks()[name]


def test_every_block_is_named_and_accounted_for() -> None:
    for path in hand_written():
        unnamed, open_at_end = unnamed_blocks(path)
        where = path.relative_to(REPO)
        assert not open_at_end, f"a code block of {where} is not closed"
        assert not unnamed, (
            f"code blocks of {where} without a `<!-- test: NAME -->` line: {unnamed}"
        )
    found = blocks()
    assert len(RUN) + len(CHECKED) + len(NOT_RUN) == len(RUN | CHECKED | set(NOT_RUN))
    assert set(found) == RUN | CHECKED | set(NOT_RUN)
    assert all(found[name].lang == "sh" for name in RUN)


# -------------------------------------------------------------------------------- sandbox


class Terminal:
    """One bash that blocks are pasted into, in order. Its stdout carries only our markers;
    each block's output goes to a file (background jobs keep writing there)."""

    DONE = "::block done::"

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._send("set -euo pipefail")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def paste(self, script: Path, log: Path) -> str:
        """Run `script` as if pasted (its stdin is empty); its output, once it returned."""
        self._send(f"source {shlex.quote(str(script))} </dev/null >{shlex.quote(str(log))} 2>&1")
        self._send(f"echo '{self.DONE}'")
        end = time.monotonic() + WAIT
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{script.name} still runs after {WAIT} s") from None
            if line == self.DONE:
                return log.read_text()
            if line is None:
                status = self.proc.wait()
                raise AssertionError(f"{script.name} failed (exit {status}):\n{log.read_text()}")

    def close(self) -> None:
        stop_group(self.proc)


def stop_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM the process group `proc` leads (it and what it started), then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_DEADLINE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class Sandbox:
    """HOME, ports and terminals for one recipe; everything it started is stopped in close()."""

    def __init__(self, root: Path, provider_port: int | None = None) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.kernel_port, self.caddy_port = free_ports(2)
        self.replacements = {
            "8787": str(self.kernel_port),
            "8443": str(self.caddy_port),
            "homeserver.lan": "localhost",
            "0.0.0.0": "127.0.0.1",
        }
        if provider_port is not None:
            self.replacements["11434"] = str(provider_port)
        skipped = ("FOYA_", "XDG_", "CADDY_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(skipped)}
        self.env.pop("NOTIFY_SOCKET", None)
        self.env.update(HOME=str(self.home), PATH=f"{VENV_BIN}{os.pathsep}{self.env['PATH']}")
        self.env.update(PYTHONUNBUFFERED="1")
        self.terminal: Terminal | None = None
        self.servers: list[subprocess.Popen[bytes]] = []
        self.logs: dict[str, Path] = {}  # block name -> its output (background jobs' too)

    @property
    def socket(self) -> Path:
        return self.home / ".config" / "foya" / "kernel.sock"

    def substitute(self, text: str) -> str:
        for old, new in self.replacements.items():
            text = text.replace(old, new)
        return text

    def script(self, name: str) -> tuple[Path, Path]:
        """The block written out with the sandbox's substitutions, and a log file for it."""
        found = block(name)
        assert found.lang == "sh" and name in RUN, name
        path = self.root / f"{len(self.logs):02d}-{name}.sh"
        path.write_text(self.substitute(found.text))
        self.logs[name] = path.with_suffix(".log")
        return path, self.logs[name]

    def paste(self, name: str) -> str:
        if self.terminal is None:
            self.terminal = Terminal(self.env)
        return self.terminal.paste(*self.script(name))

    def start(
        self, name: str, ready: Callable[[], bool], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Run a block that serves until stopped, in its own terminal; return once `ready`."""
        path, log = self.script(name)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "-euo", "pipefail", str(path)],
                cwd=REPO,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.servers.append(proc)

        def up() -> bool:
            assert proc.poll() is None, f"{name} exited:\n{log.read_text()}"
            return ready()

        wait_until(up, f"{name} to serve", WAIT)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        stop_group(proc)
        self.servers.remove(proc)

    def close(self) -> None:
        if self.terminal is not None:
            self.terminal.close()
        for proc in reversed(self.servers):
            stop_group(proc)

    def unix_client(self) -> httpx.Client:
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket)), base_url="http://foya", timeout=10
        )

    def unix_ready(self) -> bool:
        if not self.socket.exists():
            return False
        with contextlib.suppress(httpx.TransportError), self.unix_client() as client:
            return client.get("/healthz").status_code == 200
        return False


def answers(url: str) -> bool:
    """GET `url` answers 200 (a readiness probe only: a certificate is not checked)."""
    with contextlib.suppress(httpx.TransportError):
        return httpx.get(url, verify=False, timeout=5).status_code == 200
    return False


def handshake(port: int, server_name: str) -> bool:
    """A TLS handshake with `server_name` on 127.0.0.1:`port` completes (nothing verified)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=server_name),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as provider:
        yield provider


@contextlib.contextmanager
def sandbox_for(provider: FakeProvider | None = None) -> Iterator[Sandbox]:
    port = urlsplit(provider.base_url).port if provider else None
    with short_tmpdir() as root:  # the socket path stays below 108 bytes
        box = Sandbox(root, port)
        try:
            yield box
        finally:
            box.close()


# ----------------------------------------------------------------- the kernel on a socket


def frames(output: str, kind: str) -> list[dict[str, Any]]:
    """The `data` of every SSE frame of `kind` in curl's output."""
    found = re.findall(rf"^event: {kind}\ndata: (.*)$", output, flags=re.M)
    return [json.loads(data) for data in found]


def shape(value: Any) -> Any:
    """Keys and JSON types, recursively (a list by its first item)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_unix_socket_recipes(fake: FakeProvider) -> None:
    """Set up's `foya serve`, then the curl recipe, the rewind recipe and `foya exec`."""
    fake.push(MODEL, answer("Here are the files."), answer("Still here."))
    with sandbox_for(fake) as box:
        box.start("serve-unix", box.unix_ready)
        output = box.paste("unix-curl")
        with box.unix_client() as client:
            (session,) = client.get("/sessions").json()
        # The turn's answer (the SSE frames the background curl writes may come around it).
        (accepted,) = re.findall(r'\{"run_id":"\w+","status":"\w+"\}', output)
        assert json.loads(accepted) == {"run_id": session["id"], "status": "started"}
        log = box.logs["unix-curl"]
        wait_until(lambda: "event: turn_complete" in log.read_text(), "the turn's events", WAIT)
        events = log.read_text()
        assert "Here are the files." in events
        # The README's example frame: same envelope and payload keys, and the run ids it says.
        (started,) = frames(events, "turn_started")
        (example,) = frames(block("event-example").text, "turn_started")
        assert shape(started) == shape(example)
        assert started["run_id"] == started["payload"]["run_id"] != session["id"]
        (complete,) = frames(events, "turn_complete")
        assert complete["payload"]["run_id"] == started["run_id"]

        def idle() -> bool:
            with box.unix_client() as client:
                return bool(client.get("/sessions").json()[0]["phase"] == "idle")

        wait_until(idle, "the session to be idle", WAIT)
        rewound = box.paste("rewind")
        assert '"status":"rewound"' in rewound, rewound
        with box.unix_client() as client:
            assert client.get(f"/sessions/{session['id']}/history").json() == []

        assert "Still here." in box.paste("exec")


def test_backup_and_restore_recipes() -> None:
    with sandbox_for() as box:
        kernel = box.start("serve-unix", box.unix_ready)
        with box.unix_client() as client:
            kept = client.post("/sessions", json={}).json()["id"]
        box.paste("backup")
        with box.unix_client() as client:
            client.post("/sessions", json={}).raise_for_status()  # after the backup: not kept
        box.stop(kernel)
        box.paste("restore")
        box.start("serve-unix", box.unix_ready)
        with box.unix_client() as client:
            assert [s["id"] for s in client.get("/sessions").json()] == [kept]


# ----------------------------------------------------------------- the home server recipes


@pytest.fixture(scope="module")
def tls_home() -> Iterator[Sandbox]:
    """The home server example on loopback: token, self-signed certificate, `foya serve`."""
    with sandbox_for() as box:
        box.paste("token")
        box.paste("tls-self-signed")
        box.start("serve-tls", lambda: answers(f"https://127.0.0.1:{box.kernel_port}/healthz"))
        yield box


def test_home_server_tls_recipe(tls_home: Sandbox) -> None:
    token = (tls_home.home / "foya-token.txt").read_text().strip()
    assert len(token) >= 32
    assert (tls_home.home / "foya-token.txt").stat().st_mode & 0o077 == 0
    output = tls_home.paste("check-tls")
    assert '"status":"ready"' in output, output


def test_caddy_local_recipe() -> None:
    assert shutil.which("caddy"), "caddy is missing: install the `caddy` package (.ci/run does)"
    with sandbox_for() as box:
        box.paste("token")
        box.start("serve-plaintext", lambda: answers(f"http://127.0.0.1:{box.kernel_port}/healthz"))
        caddy_env = {
            "FOYA_PORT": str(box.caddy_port),
            "FOYA_UPSTREAM": f"127.0.0.1:{box.kernel_port}",
        }
        box.start("caddy-local", lambda: handshake(box.caddy_port, "localhost"), env=caddy_env)
        output = box.paste("check-caddy-local")
        assert '"status":"ready"' in output, output


# ---------------------------------------------------------------------------- Prometheus


def promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: install the `prometheus` package (.ci/run does)"
    return found


def test_prometheus_blocks_are_the_shipped_files_and_promtool_accepts_them() -> None:
    assert block("prometheus-config").text == (PROMETHEUS_DIR / "prometheus.yml").read_text()
    assert block("prometheus-rules").text == (PROMETHEUS_DIR / "foya-rules.yml").read_text()
    promtool()
    with sandbox_for() as box:
        output = box.paste("prometheus-check")
    assert output.count("SUCCESS") == 3, output


class Prometheus:
    """A real Prometheus on loopback, queried through its HTTP API."""

    def __init__(self, config: Path, workdir: Path) -> None:
        binary = shutil.which("prometheus")
        assert binary, "prometheus is missing: install the `prometheus` package (.ci/run does)"
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def get(self, path: str, **params: str) -> Any:
        assert self.proc.poll() is None, f"prometheus exited:\n{self.log.read_text()}"
        response = httpx.get(f"{self.url}{path}", params=params, timeout=10)
        response.raise_for_status()
        return response.json()["data"]

    def values(self, query: str) -> dict[str, str]:
        """`query`'s instant vector: the `check` label (or "") → value."""
        return {
            r["metric"].get("check", ""): r["value"][1]
            for r in self.get("/api/v1/query", query=query)["result"]
        }

    def stop(self) -> None:
        stop_group(self.proc)


def test_prometheus_scrapes_the_kernel_as_configured(tls_home: Sandbox) -> None:
    """monitoring.md's scrape job and rules, installed as its install block says, in a sandbox
    (/etc/prometheus is a directory of the sandbox) and run by a real Prometheus against the
    home server example's kernel: the token, the pinned certificate and the alerts work."""
    etc = tls_home.root / "etc-prometheus"
    etc.mkdir()
    token_file = etc / "foya.token"
    shutil.copyfile(tls_home.home / "foya-token.txt", token_file)
    token_file.chmod(0o600)
    shutil.copyfile(tls_home.home / ".config" / "foya" / "tls" / "cert.pem", etc / "foya-ca.pem")
    (etc / "foya-rules.yml").write_text(block("prometheus-rules").text)
    job = tls_home.substitute(block("prometheus-config").text).replace(
        "/etc/prometheus/", f"{etc}/"
    )
    config = etc / "prometheus.yml"
    # The global intervals are the test's (the defaults are a minute); the rest is the recipe's.
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n" + job)
    checked = subprocess.run(
        [promtool(), "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    prometheus = Prometheus(config, tls_home.root)
    try:
        wait_until(lambda: answers(f"{prometheus.url}/-/ready"), "prometheus", WAIT)
        wait_until(lambda: prometheus.values('up{job="foya"}') == {"": "1"}, "a scrape", WAIT)
        ready = prometheus.values('foya_ready{job="foya"}')
        assert ready == {"database": "1", "data_dir": "1", "disk": "1"}, ready

        def firing() -> set[str]:
            alerts = prometheus.get("/api/v1/alerts")["alerts"]
            return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}

        # No backup yet: foya_backup_age_seconds is +Inf, and only that alert fires.
        wait_until(lambda: "FoyaBackupStale" in firing(), "FoyaBackupStale", WAIT)
        assert firing() == {"FoyaBackupStale"}
        rules = [r for g in prometheus.get("/api/v1/rules")["groups"] for r in g["rules"]]
        assert {r["name"]: r["health"] for r in rules} == {
            "FoyaDown": "ok",
            "FoyaNotReady": "ok",
            "FoyaBackupStale": "ok",
            "FoyaReplicationDown": "ok",
            "FoyaReplicationLagging": "ok",
        }
    finally:
        prometheus.stop()


# ------------------------------------------------------- rewind and file review by example


def example(name: str) -> Any:
    found = block(name)
    assert found.lang == "json", name
    return json.loads(found.text)


def request_like(sample: dict[str, Any], shown: dict[str, Any], real: dict[str, Any]) -> Any:
    """`sample` (a documented request) with each value it repeats from `shown` (the documented
    answer it follows) taken from `real` (the kernel's answer) instead: the documented names,
    live."""
    by_value = {json.dumps(value): key for key, value in shown.items()}
    return {
        key: real[by_value[json.dumps(value)]] if json.dumps(value) in by_value else value
        for key, value in sample.items()
    }


def test_rewind_and_file_review_examples_are_what_the_kernel_answers(tmp_path: Path) -> None:
    """using.md's example bodies, field for field, against a real kernel: a turn writes a
    file, is previewed and rewound with the documented request, then a second one is reviewed."""
    with agent_kernel(tmp_path) as agent:
        session = agent.session()
        client = session.client
        write = call("c1", "write", {"path": "notes.txt", "content": "one\n"})
        session.turn(tools(write), answer("Done."), message="add a notes file")
        seq = session.history()[0]["event_seq"]
        url = f"/sessions/{session.id}/turns/{seq}/rewind"

        preview = client.post(url, json={}).json()
        shown = example("rewind-preview")
        assert shape(preview) == shape(shown)
        assert preview["status"] == shown["status"] == "confirmation_required"
        assert preview["files"][0]["status"] == shown["files"][0]["status"] == "ready"
        confirm = request_like(example("rewind-confirm-request"), shown, preview)
        assert confirm["expected_head_seq"] == preview["head_seq"], "the example repeats head_seq"
        rewound = client.post(url, json=confirm)
        assert rewound.status_code == 200, rewound.text
        expected = example("rewind-confirm-response")
        assert shape(rewound.json()) == shape(expected)
        assert rewound.json()["files"][0]["action"] == expected["files"][0]["action"]

        write = call("c2", "write", {"path": "notes.txt", "content": "two\n"})
        session.turn(tools(write), answer("Done."))
        review = client.get(f"/sessions/{session.id}/file-review").json()
        shown = example("file-review")
        assert shape(review) == shape(shown)
        resolve = request_like(example("file-review-request"), shown, review)
        assert resolve["expected_through_seq"] == review["through_seq"]
        resolved = client.post(f"/sessions/{session.id}/file-review", json=resolve)
        assert (resolved.status_code, resolved.json()) == (200, {"status": "resolved"})
        assert not (session.workspace / "notes.txt").exists()  # undone


# ------------------------------------------------------------- recipes checked another way


def test_systemd_recipe_matches_the_unit() -> None:
    """The install block puts foya and the token digest where systemd/foya.service looks."""
    unit = (REPO / "systemd" / "foya.service").read_text()
    recipe = block("systemd-install").text
    (credential,) = re.findall(r"^LoadCredential=auth-token\.sha256:(\S+)$", unit, flags=re.M)
    (binary,) = re.findall(r"^ExecStart=(\S+) serve ", unit, flags=re.M)
    assert f"token --auth-token-hash-file {credential}" in recipe
    assert f"sudo python3 -m venv {Path(binary).parent.parent} " in recipe
    assert "systemd/foya.service /etc/systemd/system/" in recipe


def test_docker_recipe_matches_compose() -> None:
    """The digest goes where compose reads the secret from, owned by the image's user."""
    compose = (REPO / "deploy" / "compose.yaml").read_text()
    dockerfile = (REPO / "Dockerfile").read_text()
    recipe = block("docker").text
    (secret,) = re.findall(r"^\s+file: \./(secrets/\S+)$", compose, flags=re.M)
    assert f"> deploy/{secret}" in recipe
    (uid,) = set(re.findall(r"--uid (\d+)", dockerfile))
    assert f"chown {uid}:{uid} deploy/{secret}" in recipe
    assert "docker compose -f deploy/compose.yaml up" in recipe
