"""Property: a hand edit is never lost.

Random sequences of agent edits, hand edits, rewinds and file-review undos/keeps run on a few
files through a real kernel in process (`app.kernel.Kernel` on a temp data dir, its event loop
in a thread), whose agent is driven by the fake OpenAI-compatible provider: every agent edit is
a real turn whose `write` tool call rewrites one file. Hand edits are plain writes to disk.

Invariant, after every rewind or undo: each line the user wrote by hand (the files' first
contents included) that was on disk before the call and that the agent never replaced or
deleted is still there, unless the plan reported the file `modified`, in which case the file is
byte for byte as it was (nothing is ever forced here). Lines are unique tokens, so "is still
there" is set membership. Files differ in line endings (LF, CRLF) and in having a final newline.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.fake_provider import FakeProvider, answer, call, tools
from support.inprocess import InProcess, inprocess_kernel

from app.kernel import Kernel
from app.kernel.turns.inputs import TurnInput

T = TypeVar("T")

FILES = (("lf.txt", "\n", True), ("crlf.txt", "\r\n", False))  # the second: no final newline
KINDS = ("replace", "insert", "delete")


@dataclass
class Rig:
    """The in-process kernel, and a counter for distinct model names."""

    inner: InProcess
    tokens: Iterator[int] = field(default_factory=itertools.count)

    @property
    def kernel(self) -> Kernel:
        return self.inner.kernel

    @property
    def fake(self) -> FakeProvider:
        return self.inner.fake

    @property
    def connection(self) -> str:
        return self.inner.connection

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.inner.run(coro)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with inprocess_kernel(tmp_path_factory.mktemp("hand_edits") / "data") as inner:
        yield Rig(inner)


class Files:
    """The session's files as token lines, and which hand-written tokens the agent touched."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.style = {name: (eol, final) for name, eol, final in FILES}
        self.by_hand: set[str] = set()
        self.touched: set[str] = set()

    def render(self, name: str, lines: list[str]) -> bytes:
        eol, final = self.style[name]
        return (eol.join(lines) + (eol if final and lines else "")).encode()

    def lines(self, name: str) -> list[str]:
        eol, _ = self.style[name]
        path = self.workspace / name
        if not path.exists():
            return []
        text = path.read_bytes().decode()
        parts = text.split(eol)
        if parts and parts[-1] == "":
            parts.pop()
        return parts

    def edited(self, name: str, kind: str, at: int, token: str, agent: bool) -> bytes:
        """The file after one line edit; records what the agent replaces or deletes."""
        lines = self.lines(name)
        at = at % (len(lines) + 1)
        if kind != "insert" and at < len(lines):
            if agent:
                self.touched.add(lines[at])
            del lines[at]
        if kind != "delete":
            lines.insert(at, token)
        return self.render(name, lines)

    def snapshot(self) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for name, _, _ in FILES:
            path = self.workspace / name
            out[name] = path.read_bytes() if path.exists() else None
        return out

    def check(self, before: dict[str, bytes | None], statuses: dict[str, str]) -> None:
        """The invariant, after a rewind or an undo that planned `statuses` (by file name)."""
        after = self.snapshot()
        for name, _, _ in FILES:
            status = statuses.get(name)
            if status is None or status == "modified":
                assert after[name] == before[name], (name, status, "must be left untouched")
                continue
            was = set(_tokens(before[name], self.style[name][0]))
            kept = set(self.lines(name))
            lost = (was & self.by_hand) - self.touched - kept
            assert not lost, (name, status, sorted(lost), before[name], after[name])


def _tokens(data: bytes | None, eol: str) -> list[str]:
    return [] if data is None else [t for t in data.decode().split(eol) if t]


async def _turn(rig: Rig, sid: str, model: str, name: str, content: bytes, n: int) -> None:
    """One agent turn: a `write` of `name`, then a short answer; returns at `turn_complete`."""
    args = {"path": name, "content": content.decode()}
    rig.fake.push(model, tools(call(f"w{n}", "write", args)), answer("Done."))
    async with rig.kernel.session_events(sid, None) as stream:
        started = await rig.kernel.turns.submit(sid, TurnInput(message=f"turn {n}"))
        assert started["status"] == "started", started
        while True:
            event = await stream.next()
            assert event is not None, "the stream ended before the turn did"
            if event.kind == "tool_end":
                assert not event.payload.get("is_error"), event.payload
            if event.kind == "turn_complete":
                break
    while rig.kernel.turns.running(sid):  # the runner winds down just after `turn_complete`
        await asyncio.sleep(0.001)


def _names(plan: dict[str, Any], workspace: Path) -> dict[str, str]:
    root = workspace.resolve()
    return {str(Path(f["path"]).relative_to(root)): f["status"] for f in plan["files"]}


edit = st.tuples(
    st.sampled_from(["agent", "hand"]),
    st.integers(0, len(FILES) - 1),
    st.sampled_from(KINDS),
    st.integers(0, 6),  # files stay short: edits meet often
)
# Edits are most of it, so that agent and hand edits interleave on the same files; every
# sequence ends with an undo and a rewind to the first message, so each is checked at least once.
steps = st.lists(
    st.one_of(
        edit,
        edit,
        edit,
        st.tuples(st.just("rewind"), st.integers(0, 5)),
        st.tuples(st.sampled_from(["undo", "keep"])),
    ),
    min_size=2,
    max_size=9,
).map(lambda s: [*s, ("undo",), ("rewind", 0)])


# The cases, always run: the agent edits, the user edits another line, the agent edits
# again (one turn each; then undo, and rewind); the same across two files and with a clash.
@example(
    steps=[
        ("agent", 0, "replace", 1),
        ("hand", 0, "replace", 3),
        ("agent", 0, "insert", 0),
        ("undo",),
        ("rewind", 0),
    ]
)
@example(
    steps=[
        ("agent", 1, "replace", 1),
        ("hand", 1, "replace", 0),
        ("hand", 0, "insert", 9),
        ("agent", 0, "delete", 0),
        ("agent", 1, "replace", 3),
        ("rewind", 0),
        ("undo",),
        ("rewind", 0),
    ]
)
@example(
    steps=[
        ("agent", 0, "replace", 1),
        ("hand", 0, "replace", 1),
        ("agent", 0, "replace", 3),
        ("undo",),
        ("rewind", 0),
    ]
)
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=steps)
def test_no_hand_written_line_is_lost(rig: Rig, steps: list[tuple[Any, ...]]) -> None:
    kernel = rig.kernel
    model = f"m-{next(rig.tokens)}"
    session = rig.run(
        kernel.sessions.create(
            {"connection_id": rig.connection, "model": model, "approval_mode": "full_access"}
        )
    )
    sid = session["id"]
    rig.run(kernel.sessions.update(sid, {"title": "property"}))  # no background title request
    files = Files(kernel.sessions.workspace(rig.run(kernel.sessions.row(sid))))
    for name, _, _ in FILES:
        first = [f"{name}-{i}" for i in range(4)]
        files.by_hand.update(first)
        (files.workspace / name).write_bytes(files.render(name, first))

    for n, step in enumerate(steps):
        if step[0] in ("agent", "hand"):
            who, index, kind, at = step
            name = FILES[index][0]
            token = f"{who}-{n}"
            content = files.edited(name, kind, at, token, agent=who == "agent")
            if who == "agent":
                rig.run(_turn(rig, sid, model, name, content, n))
                assert (files.workspace / name).read_bytes() == content
            else:
                files.by_hand.add(token)
                (files.workspace / name).write_bytes(content)
        elif step[0] == "rewind":
            history = rig.run(kernel.sessions.history(sid))
            users = [m["event_seq"] for m in history if m["role"] == "user"]
            if not users:
                continue
            seq = users[step[1] % len(users)]
            before = files.snapshot()
            shown = rig.run(kernel.rewinds.rewind(sid, seq))
            rig.run(
                kernel.rewinds.rewind(
                    sid,
                    seq,
                    confirm=True,
                    expected_head_seq=shown["head_seq"],
                    expected_file_state=shown["file_state_token"],
                )
            )
            files.check(before, _names(shown, files.workspace))
        else:
            listed = rig.run(kernel.reviews.pending(sid))
            if not listed["files"]:
                continue
            before = files.snapshot()
            rig.run(
                kernel.reviews.resolve(
                    sid, step[0], listed["through_seq"], listed["file_state_token"]
                )
            )
            if step[0] == "keep":
                assert files.snapshot() == before, "keep never touches a file"
            else:
                files.check(before, _names(listed, files.workspace))
