"""A shell on a pseudo-terminal: start it, resize it, end its whole session.

Controlling terminal. The shell needs the PTY's slave as its controlling terminal (job control,
^C as SIGINT, SIGWINCH on resize). `subprocess` makes one only through `preexec_fn`, which is
unsafe in a process with threads (the store has one), so the child is started in a new session
(`start_new_session`) as `/bin/sh -c 'exec "$0" <>"$1" >&0 2>&0' SHELL TTY`: on Linux a session
leader without a controlling terminal that opens a terminal acquires it, and `exec` then turns
that sh into the user's shell under the same PID. No fork happens in this process beyond
subprocess's own vfork/exec.

Exit. `os.pidfd_open` gives a descriptor that becomes readable when the shell exits: the event
loop watches it with `add_reader`, no thread per shell. Without it (Linux < 5.3), or without
`/dev/ptmx`, terminals are unavailable (`TerminalUnavailable`, 501).

Ending. An interactive shell puts each job in a process group of its own, so killing the
shell's group would leave its jobs behind. `end_shells` signals every process whose session id
is a shell's PID (read from `/proc/<pid>/stat`): SIGHUP, SIGTERM and SIGCONT (so stopped jobs
see them), then, after a grace period, SIGKILL for whatever is left. Zombies count as gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import termios
from collections.abc import Collection, Iterable
from pathlib import Path

from app.kernel.terminals.errors import TerminalFailed, TerminalUnavailable

TERM = "xterm-256color"  # what Foya sets
DEFAULT_COLS, DEFAULT_ROWS = 80, 24
GRACE = 1.0  # seconds a session's processes get after SIGHUP/SIGTERM before SIGKILL
_POLL = 0.05
# `exec "$0" <>"$1"`: open the tty as stdin (acquiring it), dup it to stdout and stderr.
_ACQUIRE_TTY = 'exec "$0" <>"$1" >&0 2>&0'


def shell_path() -> str:
    """The user's shell: `$SHELL`, else /bin/sh (Foya's choice)."""
    return os.environ.get("SHELL") or "/bin/sh"


def shell_env(cwd: Path) -> dict[str, str]:
    """The kernel's environment without its own settings (`FOYA_*`) and systemd's notify
    socket, with Foya's `TERM` and `PWD` naming the working directory."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FOYA_") and k != "NOTIFY_SOCKET"
    }
    env.update(TERM=TERM, PWD=str(cwd))
    return env


def exit_code(returncode: int) -> int:
    """A shell's exit status as Foya reports it: -1 when a signal ended it."""
    return returncode if returncode >= 0 else -1


class ShellProcess:
    """The shell, the PTY's master side (non-blocking) and a pidfd of the shell."""

    def __init__(self, popen: subprocess.Popen[bytes], master: int, pidfd: int) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.master = master
        self.pidfd = pidfd
        self.closed = False

    @classmethod
    def spawn(cls, cwd: Path, cols: int, rows: int) -> ShellProcess:
        """Start the user's shell in `cwd` on a new PTY of `cols` x `rows` (0: 80 x 24)."""
        try:
            master, slave = os.openpty()
        except OSError as exc:
            raise TerminalUnavailable(f"cannot open a pseudo-terminal: {exc.strerror}") from None
        try:
            _set_size(slave, cols or DEFAULT_COLS, rows or DEFAULT_ROWS)
            argv = ["/bin/sh", "-c", _ACQUIRE_TTY, shell_path(), os.ttyname(slave)]
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=slave,
                    stdout=slave,
                    stderr=slave,
                    cwd=cwd,
                    env=shell_env(cwd),
                    start_new_session=True,
                )
            except OSError as exc:
                raise TerminalFailed(f"cannot start a shell in {cwd}: {exc.strerror}") from None
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        try:
            pidfd = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):
            os.close(master)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
            raise TerminalUnavailable("this system cannot watch processes (pidfd_open)") from None
        os.set_blocking(master, False)
        return cls(popen, master, pidfd)

    def resize(self, cols: int, rows: int) -> None:
        """New window size; the kernel sends SIGWINCH to the terminal's foreground group."""
        _set_size(self.master, cols, rows)

    def reap(self) -> int:
        """The exit code, once the pidfd said the shell has exited (reaps it)."""
        return exit_code(self.popen.wait())

    def signal(self, sig: signal.Signals) -> None:
        """Signal the shell through its pidfd (never another process reusing its PID)."""
        if not self.closed:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, sig)

    def close(self) -> None:
        """Close the master side (the tty hangs up) and the pidfd."""
        if not self.closed:
            self.closed = True
            for fd in (self.master, self.pidfd):
                with contextlib.suppress(OSError):
                    os.close(fd)


def _set_size(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def session_members(sessions: Collection[int]) -> list[int]:
    """PIDs of the live (not zombie) processes in any of these sessions."""
    found = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat.rpartition(b")")[2].split()  # state, ppid, pgrp, session, ...
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) in sessions:
            found.append(int(entry.name))
    return found


def _signal_members(sessions: Collection[int], signals: Iterable[signal.Signals]) -> None:
    members = session_members(sessions)
    for sig in signals:
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


async def end_shells(shells: Collection[ShellProcess], grace: float = GRACE) -> None:
    """End every process of these shells' sessions: SIGHUP, SIGTERM and SIGCONT, then SIGKILL
    for whatever is still there after `grace` seconds."""
    sessions = {shell.pid for shell in shells}
    if not sessions:
        return
    for signals in ((signal.SIGHUP, signal.SIGTERM, signal.SIGCONT), (signal.SIGKILL,)):
        for shell in shells:  # the shell itself even without /proc, through its pidfd
            for sig in signals:
                shell.signal(sig)
        await asyncio.to_thread(_signal_members, sessions, signals)
        for _ in range(round(grace / _POLL)):  # polled: no notice comes when others exit
            if not await asyncio.to_thread(session_members, sessions):
                break
            await asyncio.sleep(_POLL)
