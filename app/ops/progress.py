"""The progress bar long CLI commands draw (backup, restore, import, export)."""

from __future__ import annotations

import sys
from typing import Any

import typer


class Progress:
    """A progress bar on stderr, shown from the first report of progress on: a refusal before
    any work stays one line. Call it with (done, total); use it as a context manager."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = typer.progressbar(
                length=1, label=self.label, file=sys.stderr, show_pos=False
            ).__enter__()
        self.bar.length = max(total, 1)
        self.bar.update(done - self.bar.pos)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)
