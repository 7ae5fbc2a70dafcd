"""The thin REST clients: `foya status`, `sessions`, `history`, `rewind` and `usage`, against a
real `foya serve`. The commands run in the test's process (`support.cli_inprocess`); the rewind
that asks on a terminal runs as a process of its own, its stdin a pseudo-terminal.

The module's kernel serves a Unix socket with a connection to the fake provider, which plays
the agent's turns (a `write` tool call, then an answer). The session fleet's TCP kernels serve
the `--url` cases: `tls` (self-signed certificate, a token) and `disk` (a free-disk floor no
file system meets, so `/readyz` answers 503).
"""

from __future__ import annotations

import http.server
import json
import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_inprocess import run_cli
from support.fake_provider import Agent, Session, agent_kernel
from support.files_helpers import turn, write
from support.helpers import (
    FOYA,
    REPO,
    Fleet,
    Kernel,
    TlsFiles,
    base_env,
    free_port,
    threaded_server,
    wait_until,
)

from app.ops.rest import default_socket
from app.settings import Settings


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("clients")) as agent:
        yield agent


def sock(agent: Agent) -> str:
    assert agent.served.kernel.uds is not None
    return str(agent.served.kernel.uds)


def foya(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    """`foya <command> --socket <the module's kernel> <args>`, in process."""
    return run_cli(args[0], "--socket", sock(agent), *args[1:])


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"


def wrote_a_file(agent: Agent, message: str) -> Session:
    """A session with one turn in which the agent wrote `<message>.txt`."""
    s = agent.session("full_access")
    turn(s, write(f"{message}.txt", f"{message}\n"), message=message)
    return s


# --------------------------------------------------------------------------- where the kernel is


@pytest.mark.parametrize(
    ("env", "data_dir"),
    [({}, None), ({}, "flag"), ({"FOYA_DATA_DIR": "env"}, None), ({"FOYA_DATA_DIR": "env"}, "flag"),
     ({"FOYA_SOCKET_PATH": "s.sock"}, None), ({"FOYA_SOCKET_PATH": "s.sock"}, "flag")],
)  # fmt: skip
def test_default_socket_is_the_one_serve_uses(
    env: dict[str, str], data_dir: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clients find the socket without pydantic-settings, by the same rule."""
    for name in ("FOYA_DATA_DIR", "FOYA_SOCKET_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    flag = None if data_dir is None else tmp_path / data_dir
    settings = Settings() if flag is None else Settings(data_dir=flag)
    assert default_socket(flag) == settings.resolved_socket_path


# ------------------------------------------------------------------------------------ status


def test_status_on_the_unix_socket(agent: Agent) -> None:
    done = foya(agent, "status")
    assert done.returncode == 0, explain(done)
    lines = done.stdout.splitlines()
    assert lines[0] == f"ready: {sock(agent)}"
    assert {line.split(":")[0].split()[-1] for line in lines[1:]} >= {"database", "disk"}
    assert all(line.startswith("  ok  ") for line in lines[1:])

    raw = foya(agent, "status", "--json")
    assert raw.returncode == 0, explain(raw)
    assert json.loads(raw.stdout)["status"] == "ready"

    # the default socket: FOYA_SOCKET_PATH here, as `foya serve` would take it
    by_env = run_cli("status", env=base_env(FOYA_SOCKET_PATH=sock(agent)))
    assert by_env.returncode == 0, explain(by_env)


def test_status_of_a_kernel_that_is_not_ready_exits_1(fleet: Fleet, token: str) -> None:
    disk = fleet.ready("disk")
    done = run_cli("status", "--url", str(disk.url), env=base_env(FOYA_TOKEN=token))
    assert done.returncode == 1, explain(done)
    assert done.stdout.splitlines()[0] == f"not ready: {disk.url}"
    assert "  FAIL  disk: " in done.stdout
    raw = run_cli("status", "--url", str(disk.url), "--json", env=base_env(FOYA_TOKEN=token))
    assert raw.returncode == 1
    assert json.loads(raw.stdout)["code"] == "not_ready"


def test_status_of_no_kernel_exits_2(tmp_path: Path) -> None:
    gone = tmp_path / "nobody.sock"
    done = run_cli("status", "--socket", str(gone))
    assert done.returncode == 2, explain(done)
    assert done.stdout == ""
    assert done.stderr == (
        f"foya: cannot reach the kernel at {gone} (No such file or directory); "
        "is `foya serve` running?\n"
    )
    closed = run_cli("status", "--url", f"http://127.0.0.1:{free_port()}")
    assert closed.returncode == 2, explain(closed)
    assert "Connection refused" in closed.stderr


def test_status_over_tls_with_a_token_and_cacert(
    fleet: Fleet, token: str, tls_files: TlsFiles, tmp_path: Path
) -> None:
    kernel: Kernel = fleet.ready("tls")
    url = str(kernel.url)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    flags = ("--url", url, "--token-file", str(token_file))
    done = run_cli("status", *flags, "--cacert", str(tls_files.cert))
    assert done.returncode == 0, explain(done)
    assert done.stdout.startswith(f"ready: {url}\n")

    untrusted = run_cli("status", *flags)
    assert untrusted.returncode == 2, explain(untrusted)
    assert untrusted.stderr.rstrip().endswith("pass --cacert CERT (the server's certificate)")

    anonymous = run_cli("status", "--url", url, "--cacert", str(tls_files.cert))
    assert anonymous.returncode == 1, explain(anonymous)
    assert "the kernel answered 401 unauthorized: valid bearer token required" in (anonymous.stderr)
    assert "pass --token-file FILE (or set FOYA_TOKEN)" in anonymous.stderr

    listed = run_cli("sessions", *flags, "--cacert", str(tls_files.cert), "--json")
    assert listed.returncode == 0, explain(listed)
    assert isinstance(json.loads(listed.stdout), list)
    for run in (done, untrusted, anonymous, listed):
        assert token not in run.stdout + run.stderr


class _NotAKernel(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a 200 HTML page, as a web server on the wrong port would."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>hello</html>")

    def log_message(self, *args: object) -> None:
        pass


def test_status_of_something_that_is_not_a_kernel_exits_1() -> None:
    with threaded_server(_NotAKernel) as server:
        done = run_cli("status", "--url", f"http://127.0.0.1:{server.server_port}")
    assert done.returncode == 1, explain(done)
    assert "the kernel answered 200 http_error: not JSON: '<html>hello</html>'" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--url", "http://h:1", "--socket", "/s"), "give either --socket or --url, not both"),
        (("--token-file", "/t"), "--token-file and --cacert need --url"),
        (("--url", "ftp://h"), "--url: expected http(s)://host:port"),
        (("--url", "https://h:1", "--cacert", "/nonexistent.pem"), "--cacert: cannot read"),
    ],
)
def test_client_usage_errors(args: tuple[str, ...], message: str) -> None:
    done = run_cli("sessions", *args)
    assert done.returncode == 2, explain(done)
    assert message in done.stderr


# ------------------------------------------------------------------------- sessions, history


def test_sessions_lists_the_newest_first(agent: Agent) -> None:
    older = agent.session(title="older one")
    newer = agent.session(title="newer one")
    done = foya(agent, "sessions")
    assert done.returncode == 0, explain(done)
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "STATE", "MODEL", "TITLE"]
    rows = [line for line in lines if line.startswith((older.id, newer.id))]
    assert [r.split()[0] for r in rows] == [newer.id, older.id]
    assert rows[0].split()[-4:] == ["idle", newer.model, "newer", "one"]

    raw = foya(agent, "sessions", "--json")
    assert raw.returncode == 0, explain(raw)
    assert json.loads(raw.stdout) == agent.client.get("/sessions").json()


def test_history_shows_each_message_after_its_seq(agent: Agent) -> None:
    s = wrote_a_file(agent, "notes")
    messages = s.history()
    done = foya(agent, "history", s.id)
    assert done.returncode == 0, explain(done)
    user, tool = messages[0], next(m for m in messages if m["role"] == "tool")
    assert f"[{user['event_seq']}] user: notes\n" in done.stdout
    assert f"[{tool['event_seq']}] tool write: " in done.stdout
    assert done.stdout.rstrip().endswith("assistant: Done.")
    assert '-> write {"path": "notes.txt", "content": "notes\\n"}' in done.stdout

    raw = foya(agent, "history", s.id, "--json")
    assert json.loads(raw.stdout) == messages


def test_errors_of_the_kernel_print_its_code_and_message(agent: Agent) -> None:
    done = foya(agent, "history", "no-such-session")
    assert done.returncode == 1, explain(done)
    assert done.stdout == ""
    assert done.stderr == (
        "foya: the kernel answered 404 not_found: session no-such-session not found\n"
    )


# ------------------------------------------------------------------------------------ rewind


def test_rewind_previews_then_confirms_with_yes(agent: Agent) -> None:
    s = wrote_a_file(agent, "draft")
    seq = s.history()[0]["event_seq"]
    written = s.workspace / "draft.txt"

    unconfirmed = foya(agent, "rewind", s.id, str(seq))  # stdin is not a terminal
    assert unconfirmed.returncode == 1, explain(unconfirmed)
    assert unconfirmed.stdout.splitlines()[:4] == [
        f"rewind session {s.id} to before message [{seq}]:",
        "    > draft",
        "files the agent changed since (1):",
        f"  ready          +0 -1     {written}",  # the diff restoring it would apply
    ]
    assert unconfirmed.stderr == "foya: not rewound: pass --yes to confirm\n"
    assert written.exists() and len(s.history()) > 1  # nothing changed

    done = foya(agent, "rewind", s.id, str(seq), "--yes")
    assert done.returncode == 0, explain(done)
    assert f"rewound session {s.id} to before message [{seq}]\n" in done.stdout
    assert f"  restored       +0 -1     {written}" in done.stdout
    assert not written.exists()
    assert s.history() == []


def test_rewind_json_prints_the_preview_and_the_result(agent: Agent) -> None:
    s = wrote_a_file(agent, "again")
    seq = s.history()[0]["event_seq"]
    done = foya(agent, "rewind", s.id, str(seq), "-y", "--json")
    assert done.returncode == 0, explain(done)
    shown, result = (json.loads(line) for line in done.stdout.splitlines())
    assert shown["status"] == "confirmation_required" and shown["message"] == "again"
    assert result["status"] == "rewound"
    assert [f["action"] for f in result["files"]] == ["restored"]


def test_rewind_asks_on_a_terminal(agent: Agent, tmp_path: Path) -> None:
    """A process of its own: only a real stdin is a terminal (CliRunner's never is)."""
    s = wrote_a_file(agent, "asked")
    seq = s.history()[0]["event_seq"]
    master, slave = pty.openpty()
    err = tmp_path / "err"
    try:
        with err.open("w") as stderr:
            proc = subprocess.Popen(
                [*FOYA, "rewind", "--socket", sock(agent), s.id, str(seq)],
                cwd=REPO, env=base_env(), stdin=slave, stdout=subprocess.PIPE, stderr=stderr,
                text=True,
            )  # fmt: skip
            try:
                wait_until(lambda: "Rewind? [y/N]: " in err.read_text(), "the prompt")
                os.write(master, b"y\n")
                stdout, _ = proc.communicate(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, f"{stdout}\n{err.read_text()}"
    assert "rewound session" in stdout
    assert s.history() == []


def test_rewind_of_a_message_that_is_not_a_user_message(agent: Agent) -> None:
    s = wrote_a_file(agent, "not-that-one")
    tool = next(m for m in s.history() if m["role"] == "tool")
    done = foya(agent, "rewind", s.id, str(tool["event_seq"]), "--yes")
    assert done.returncode == 1, explain(done)
    assert "400 invalid_message_seq: message" in done.stderr
    assert (s.workspace / "not-that-one.txt").exists()


# ------------------------------------------------------------------------------------- usage


def test_usage_totals_and_models(agent: Agent) -> None:
    s = wrote_a_file(agent, "counted")
    done = foya(agent, "usage", "--days", "7")
    assert done.returncode == 0, explain(done)
    report = json.loads(foya(agent, "usage", "--days", "7", "--json").stdout)
    assert report["range_days"] == 7 and report["total_tokens"] > 0
    assert done.stdout.startswith(f"last 7 days: {report['total_tokens']:,} tokens (input ")
    assert any(line.startswith(f"{s.model} ") for line in done.stdout.splitlines())

    default = json.loads(foya(agent, "usage", "--json").stdout)
    assert default["range_days"] == 30

    refused = foya(agent, "usage", "--days", "14")
    assert refused.returncode == 1, explain(refused)
    assert "the kernel answered 400 invalid_range: " in refused.stderr
