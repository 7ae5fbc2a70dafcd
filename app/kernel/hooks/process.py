"""Running one hook command: its process, its output and what it said (the package docstring
gives the contract)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from app.events import HookCompleted
from app.jsontypes import JSONObject
from app.kernel.hooks.config import Hook, first_error

DEFAULT_TIMEOUT = 30
MAX_OUTPUT = 64 * 1024
DENY_EXIT, HALT_EXIT = 2, 49
PASSED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR")
REQUEST_ENV = {
    "EVENT": "event",
    "EVENT_ID": "event_id",
    "SESSION_ID": "session_id",
    "RUN_ID": "run_id",
    "PROJECT_ID": "project_id",
    "PROJECT_PATH": "project_path",
    "TOOL_NAME": "tool_name",
    "TOOL_CALL_ID": "tool_call_id",
}


def result(hook: Hook | None, event_id: str, event: str, **fields: Any) -> HookCompleted:
    """A `hook_completed` payload: `hook`'s run (None: its configuration could not be read)."""
    base: JSONObject = {
        "id": hook.id if hook else "",
        "event_id": event_id,
        "name": hook.label() if hook else "configuration",
        "event": event,
        "decision": "none",
        "halt": False,
        "reason": "",
        "duration_ms": 0,
        "error": "",
        "input_rewrite": False,
    }
    return cast(HookCompleted, base | fields)


def environment(request: JSONObject) -> dict[str, str]:
    """A hook's environment: a few of the kernel's variables, never its secrets, plus Foya's
    `FOYA_HOOK_*` description of the request."""
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    for name, key in REQUEST_ENV.items():
        env[f"FOYA_HOOK_{name}"] = str(request.get(key, ""))
    return env


@dataclass(frozen=True)
class Call:
    """One event's request to its hooks: what they read on stdin, where and with what
    environment they run."""

    request: JSONObject
    cwd: Path

    async def execute(self, hook: Hook) -> tuple[HookCompleted, list[str]]:
        """Run `hook`: its `hook_completed` payload and the context it gave."""
        started = time.monotonic()
        stdin = json.dumps(self.request, ensure_ascii=False).encode()
        seconds = hook.timeout or DEFAULT_TIMEOUT
        fields: JSONObject = {}
        context: list[str] = []
        try:
            code, capture = await spawn(
                hook.command, stdin, self.cwd, environment(self.request), seconds
            )
            fields, context = verdict(code, capture)
        except TimeoutError:
            fields = {"error": f"hook timed out after {seconds} s and was killed"}
        except OSError as exc:
            fields = {"error": f"hook could not start: {exc.strerror or exc}"}
        fields["duration_ms"] = int((time.monotonic() - started) * 1000)
        return result(hook, self.request["event_id"], self.request["event"], **fields), context


class _Output(BaseModel):
    """What a hook may print on stdout (exit 0)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    decision: Literal["", "none", "allow", "deny"] | None = None
    halt: bool | None = None
    reason: str | None = None
    context: str | list[str] | None = None
    updated_input: JSONObject | None = None


def verdict(code: int, capture: Capture) -> tuple[JSONObject, list[str]]:
    """A finished hook's result fields (the exit code first, then its JSON output) and the
    context it gave."""
    stderr = bytes(capture.output[2]).decode(errors="replace").strip()
    if code == DENY_EXIT:
        return {"decision": "deny", "reason": stderr or "blocked by hook"}, []
    if code == HALT_EXIT:
        return {"decision": "deny", "halt": True, "reason": stderr or "turn halted by hook"}, []
    if code != 0:
        status = f"exit status {code}" if code > 0 else f"killed by signal {-code}"
        return {"error": stderr or status}, []
    if capture.overflow:
        return {"error": f"hook output exceeded {MAX_OUTPUT // 1024} KiB"}, []
    stdout = bytes(capture.output[1]).strip()
    try:
        said = _Output.model_validate_json(stdout) if stdout else _Output()
    except ValidationError as exc:
        return {"error": f"invalid hook JSON output: {first_error(exc)}"}, []
    context = [said.context] if isinstance(said.context, str) else said.context or []
    fields = {
        "decision": said.decision or "none",
        "halt": bool(said.halt),
        "reason": said.reason or "",
        "input_rewrite": said.updated_input is not None,
    }
    return fields, [c.strip() for c in context if c.strip()]


class Capture(asyncio.SubprocessProtocol):
    """A hook process's stdout (1) and stderr (2), each kept up to `MAX_OUTPUT`, and its end:
    `closed` is done once it has exited and every pipe it held is closed."""

    def __init__(self, closed: asyncio.Future[None]) -> None:
        self.output = {1: bytearray(), 2: bytearray()}
        self.overflow = False
        self.closed = closed

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        kept = self.output[fd]
        room = max(0, MAX_OUTPUT - len(kept))
        self.overflow = self.overflow or len(data) > room
        kept += data[:room]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def spawn(
    command: str, stdin: bytes, cwd: Path, env: dict[str, str], seconds: float
) -> tuple[int, Capture]:
    """Run `command` with `stdin` until it, and whatever still holds its output, is done: at
    most `seconds`. Then, or when cancelled, its whole process group is killed.

    The loop's subprocess protocol rather than `asyncio.subprocess`: `Process.wait()` waits for
    the pipes too, and output is capped as it arrives instead of read into memory."""
    loop = asyncio.get_running_loop()
    closed: asyncio.Future[None] = loop.create_future()
    transport, capture = await loop.subprocess_exec(
        lambda: Capture(closed),
        "/bin/sh",
        "-c",
        command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    try:
        pipe = transport.get_pipe_transport(0)
        assert isinstance(pipe, asyncio.WriteTransport)
        pipe.write(stdin)  # buffered by the loop: a hook that never reads cannot block us
        pipe.close()
        async with asyncio.timeout(seconds):
            await closed
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(transport.get_pid(), signal.SIGKILL)
        raise
    finally:
        transport.close()
    code = transport.get_returncode()
    assert code is not None  # `closed` comes after the exit
    return code, capture
