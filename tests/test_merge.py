"""`app.text.merge`: the three-way line merge that takes the agent's changes out of a file around
the user's own edits. `base` is the file as the agent left it, `ours` the file now (the user's
edits), `theirs` the file before the agent (what undoing the agent leads to)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from app.text.merge import Region, changes, merge_bytes, merge_lines, split_lines

BASE = b"one\ntwo\nthree\nfour\nfive\n"


def test_adjacent_hunks_merge() -> None:
    """The agent changed line 2, the user then line 1: touching, not overlapping."""
    agent = b"one\nAGENT\nthree\nfour\nfive\n"
    user = b"USER\nAGENT\nthree\nfour\nfive\n"
    assert merge_bytes(agent, user, BASE) == b"USER\ntwo\nthree\nfour\nfive\n"
    # ...and the other way round (the user's line after the agent's).
    user = b"one\nAGENT\nUSER\nfour\nfive\n"
    assert merge_bytes(agent, user, BASE) == b"one\ntwo\nUSER\nfour\nfive\n"


def test_distant_hunks_merge() -> None:
    assert merge_bytes(
        BASE, b"ONE\ntwo\nthree\nfour\nfive\n", b"one\ntwo\nthree\nfour\nFIVE\n"
    ) == (b"ONE\ntwo\nthree\nfour\nFIVE\n")


def test_both_sides_changing_the_same_lines_conflict() -> None:
    assert (
        merge_bytes(BASE, b"one\nUSER\nthree\nfour\nfive\n", b"one\nAGENT\nthree\nfour\nfive\n")
        is None
    )
    # Overlapping ranges of different lengths.
    ours = b"one\nX\nfour\nfive\n"  # two + three replaced
    theirs = b"one\ntwo\nY\nZ\nfive\n"  # three + four replaced
    assert merge_bytes(BASE, ours, theirs) is None
    # A deletion against a change of a line it removes.
    assert merge_bytes(BASE, b"one\nfour\nfive\n", b"one\ntwo\nTHREE\nfour\nfive\n") is None


def test_insertions_at_one_point_conflict_unless_identical() -> None:
    ours = b"one\ntwo\nUSER\nthree\nfour\nfive\n"
    theirs = b"one\ntwo\nAGENT\nthree\nfour\nfive\n"
    assert merge_bytes(BASE, ours, theirs) is None
    assert merge_bytes(BASE, ours, ours) == ours
    # Insertions at different points merge.
    theirs = b"one\ntwo\nthree\nAGENT\nfour\nfive\n"
    assert merge_bytes(BASE, ours, theirs) == b"one\ntwo\nUSER\nthree\nAGENT\nfour\nfive\n"


def test_an_insertion_inside_a_changed_range_conflicts_but_at_its_edge_merges() -> None:
    theirs = b"one\nTWO\nTHREE\nfour\nfive\n"  # lines 2-3 changed
    inside = b"one\ntwo\nUSER\nthree\nfour\nfive\n"
    assert merge_bytes(BASE, inside, theirs) is None
    before = b"one\nUSER\ntwo\nthree\nfour\nfive\n"
    assert merge_bytes(BASE, before, theirs) == b"one\nUSER\nTWO\nTHREE\nfour\nfive\n"
    after = b"one\ntwo\nthree\nUSER\nfour\nfive\n"
    assert merge_bytes(BASE, after, theirs) == b"one\nTWO\nTHREE\nUSER\nfour\nfive\n"


def test_identical_changes_on_both_sides_are_taken_once() -> None:
    same = b"one\nTWO\nthree\nfour\nFIVE\n"
    assert merge_bytes(BASE, same, same) == same
    ours = b"one\nTWO\nthree\nFOUR\nfive\n"  # one change shared, one of its own each
    theirs = b"one\nTWO\nthree\nfour\nFIVE\n"
    assert merge_bytes(BASE, ours, theirs) == b"one\nTWO\nthree\nFOUR\nFIVE\n"
    # A shared change inside a larger one of the other side is still an overlap.
    assert merge_bytes(BASE, ours, b"ONE\nTWO\nthree\nfour\nfive\n") is None


def test_inserts_and_deletes_at_both_ends() -> None:
    ours = b"zero\n" + BASE  # the user added a first line
    theirs = BASE + b"six\n"  # the other side a last one
    assert merge_bytes(BASE, ours, theirs) == b"zero\n" + BASE + b"six\n"
    ours = BASE[len(b"one\n") :]  # first line deleted
    theirs = BASE[: -len(b"five\n")]  # last line deleted
    assert merge_bytes(BASE, ours, theirs) == b"two\nthree\nfour\n"
    # From and to an empty file.
    assert merge_bytes(b"", b"", BASE) == BASE
    assert merge_bytes(BASE, BASE, b"") == b""
    assert merge_bytes(b"", b"a\n", b"b\n") is None


def test_a_missing_final_newline_round_trips() -> None:
    base = b"a\nb\nc"
    assert merge_bytes(base, b"A\nb\nc", b"a\nb\nC") == b"A\nb\nC"
    # The user appends a line (the last one gains a newline), the agent changed the first.
    assert merge_bytes(base, b"a\nb\nc\nd", b"X\nb\nc") == b"X\nb\nc\nd"
    # Adding or dropping the final newline is a change of the last line.
    assert merge_bytes(base, b"A\nb\nc", b"a\nb\nc\n") == b"A\nb\nc\n"
    assert merge_bytes(base, b"a\nb\nc\n", b"a\nb\nC") is None


def test_crlf_lines_round_trip_byte_for_byte() -> None:
    base = b"a\r\nb\r\nc\r\nd"
    merged = merge_bytes(base, b"A\r\nb\r\nc\r\nd", b"a\r\nb\r\nC\r\nd")
    assert merged == b"A\r\nb\r\nC\r\nd"
    # Mixed endings and a lone CR stay as they are (only \n ends a line).
    base = b"a\rb\nc\r\n"
    assert merge_bytes(base, b"X\rb\nc\r\n", b"a\rb\nC\r\n") == b"X\rb\nC\r\n"


def test_split_lines_cuts_only_after_newlines() -> None:
    assert split_lines(b"") == []
    assert split_lines(b"\n") == [b"\n"]
    assert split_lines(b"a\r\nb\x0cc\rd") == [b"a\r\n", b"b\x0cc\rd"]
    assert split_lines(b"a\n\nb") == [b"a\n", b"\n", b"b"]


def test_changes_are_regions_of_the_base_that_never_touch() -> None:
    base = ["a", "b", "c", "d", "e"]
    assert changes(base, base) == []
    assert changes(base, ["a", "X", "c", "d", "e"]) == [Region(1, 2, ("X",))]
    assert changes(base, ["a", "b", "N", "c", "d", "e"]) == [Region(2, 2, ("N",))]
    assert changes(base, ["a", "c", "Y", "e"]) == [Region(1, 2, ()), Region(3, 4, ("Y",))]
    assert changes(base, ["a", "Y", "e"]) == [Region(1, 4, ("Y",))]  # one region, not three
    for a, b in (([], ["x"]), (["x"], []), (base, base[::-1])):
        regions = changes(a, b)
        assert all(r1.end < r2.start for r1, r2 in itertools.pairwise(regions))


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "e"]), max_size=8)


@settings(max_examples=300, deadline=None)
@given(base=lines, ours=lines, theirs=lines)
def test_a_clean_merge_keeps_each_sides_changes(
    base: list[str], ours: list[str], theirs: list[str]
) -> None:
    """Whatever the inputs: a side equal to the base yields the other; a clean merge applied to
    a side that did not change gives that side's content back."""
    merged = merge_lines(base, ours, theirs)
    assert merge_lines(base, base, theirs) == theirs
    assert merge_lines(base, ours, base) == ours
    assert merge_lines(base, ours, ours) == ours
    if merged is not None:
        # Each side's regions are in the result: replaying ours' changes on theirs' result
        # (or the reverse) is what was merged, so merging is symmetric.
        assert merge_lines(base, theirs, ours) == merged
