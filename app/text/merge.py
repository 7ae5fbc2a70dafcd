"""Three-way merge of line sequences (diff3), as undoing the agent's changes around a user's own
edits needs it.

`merge_lines(base, ours, theirs)` diffs base → ours and base → theirs (difflib, run only on the
differing middle of each pair) into change regions over the base, then applies both sides'
regions to the base. Two regions conflict only when their base ranges strictly overlap, when an
insertion falls strictly inside the other side's range, or when both sides insert different text
at the same point. Regions that merely touch (the agent changed line 2, the user line 1) merge,
and a change made identically on both sides is taken once. At a point where one side inserts and
the other replaces the lines that follow, the insertion comes first.

`merge_bytes` does the same over file contents split after every `\\n` (the newline kept with
its line), so CRLF endings and a missing final newline come back byte for byte. It does not ask
whether the content is text: that is the caller's policy.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.text.diff import common_ends

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class Region(Generic[T]):
    """Base lines `[start, end)` replaced by `lines` (an insertion when start == end)."""

    start: int
    end: int
    lines: tuple[T, ...]


def changes(base: Sequence[T], other: Sequence[T]) -> list[Region[T]]:
    """The regions that turn `base` into `other`, in base order; neighbouring edits are one
    region (no two regions touch)."""
    prefix, suffix = common_ends(base, other)
    a = base[prefix : len(base) - suffix]
    b = other[prefix : len(other) - suffix]
    if not a and not b:
        return []
    # autojunk off: on long files it would treat frequent lines (blank ones, closing braces)
    # as junk and align the rest badly.
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    out: list[Region[T]] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        start, end, lines = prefix + i1, prefix + i2, tuple(b[j1:j2])
        if out and out[-1].end == start:  # adjacent opcodes (a delete next to an insert)
            last = out.pop()
            start, lines = last.start, last.lines + lines
        out.append(Region(start, end, lines))
    return out


def _conflict(a: Region[T], b: Region[T]) -> bool:
    """Whether two regions of different sides cannot both apply (`a` starts no later than `b`,
    and an insertion sorts before a replacement starting at the same point)."""
    if a.start == a.end and b.start == b.end:
        return a.start == b.start  # two insertions at one point: which goes first?
    if a.start == a.end:
        return b.start < a.start < b.end
    if b.start == b.end:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


def merge_lines(base: Sequence[T], ours: Sequence[T], theirs: Sequence[T]) -> list[T] | None:
    """`base` with both sides' changes applied, or None when they conflict."""
    if list(ours) == list(base):
        return list(theirs)
    if list(theirs) == list(base) or list(ours) == list(theirs):
        return list(ours)
    regions = sorted(
        [(r, 0) for r in changes(base, ours)] + [(r, 1) for r in changes(base, theirs)],
        key=lambda rs: (rs[0].start, rs[0].end, rs[1]),
    )
    out: list[T] = []
    pos = 0
    last: Region[T] | None = None
    for region, _ in regions:
        if last is not None:
            if region == last:
                continue  # the same change on both sides
            # Regions applied before `last` end at or before its start, so only `last` can
            # reach into this one.
            if _conflict(last, region):
                return None
        out.extend(base[pos : region.start])
        out.extend(region.lines)
        pos = region.end
        last = region
    out.extend(base[pos:])
    return out


def split_lines(data: bytes) -> list[bytes]:
    """`data` cut after every `\\n`; the last line may lack one. Joining gives `data` back."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def merge_bytes(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """Three-way merge of file contents by lines; None when the changes conflict."""
    merged = merge_lines(split_lines(base), split_lines(ours), split_lines(theirs))
    return None if merged is None else b"".join(merged)
