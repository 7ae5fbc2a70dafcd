"""`foya` commands run inside the test's own process, answered as a finished subprocess would be.

A real `python -m app` costs a Python start and the CLI's imports, about half a second of CPU
per call on the CI machine; tests that judge what a command decides (its output, its exit code,
its refusals, the files it writes) make dozens of calls, and paid most of the suite's time for
those starts. Here the same typer application runs with the given environment (replacing the
process's own, as `subprocess.run(env=…)` does), working directory and standard input, and its
result is a `subprocess.CompletedProcess`, so a test's assertions read the same either way.

What only a process shows (the console script itself, signals, exit through the interpreter,
start-up time, secrets absent from the process list) stays with `support.helpers.run_foya`.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path

from typer._click import formatting
from typer.testing import CliRunner

from app.cli import cli
from support.helpers import REPO, base_env


class _ProcessWidth(CliRunner):
    """Help laid out as a process lays it out: click's runner forces 80 columns whatever
    COLUMNS says, where a process takes COLUMNS (at most 80) less a margin of 2, and wraps
    (and breaks at hyphens) accordingly."""

    @contextlib.contextmanager
    def isolation(
        self,
        input: str | bytes | None = None,
        env: Mapping[str, str | None] | None = None,
        color: bool = False,
    ) -> Iterator[tuple[io.BytesIO, io.BytesIO, io.BytesIO]]:
        with super().isolation(input, env, color) as streams:
            formatting.FORCED_WIDTH = None  # the isolation puts it back when it ends
            yield streams


_RUNNER = _ProcessWidth()


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` is exactly `env` inside the block, and what it was again after it."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
    cwd: Path = REPO,
) -> subprocess.CompletedProcess[str]:
    """Run `foya ARGS` in process; an exception the command did not handle is printed on
    stderr as a traceback with exit code 1, as the interpreter would."""
    # A command may narrow the umask for its own files (`replicate` does): the test's is kept.
    umask = os.umask(0o077)
    os.umask(umask)
    try:
        with environment(env if env is not None else base_env()), contextlib.chdir(cwd):
            result = _RUNNER.invoke(cli, list(args), input=stdin, catch_exceptions=True)
    finally:
        os.umask(umask)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["foya", *args], result.exit_code, result.stdout, stderr)


def foya_check(data_dir: Path) -> str:
    """`foya check` (in process); fail unless it reports no difference."""
    done = run_cli("check", "--data-dir", str(data_dir))
    assert done.returncode == 0, f"foya check: {done.stdout}\n{done.stderr}"
    assert " 0 difference(s)" in done.stderr, done.stderr
    return done.stderr
