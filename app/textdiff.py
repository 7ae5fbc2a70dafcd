"""Unified diffs of file contents, as tool results and file previews show them."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

MAX_DIFF_CHARS = 200_000


@dataclass(frozen=True)
class Diff:
    text: str
    additions: int
    deletions: int


def _lines(data: bytes | None) -> list[str] | None:
    try:
        return (data or b"").decode().splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def unified(name: str, before: bytes | None, after: bytes | None) -> Diff:
    """Diff two contents of file `name` (None: the file does not exist). Non-UTF-8 content is
    reported as a binary difference; long diffs are cut at `MAX_DIFF_CHARS`."""
    a, b = _lines(before), _lines(after)
    if a is None or b is None:
        return Diff(f"Binary file {name} differs\n" if before != after else "", 0, 0)
    lines = list(
        difflib.unified_diff(
            a, b, "/dev/null" if before is None else name, "/dev/null" if after is None else name
        )
    )
    additions = sum(1 for line in lines if line[0] == "+" and not line.startswith("+++"))
    deletions = sum(1 for line in lines if line[0] == "-" and not line.startswith("---"))
    # A last line without a newline would run into the next hunk header.
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n… (diff truncated)\n"
    return Diff(text, additions, deletions)
