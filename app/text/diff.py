"""Unified diffs of file contents, as tool results and file previews show them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_DIFF_CHARS = 200_000
CONTEXT = 3  # difflib's default context lines


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
    lines = _unified(
        a, b, "/dev/null" if before is None else name, "/dev/null" if after is None else name
    )
    if not lines and (before is None) != (after is None):  # an empty file created or removed
        lines = [
            f"--- {'/dev/null' if before is None else name}\n",
            f"+++ {'/dev/null' if after is None else name}\n",
        ]
    additions = sum(1 for line in lines if line[0] == "+" and not line.startswith("+++"))
    deletions = sum(1 for line in lines if line[0] == "-" and not line.startswith("---"))
    # A last line without a newline would run into the next hunk header.
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n… (diff truncated)\n"
    return Diff(text, additions, deletions)


def common_ends(a: Sequence[object], b: Sequence[object]) -> tuple[int, int]:
    """How many leading and trailing items `a` and `b` share (never overlapping): difflib's
    matcher is quadratic at worst, and an agent's edit usually touches a few lines of a big
    file, so diffs and merges run it only on the middle that differs."""
    prefix = 0
    for x, y in zip(a, b, strict=False):  # the shorter sequence bounds the common prefix
        if x != y:
            break
        prefix += 1
    suffix = 0
    limit = min(len(a), len(b)) - prefix
    while suffix < limit and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    return prefix, suffix


_HUNK = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _unified(a: list[str], b: list[str], name_a: str, name_b: str) -> list[str]:
    """difflib's unified diff, run only on the differing middle (plus its context lines): the
    matcher is quadratic at worst, and an agent's edit usually touches a few lines of a big file.
    Hunk line numbers are shifted back to the whole files'."""
    prefix, suffix = common_ends(a, b)
    start = max(0, prefix - CONTEXT)
    keep = max(0, suffix - CONTEXT)
    lines = list(
        difflib.unified_diff(a[start : len(a) - keep], b[start : len(b) - keep], name_a, name_b)
    )
    if not start:
        return lines

    def shift(match: re.Match[str]) -> str:
        old, old_len, new, new_len = match.groups()
        return f"@@ -{int(old) + start}{old_len or ''} +{int(new) + start}{new_len or ''} @@"

    return [_HUNK.sub(shift, line, count=1) if line.startswith("@@") else line for line in lines]
