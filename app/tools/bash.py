"""`bash {command, timeout?}`: run a shell command in the working directory.

The command runs in its own process group so a timeout or a cancelled turn kills everything it
started, not just the shell. Output (stdout and stderr, interleaved) is capped at `MAX_OUTPUT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

from app.tools.base import Action, ToolContext, ToolError, ToolResult, schema

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
MAX_OUTPUT = 1024 * 1024


class Bash:
    name = "bash"
    description = (
        "Run a bash command in the project directory. Returns combined stdout and stderr "
        f"(at most {MAX_OUTPUT // 1024} KiB) and the exit code. "
        f"Default timeout {int(DEFAULT_TIMEOUT)} s."
    )
    parameters = schema(
        {
            "command": {"type": "string", "description": "The command line."},
            "timeout": {"type": "number", "description": "Seconds before the command is killed."},
        },
        ["command"],
    )

    def action(self, args: dict[str, Any]) -> Action:
        return "execute"

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command: a non-empty string is required")
        timeout = args.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise ToolError("timeout: a positive number of seconds is required")
        ctx.cwd.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=ctx.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        output = bytearray()
        truncated = False

        async def collect() -> None:
            nonlocal truncated
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                room = MAX_OUTPUT - len(output)
                if len(chunk) > room:
                    truncated = True
                output.extend(chunk[:room])
            await proc.wait()

        try:
            await asyncio.wait_for(collect(), min(float(timeout), MAX_TIMEOUT))
        except TimeoutError:
            _kill(proc.pid)
            await proc.wait()
            text = output.decode(errors="replace")
            return ToolResult(f"{text}\n[killed after {timeout} s timeout]", is_error=True)
        except asyncio.CancelledError:
            _kill(proc.pid)
            raise
        text = output.decode(errors="replace")
        if truncated:
            text += f"\n[output truncated at {MAX_OUTPUT} bytes]"
        code = proc.returncode
        return ToolResult(f"{text}\n[exit code {code}]", is_error=code != 0)


def _kill(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
