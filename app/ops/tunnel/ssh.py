"""The ssh processes of `foya tunnel`: the argv we run, and how we start, end and read them.

Every ssh we run gets our fixed options first (ssh keeps the first value of each option, so the
user cannot turn off BatchMode or connection sharing), then the user's `-o` options, then our
defaults. Each runs in its own session with its stderr in a temporary file: `last_line` reads
the one useful line of it, `refused` tells an authentication or host key refusal from a drop.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from typing import IO

from app.ops.tunnel.config import TunnelConfig

# ssh options we rely on come before the user's (for each option ssh keeps the first value):
# never prompt, and no shared master connection, so that ending our ssh ends the tunnel...
FIXED_OPTIONS = ("-o", "BatchMode=yes", "-o", "ControlPath=none")
# ...and our defaults after them (give up a dead connection in about 45 s, trust a new host key
# once), so the user's options can override these.
DEFAULT_OPTIONS = (
    "-o", "ConnectTimeout=10", "-o", "StrictHostKeyChecking=accept-new",
    "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3",
)  # fmt: skip
AUTH_REFUSALS = ("Permission denied", "Host key verification failed", "IDENTIFICATION HAS CHANGED")


def ssh_argv(config: TunnelConfig, *args: str) -> list[str]:
    return [config.ssh, *FIXED_OPTIONS, *config.ssh_options, *DEFAULT_OPTIONS, *args]


def remote_sh(config: TunnelConfig, script: str) -> list[str]:
    """ssh argv that runs `script` with sh on the remote (no forwardings, no terminal)."""
    argv = ssh_argv(config, "-T", "-o", "ClearAllForwardings=yes", "--", config.destination)
    return [*argv, f"sh -c {shlex.quote(script)}"]


@contextlib.contextmanager
def spawn(argv: list[str], *, stdout: int) -> Iterator[tuple[subprocess.Popen[bytes], IO[bytes]]]:
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=errors, start_new_session=True
        )
        try:
            yield proc, errors
        finally:
            terminate(proc)
            if proc.stdout:
                proc.stdout.close()


def terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def last_line(stream: IO[bytes]) -> str:
    stream.seek(0)
    lines = [line.strip() for line in stream.read().decode(errors="replace").splitlines()]
    useful = [line for line in lines if line and not line.startswith("Warning: Permanently")]
    return useful[-1] if useful else "no message"


def refused(message: str) -> bool:
    return any(marker in message for marker in AUTH_REFUSALS)
