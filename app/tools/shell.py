"""A `bash -c` command as the bash tools run it: its process and what its output said.

Every command runs in a session (so a process group) of its own: `ShellCommand.kill` ends the
whole group, so a timeout, a cancelled turn or tool, or a cancel of a background command ends
everything the command started, not just the shell. Its stdout and stderr are read as they
come. Each output stream keeps only its last bytes and its counts, so a command that talks
forever holds a bounded amount of memory; `Stream.tail` renders them as Foya shows a command's
output: the last `TAIL_LINES` lines / `TAIL_BYTES` bytes, after a marker saying what was left
out. A foreground command also keeps its first `MAX_OUTPUT` bytes, the tool's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from app.tools.base import ToolResult

MAX_OUTPUT = 1024 * 1024  # what a foreground command's answer carries
TAIL_LINES = 2000  # Foya's limits on the output a snapshot shows
TAIL_BYTES = 30000
# Enough to render a tail exactly: the kept lines (≤ TAIL_BYTES with their separators), the
# newline before them and a trailing one. A window that is not the whole output holds more than
# TAIL_BYTES without its trailing newline, so its first (cut) line is never among the kept ones.
_WINDOW = TAIL_BYTES + 2
_READ = 65536


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
