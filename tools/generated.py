"""Writing a generated document, or checking that the committed one is current."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(output: Path, text: str, *, check: bool, command: str) -> int:
    """With `check`, exit status 1 (and say how to fix it) when `output` differs from `text`;
    otherwise write `text` to `output`. Returns the exit status."""
    if check:
        current = output.read_text() if output.exists() else ""
        if current != text:
            print(f"{output} is out of date: run `{command}` and commit it", file=sys.stderr)
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(f"wrote {output}")
    return 0
