"""Terminal refusals that a real process cannot be made to show in a test's time:
409 `terminal_busy` (the shell takes no input for 10 s) and 501 `terminal_unavailable` (a host
without pseudo-terminals or pidfds). A real in-process kernel on a real data directory runs a
real shell; only the wait is shortened, and only the operating system's calls are made to fail.
Whether a shell is gone is read from /proc, as in test_terminals.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from app.kernel import Kernel
from app.kernel.terminals import terminal as terminal_module
from app.kernel.terminals.errors import TerminalBusy, TerminalUnavailable
from app.metrics import Metrics
from app.settings import Settings


@asynccontextmanager
async def kernel_with_session(data_dir: Path) -> AsyncIterator[tuple[Kernel, str]]:
    kernel = Kernel(Settings(data_dir=data_dir), Metrics())
    await kernel.start()
    try:
        session = await kernel.sessions.create({})
        yield kernel, session["id"]
    finally:
        await kernel.begin_shutdown()
        await kernel.close()


def session_members(sid: int) -> list[int]:
    """PIDs of live processes whose session id is `sid` (zombies count as gone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


@pytest.fixture
def shell_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SHELL", "/bin/sh")
    (tmp_path / "home").mkdir()
    return tmp_path / "data"


def test_input_the_shell_does_not_read_is_409_terminal_busy(
    shell_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terminal_module, "INPUT_WAIT", 0.5)

    async def main() -> None:
        async with kernel_with_session(shell_home) as (kernel, session):
            shown = await kernel.terminals.start(session, 80, 24)
            ref = shown["ref"]
            # A raw-mode tty with a command that reads nothing: its input queue fills up (in
            # canonical mode the line discipline would drop the excess instead).
            await kernel.terminals.write(session, ref, "stty raw -echo; sleep 60\n")
            await asyncio.sleep(0.3)
            with pytest.raises(TerminalBusy) as refused:
                await kernel.terminals.write(session, ref, "x" * 512 * 1024)
            assert (refused.value.status, refused.value.code) == (409, "terminal_busy")
            assert "bytes were written" in str(refused.value)
            # Still usable: Ctrl-C ends the sleep, the shell answers again.
            await kernel.terminals.write(session, ref, "\x03")
            await kernel.terminals.stop(session, ref)

    asyncio.run(main())


@pytest.mark.parametrize("failing", ["openpty", "pidfd_open"])
def test_a_host_without_ptys_or_pidfds_is_501_and_leaves_no_shell(
    failing: str, shell_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: object, **kwargs: object) -> object:
        child = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(child.pid)
        return child

    def unavailable(*_: object) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    monkeypatch.setattr(os, failing, unavailable)

    async def main() -> None:
        async with kernel_with_session(shell_home) as (kernel, session):
            with pytest.raises(TerminalUnavailable) as refused:
                await kernel.terminals.start(session, 80, 24)
            assert (refused.value.status, refused.value.code) == (501, "terminal_unavailable")
            assert kernel.metrics.terminals_open._value.get() == 0
        # pidfd_open fails after the shell started: it is killed with its session.
        assert len(started) == (1 if failing == "pidfd_open" else 0)
        assert all(not session_members(pid) for pid in started)

    asyncio.run(main())
