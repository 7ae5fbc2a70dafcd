"""`foya exec`: the real CLI against a real `foya serve` and a fake model API.

The command runs in process (support.cli_inprocess), except where only a process shows the
behaviour: Ctrl-C and a terminal on stdout.

The fake provider is a minimal OpenAI-compatible Chat Completions server (starlette on hypercorn,
in a thread, on 127.0.0.1). What it streams depends on the requested model:

- `text`: reasoning, then "Hello from the fake model." in chunks.
- `tool`: a `write` tool call first; once the request carries the tool result, "done: <result>".
- `fail`: HTTP 500.
- `slow`: one chunk every 50 ms for up to 20 s (for Ctrl-C).

Two kernels for the module: one on a Unix socket, one on TCP with TLS and a bearer token. Each
has a connection to the fake provider.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from support.cli_inprocess import run_cli
from support.helpers import (
    FOYA,
    REPO,
    Kernel,
    Launcher,
    TlsFiles,
    base_env,
    free_port,
    is_listening,
    sha256_hex,
    short_tmpdir,
    wait_until,
    write_tls_pair,
)

REPLY = "Hello from the fake model."
THOUGHT = "thinking about greetings"
TOKEN = "exec-test-token-" + "x" * 32
SESSION_LINE = re.compile(r"foya: session (\S+)")


# ----------------------------------------------------------------------------- fake provider


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


async def _text(parts: list[str], delay: float = 0.0) -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "content": ""})
    for part in parts:
        if delay:
            await asyncio.sleep(delay)
        yield _chunk({"content": part})
    yield _chunk({}, "stop")
    yield b"data: [DONE]\n\n"


async def _tool_call() -> AsyncIterator[bytes]:
    args = json.dumps({"path": "hello.txt", "content": "hi from exec\n"})
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "write"}}
    yield _chunk(
        {
            "role": "assistant",
            "tool_calls": [{**call, "function": {"name": "write", "arguments": ""}}],
        }
    )
    for part in (args[:10], args[10:]):
        yield _chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
    yield _chunk({}, "tool_calls")
    yield b"data: [DONE]\n\n"


async def _reasoned() -> AsyncIterator[bytes]:
    yield _chunk({"role": "assistant", "reasoning_content": THOUGHT})
    async for chunk in _text(["Hello", " from the", " fake model."]):
        yield chunk


class FakeProvider:
    """An OpenAI-compatible streaming server in a background thread."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.requests: list[dict[str, Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(app),), daemon=True)
        self._thread.start()
        wait_until(lambda: is_listening(self.port), "the fake provider")

    async def _serve(self, app: Starlette) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        config = Config()
        config.bind = [f"127.0.0.1:{self.port}"]
        config.accesslog = None
        config.graceful_timeout = 1.0
        await serve(app, config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        model = body["model"]
        if model == "fail":
            return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, 500)
        if model == "tool":
            results = [m for m in body["messages"] if m.get("role") == "tool"]
            if not results:
                stream: AsyncIterator[bytes] = _tool_call()
            else:
                stream = _text(["done: ", str(results[-1]["content"])])
        elif model == "slow":
            stream = _text([f"tick {i} " for i in range(400)], delay=0.05)
        else:
            stream = _reasoned()
        return StreamingResponse(stream, media_type="text/event-stream")

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


# ----------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class Setup:
    provider: FakeProvider
    unix: Kernel
    data_dir: Path
    tls: Kernel
    tls_files: TlsFiles
    root: Path


def _connect(kernel: Kernel, provider: FakeProvider, token: str | None = None) -> None:
    with kernel.client(token) as client:
        body = {"name": "fake", "base_url": provider.url, "api_key": "sk-fake", "models": ["text"]}
        response = client.post("/connections", json=body)
        assert response.status_code == 201, response.text


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    work = tmp_path_factory.mktemp("exec")
    provider = FakeProvider()
    launcher = Launcher(work / "procs")
    try:
        with short_tmpdir() as root:
            tls_files = write_tls_pair(work / "tls")
            sock = root / "k.sock"
            unix = launcher(
                ["serve", "--data-dir", str(root / "data"), "--socket", str(sock)],
                uds=sock,
                ready=False,
            )
            tls = launcher.tcp(
                [
                    *("--data-dir", str(work / "tcp-data")),
                    *("--tls-cert", str(tls_files.cert), "--tls-key", str(tls_files.key)),
                ],
                tls=tls_files,
                env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN)),
                ready=False,
            )
            unix.wait_ready()
            tls.wait_ready()
            _connect(unix, provider)
            _connect(tls, provider, TOKEN)
            yield Setup(provider, unix, root / "data", tls, tls_files, root)
    finally:
        launcher.close()
        provider.close()


# ----------------------------------------------------------------------------- helpers


def foya_exec(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`foya exec ARGS`, in process: what it prints and its exit code are the command's own.
    The Ctrl-C and terminal tests below start it as a real process."""
    return run_cli("exec", *args, env=env or base_env())


def unix_exec(setup: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    return foya_exec("--socket", str(setup.unix.uds), *args)


def session_of(stderr: str) -> str:
    found = SESSION_LINE.search(stderr)
    assert found, f"no session id on stderr: {stderr!r}"
    return found.group(1)


def replay(
    kernel: Kernel, session: str, until: str, token: str | None = None
) -> list[dict[str, Any]]:
    """Stored events of `session` (GET …/events?after=0) up to the first of kind `until`."""
    events: list[dict[str, Any]] = []
    with (
        kernel.client(token) as client,
        client.stream(
            "GET", f"/sessions/{session}/events", params={"after": 0}, timeout=20
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if events[-1]["kind"] == until:
                    return events
    raise AssertionError(f"stream ended before {until}: {events}")


def explain(result: subprocess.CompletedProcess[str]) -> str:
    out, err = result.stdout, result.stderr
    return f"exit {result.returncode}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"


# ----------------------------------------------------------------------------- tests


def test_streams_text_and_exits_0(setup: Setup) -> None:
    result = unix_exec(setup, "--model", "text", "say hello")
    assert result.returncode == 0, explain(result)
    assert result.stdout == REPLY + "\n"
    assert THOUGHT not in result.stderr  # reasoning only with --show-reasoning
    session = session_of(result.stderr)
    events = replay(setup.unix, session, "turn_complete")
    assert events[-1]["payload"]["status"] == "completed"
    first = next(e["payload"] for e in events if e["kind"] == "message_end")
    assert (first["role"], first["content"]) == ("user", "say hello")

    # --session continues it; --show-reasoning puts the reasoning on stderr
    again = unix_exec(setup, "--session", session, "--show-reasoning", "once more")
    assert again.returncode == 0, explain(again)
    assert again.stdout == REPLY + "\n"
    assert THOUGHT in again.stderr
    assert session_of(again.stderr) == session
    with setup.unix.client() as client:
        history = client.get(f"/sessions/{session}/history").json()
    assert [m["content"] for m in history if m["role"] == "user"] == ["say hello", "once more"]


def test_approve_all_runs_the_write_tool(setup: Setup) -> None:
    result = unix_exec(setup, "--model", "tool", "--approve-all", "write a file")
    assert result.returncode == 0, explain(result)
    session = session_of(result.stderr)
    written = setup.data_dir / "workspaces" / session / "hello.txt"
    assert written.read_text() == "hi from exec\n"
    assert "done: created" in result.stdout
    assert re.search(r"\[tool\] write ok", result.stderr), result.stderr
    # the tool, then what it touches (its action is its name: not said twice)
    assert re.search(r"foya: approved write /\S+/hello\.txt \(--approve-all\)", result.stderr)
    assert "write write" not in result.stderr


def test_without_a_tty_tool_calls_are_denied(setup: Setup) -> None:
    result = unix_exec(setup, "--model", "tool", "write a file")
    assert result.returncode == 0, explain(result)
    session = session_of(result.stderr)
    assert not (setup.data_dir / "workspaces" / session / "hello.txt").exists()
    assert "stdin is not a terminal" in result.stderr
    assert "[tool] write error: The user denied this tool call." in result.stderr
    assert "done: The user denied this tool call." in result.stdout
    kinds = [e["kind"] for e in replay(setup.unix, session, "turn_complete")]
    assert "approval_resolved" in kinds


def test_on_a_tty_the_user_is_asked(setup: Setup, tmp_path: Path) -> None:
    master, slave = pty.openpty()
    err = tmp_path / "err"
    try:
        with err.open("w") as stderr:
            proc = subprocess.Popen(
                [*FOYA, "exec", "--socket", str(setup.unix.uds), "--model", "tool", "write"],
                cwd=REPO,
                env=base_env(),
                stdin=slave,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
            try:
                prompt = "[y]es/[n]o/[a]lways: "
                wait_until(lambda: prompt in err.read_text(), "the approval prompt", deadline=30)
                os.write(master, b"what?\na\n")  # an unclear answer asks again
                stdout, _ = proc.communicate(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    finally:
        os.close(master)
        os.close(slave)
    text = err.read_text()
    assert proc.returncode == 0, f"{stdout}\n{text}"
    assert re.search(r"Allow write /\S+/hello\.txt\? \[y\]es/\[n\]o/\[a\]lways: ", text), text
    assert text.count(prompt) == 2, text
    session = session_of(text)
    assert (setup.data_dir / "workspaces" / session / "hello.txt").read_text() == "hi from exec\n"
    resolved = [
        e for e in replay(setup.unix, session, "turn_complete") if e["kind"] == "approval_resolved"
    ]
    assert [e["payload"]["decision"] for e in resolved] == ["approved_for_session"]


def test_provider_failure_exits_1_with_the_error(setup: Setup) -> None:
    result = unix_exec(setup, "--model", "fail", "hello")
    assert result.returncode == 1, explain(result)
    assert re.search(r"the provider (at \S+ )?answered HTTP 500", result.stderr), result.stderr
    assert result.stdout == ""


def test_kernel_error_response_exits_1(setup: Setup) -> None:
    result = unix_exec(setup, "--session", "no-such-session", "hello")
    assert result.returncode == 1, explain(result)
    assert "404 not_found" in result.stderr


def test_connection_chooses_the_new_sessions_connection(setup: Setup) -> None:
    """`--connection ID`, as Foya's `foya exec -connection`: the new session's connection (and
    its first model unless `--model` says otherwise)."""
    with setup.unix.client() as client:
        body = {"name": "second", "base_url": setup.provider.url, "api_key": "sk-fake"}
        made = client.post("/connections", json={**body, "models": ["text", "tool"]})
        assert made.status_code == 201, made.text
        second = made.json()["id"]
        default = client.get("/sessions").json()  # sessions so far: on the first connection
    try:
        result = unix_exec(setup, "--connection", second, "say hello")
        assert result.returncode == 0, explain(result)
        assert result.stdout == REPLY + "\n"
        with setup.unix.client() as client:
            rows = {s["id"]: s for s in client.get("/sessions").json()}
        row = rows[session_of(result.stderr)]
        assert (row["connection_id"], row["model"]) == (second, "text")
        assert all(s["connection_id"] != second for s in default)

        unknown = unix_exec(setup, "--connection", "no-such-connection", "hello")
        assert unknown.returncode == 1, explain(unknown)
        assert "connection_not_found" in unknown.stderr
        assert "foya: session" not in unknown.stderr  # no session was made

        mixed = unix_exec(setup, "--session", row["id"], "--connection", second, "hello")
        assert mixed.returncode == 2, explain(mixed)
        assert "not with --session" in mixed.stderr
    finally:
        with setup.unix.client() as client:
            assert client.delete(f"/connections/{second}").status_code == 204


def test_kernel_not_running_exits_2(setup: Setup) -> None:
    gone = setup.root / "nobody.sock"
    result = foya_exec("--socket", str(gone), "hello")
    assert result.returncode == 2, explain(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"cannot reach the kernel at {gone}" in lines[0]
    assert "is `foya serve` running?" in lines[0]
    # the default socket is <data-dir>/kernel.sock
    empty = setup.root / "empty"
    result = foya_exec("--data-dir", str(empty), "hello")
    assert result.returncode == 2, explain(result)
    assert str(empty / "kernel.sock") in result.stderr
    closed = foya_exec("--url", f"http://127.0.0.1:{free_port()}", "hello")
    assert closed.returncode == 2, explain(closed)
    assert "cannot reach the kernel at http://127.0.0.1:" in closed.stderr


def test_url_with_token_file_and_cacert(setup: Setup, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    url = setup.tls.url
    assert url is not None
    cacert = str(setup.tls_files.cert)
    result = foya_exec(
        "--url", url, "--token-file", str(token_file), "--cacert", cacert, "--model", "text", "hi"
    )
    assert result.returncode == 0, explain(result)
    assert result.stdout == REPLY + "\n"
    session = session_of(result.stderr)
    assert (
        replay(setup.tls, session, "turn_complete", TOKEN)[-1]["payload"]["status"] == "completed"
    )

    # FOYA_TOKEN works as well; a wrong token is the kernel's 401, exit 1
    by_env = foya_exec("--url", url, "--cacert", cacert, "hi", env=base_env(FOYA_TOKEN=TOKEN))
    assert by_env.returncode == 0, explain(by_env)
    wrong = foya_exec("--url", url, "--cacert", cacert, "hi", env=base_env(FOYA_TOKEN="w" * 40))
    assert wrong.returncode == 1, explain(wrong)
    assert "401 unauthorized" in wrong.stderr
    # without --cacert the self-signed certificate is not trusted: say how to trust it
    untrusted = foya_exec("--url", url, "--token-file", str(token_file), "hi")
    assert untrusted.returncode == 2, explain(untrusted)
    [line] = untrusted.stderr.strip().splitlines()
    assert f"cannot verify the TLS certificate of {url}" in line, line
    assert line.endswith("pass --cacert CERT (the server's certificate)"), line
    assert "foya serve` running" not in line
    # a certificate that is not the server's is named as such
    other = write_tls_pair(tmp_path / "other")
    wrong_ca = foya_exec(
        "--url", url, "--token-file", str(token_file), "--cacert", str(other.cert), "hi"
    )
    assert wrong_ca.returncode == 2, explain(wrong_ca)
    assert f"--cacert {other.cert} is not the certificate that server presents" in wrong_ca.stderr

    for run in (result, by_env, wrong, untrusted, wrong_ca):
        assert TOKEN not in run.stdout + run.stderr
    assert TOKEN not in setup.tls.stdout() + setup.tls.stderr()


def default_sigint() -> None:
    """In the child: SIGINT back to its default. A suite run in the background inherits SIGINT
    ignored, and Python then installs no KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_cancels_the_turn_and_exits_130(setup: Setup, tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [*FOYA, "exec", "--socket", str(setup.unix.uds), "--model", "slow", "count"],
            cwd=REPO,
            env=base_env(),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            preexec_fn=default_sigint,
        )
        try:
            # text arrives while the turn is still streaming: it is flushed as it comes
            wait_until(lambda: "tick 2" in out.read_text(), "streamed text", deadline=60)
            assert proc.poll() is None
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == 130, f"exit {code}\n{out.read_text()}\n{err.read_text()}"
    session = session_of(err.read_text())
    events = replay(setup.unix, session, "turn_complete")
    assert events[-1]["payload"]["status"] == "cancelled"
    assert events[-1]["payload"]["reason"] == "user_stop"
    with setup.unix.client() as client:
        last = client.get(f"/sessions/{session}/history").json()[-1]
    assert last["turn_status"] == "cancelled"
    assert last["content"].startswith("tick 0 tick 1 tick 2")
