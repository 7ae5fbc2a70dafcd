"""`bash {command, background?, timeout?}`, `bash_status {command_id}`, `bash_cancel {command_id}`.

Every command runs as `bash -c` in a session (so a process group) of its own: killing that group
on a timeout, a cancelled turn or tool, or a cancel of a background command ends everything it
started, not just the shell. Its stdout and stderr are read as they come.

- In the foreground (the default) the tool waits for the command and answers the model with its
  output (stdout and stderr interleaved, the first `MAX_OUTPUT` bytes) and its exit code.
- With `background: true` it answers at once with Foya's `running_in_background` text and the
  command's snapshot; the command lives on, detached from the turn, until it ends, is cancelled,
  or its session or the kernel ends. `bash_status` and `bash_cancel` read and stop it.
- A running foreground command can be moved to the background by the user: the tool then
  answers like a background start, initiated by the user.

The kernel keeps the commands (`CommandHost`: app.kernel.background); a Bash tool without one
runs foreground commands only. Each output stream keeps only its last bytes and its counts, so a
command that talks forever holds a bounded amount of memory; `Stream.tail` renders them as Foya
shows a command's output: the last `TAIL_LINES` lines / `TAIL_BYTES` bytes, after a marker saying
what was left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Protocol

from app.events import BackgroundCommand
from app.tools.base import Action, Tool, ToolContext, ToolError, ToolResult, schema

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0  # a foreground command
MAX_BACKGROUND_TIMEOUT = 86400.0  # Foya's bound
MAX_OUTPUT = 1024 * 1024  # what a foreground command's answer carries
TAIL_LINES = 2000  # Foya's limits on the output a snapshot shows
TAIL_BYTES = 30000
# Enough to render a tail exactly: the kept lines (≤ TAIL_BYTES with their separators), the
# newline before them and a trailing one. A window that is not the whole output holds more than
# TAIL_BYTES without its trailing newline, so its first (cut) line is never among the kept ones.
_WINDOW = TAIL_BYTES + 2
_READ = 65536

#: Who moved a command to the background, and Foya's words for each.
_MOVED = {
    "agent": "The command was started in the background by the agent.",
    "user": "The user moved this command to the background. Continue the task without waiting "
    "for it.",
}


class Stream:
    """What one output stream of a command said: its last bytes and how much in all."""

    def __init__(self) -> None:
        self.window = bytearray()
        self.total = 0
        self.newlines = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.newlines += chunk.count(b"\n")
        self.window += chunk
        if len(self.window) > _WINDOW:
            del self.window[: len(self.window) - _WINDOW]

    def tail(self) -> str:
        """The output as Foya shows it: all of it within the limits, else a marker and the last
        lines that fit (or the end of the last line, if even that does not fit)."""
        window = bytes(self.window)
        ends_line = window.endswith(b"\n")
        lines = self.newlines + (not ends_line) if self.total else 0
        if lines <= TAIL_LINES and self.total <= TAIL_BYTES:
            return window.decode(errors="replace")
        pieces = (window[:-1] if ends_line else window).split(b"\n")
        kept: list[bytes] = []
        size = 0
        for line in reversed(pieces):
            grown = size + len(line) + (1 if kept else 0)
            if len(kept) >= TAIL_LINES or grown > TAIL_BYTES:
                break
            kept.append(line)
            size = grown
        preview = b"\n".join(reversed(kept))
        if not kept:
            preview = _utf8_suffix(pieces[-1], TAIL_BYTES)
            kept = [preview] if preview else []
        marker = (
            f"... (output truncated: omitted {lines - len(kept)} lines / "
            f"{self.total - len(preview)} bytes from the beginning; "
            f"limits: {TAIL_LINES} lines / {TAIL_BYTES} bytes)"
        )
        return marker + ("\n\n" + preview.decode(errors="replace") if preview else "")


def _utf8_suffix(data: bytes, limit: int) -> bytes:
    start = max(0, len(data) - limit)
    while start < len(data) and data[start] & 0xC0 == 0x80:  # a continuation byte
        start += 1
    return data[start:]


class ShellCommand:
    """A `bash -c` command in a session of its own, its output being read until it ends."""

    def __init__(
        self, proc: asyncio.subprocess.Process, command: str, timeout: float | None
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.command = command
        self.timeout = timeout
        self.started_ns = time.time_ns()
        self.ended_ns: int | None = None
        self.stdout = Stream()
        self.stderr = Stream()
        # The foreground answer: both streams interleaved, the first MAX_OUTPUT bytes.
        self.head: bytearray | None = bytearray()
        self.head_cut = False
        self.timed_out = False
        #: Set once the command belongs to the background: ending the tool call no longer
        #: ends the command.
        self.detached = False
        self.finished: asyncio.Task[int] = asyncio.create_task(self._pump())

    @classmethod
    async def spawn(cls, command: str, cwd: Path, limit: float | None) -> ShellCommand:
        """Start `command` in `cwd`, killed after `limit` seconds (None: never)."""
        cwd.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        return cls(proc, command, limit)

    @property
    def running(self) -> bool:
        return not self.finished.done()

    @property
    def exit_code(self) -> int | None:
        """The exit status once ended (None while running); -1 when a signal ended the shell,
        as Go reports it."""
        if self.running:
            return None
        code = self.proc.returncode
        return code if code is not None and code >= 0 else -1

    def detach(self) -> None:
        """The command now belongs to the background: keep no foreground answer."""
        self.detached = True
        self.head = None

    def kill(self) -> None:
        """SIGKILL the command's whole process group, also what is left of it after the shell
        ended (a job it started and left behind)."""
        # Linux hands out a PID again only once no process uses it, as PID or group id. So once
        # the shell is reaped, a live process with its PID means the group is gone and the
        # number taken by another process, whose group must not be hit.
        if self.proc.returncode is not None and os.path.exists(f"/proc/{self.pid}"):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    async def _pump(self) -> int:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.gather(
                    self._read(self.proc.stdout, self.stdout),
                    self._read(self.proc.stderr, self.stderr),
                )
                return await self.proc.wait()
        except TimeoutError:
            self.timed_out = True
            self.kill()
            return await self.proc.wait()
        finally:
            self.ended_ns = time.time_ns()

    async def _read(self, pipe: asyncio.StreamReader, stream: Stream) -> None:
        while chunk := await pipe.read(_READ):
            stream.add(chunk)
            if self.head is not None:
                room = MAX_OUTPUT - len(self.head)
                self.head_cut |= len(chunk) > room
                self.head += chunk[:room]

    def answer(self) -> ToolResult:
        """The foreground answer of the ended command (given once: the head is let go)."""
        text = bytes(self.head or b"").decode(errors="replace")
        self.head = None
        if self.timed_out:
            return ToolResult(f"{text}\n[killed after {self.timeout:g} s timeout]", is_error=True)
        if self.head_cut:
            text += f"\n[output truncated at {MAX_OUTPUT} bytes]"
        code = self.proc.returncode
        return ToolResult(f"{text}\n[exit code {code}]", is_error=code != 0)


class CommandHost(Protocol):
    """The kernel's registry of commands, per session (app.kernel.background)."""

    async def start(self, ctx: ToolContext, shell: ShellCommand) -> BackgroundCommand:
        """Keep `shell` as a background command the agent started; its snapshot."""
        ...

    async def run(self, ctx: ToolContext, shell: ShellCommand) -> BackgroundCommand | None:
        """Wait for foreground `shell`: None once it ended, or its snapshot once the user
        moved it to the background."""
        ...

    def find(self, session: str, command_id: str) -> BackgroundCommand | None:
        """The snapshot of one of the session's commands (None: no such command)."""
        ...

    async def stop(self, session: str, command_id: str, by: str) -> BackgroundCommand | None:
        """Cancel one of the session's commands; its snapshot once ended (None: no such)."""
        ...


def moved(by: str, snapshot: BackgroundCommand) -> str:
    """Foya's answer for a command now running in the background, started `by` agent or user."""
    body = {"status": "running_in_background", "initiated_by": by, "message": _MOVED[by]}
    return _json({**body, "command": snapshot})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Bash:
    name = "bash"
    description = (
        "Run a bash command in the project directory. Returns combined stdout and stderr "
        f"(at most {MAX_OUTPUT // 1024} KiB) and the exit code. "
        f"Default timeout {int(DEFAULT_TIMEOUT)} s. With background: true the command is "
        "started as a kernel-managed background process and the call returns at once with its "
        "command_id (read it with bash_status, stop it with bash_cancel)."
    )
    parameters = schema(
        {
            "command": {"type": "string", "description": "The command line."},
            "background": {
                "type": "boolean",
                "description": "Start the command in the background and return immediately.",
            },
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed (foreground: 120 by "
                "default; background: none by default).",
            },
        },
        ["command"],
    )

    def __init__(self, host: CommandHost | None = None) -> None:
        self.host = host

    def action(self, args: dict[str, Any]) -> Action:
        return "execute"

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command: a non-empty string is required")
        background = args.get("background", False)
        if not isinstance(background, bool):
            raise ToolError("background: true or false is required")
        if background and self.host is None:
            raise ToolError("background execution is unavailable")
        timeout = args.get("timeout", None if background else DEFAULT_TIMEOUT)
        if timeout is not None:
            if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
                raise ToolError("timeout: a positive number of seconds is required")
            timeout = min(float(timeout), MAX_BACKGROUND_TIMEOUT if background else MAX_TIMEOUT)
        shell = await ShellCommand.spawn(command, ctx.cwd, timeout)
        try:
            if background:
                assert self.host is not None
                return ToolResult(moved("agent", await self.host.start(ctx, shell)))
            if self.host is not None:
                snapshot = await self.host.run(ctx, shell)
                if snapshot is not None:
                    return ToolResult(moved("user", snapshot))
            else:
                await asyncio.shield(shell.finished)  # a cancel must not stop the reading
        except BaseException:
            if not shell.detached:  # a cancelled turn or tool ends its foreground command
                shell.kill()
            raise
        return shell.answer()


class _CommandTool:
    """A tool on one background command of the session, named by `command_id`: answers with
    its snapshot."""

    name: str
    description: str
    parameters = schema({"command_id": {"type": "string"}}, ["command_id"])
    _action: Action

    def __init__(self, host: CommandHost) -> None:
        self.host = host

    def action(self, args: dict[str, Any]) -> Action:
        return self._action

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command_id = args.get("command_id")
        if not isinstance(command_id, str) or not command_id.strip():
            raise ToolError("command_id is required")
        snapshot = await self._apply(ctx.session, command_id)
        if snapshot is None:
            raise ToolError("background command not found")
        return ToolResult(_json(snapshot))

    async def _apply(self, session: str, command_id: str) -> BackgroundCommand | None:
        raise NotImplementedError


class BashStatus(_CommandTool):
    name = "bash_status"
    description = "Read the status and accumulated output of a background command."
    parallel = True
    _action = "read"

    async def _apply(self, session: str, command_id: str) -> BackgroundCommand | None:
        return self.host.find(session, command_id)


class BashCancel(_CommandTool):
    name = "bash_cancel"
    description = "Stop a background command started by bash."
    _action = "execute"

    async def _apply(self, session: str, command_id: str) -> BackgroundCommand | None:
        return await self.host.stop(session, command_id, "agent")


def bash_tools(host: CommandHost) -> dict[str, Tool]:
    """`bash` with its background mode, `bash_status` and `bash_cancel`, kept by `host`."""
    tools: list[Tool] = [Bash(host), BashStatus(host), BashCancel(host)]
    return {t.name: t for t in tools}
