"""The tool table a turn reads: the kernel's own tools, fixed once the kernel is built, and the
tools of dynamic sources (an MCP server's come and go while the kernel runs).

A source owns its tools and replaces its whole mapping when they change, so nobody edits a
dictionary another part reads. A name of the kernel's own tools wins over a source's tool of
the same name. The table also keeps, per session, the deferred tools `tool_search` activated
(offered from the session's next step on, for as long as the kernel runs).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Protocol

from app.tools import Tool


class ToolSource(Protocol):
    """Tools that change while the kernel runs; `tools` is a snapshot, replaced, never edited."""

    @property
    def tools(self) -> Mapping[str, Tool]: ...


class ToolTable(Mapping[str, Tool]):
    """Every tool a turn may be offered, by name: `static` first, then each source's."""

    def __init__(
        self,
        static: Mapping[str, Tool],
        sources: Sequence[ToolSource] = (),
        readers: Sequence[Callable[[ToolTable], Tool]] = (),
    ) -> None:
        """`readers` build the tools that read the table itself (`tool_search`)."""
        self.static: dict[str, Tool] = dict(static)
        for build in readers:
            tool = build(self)
            self.static[tool.name] = tool
        self.sources = tuple(sources)
        self.activated: dict[str, set[str]] = {}  # session → deferred tools tool_search found

    def __getitem__(self, name: str) -> Tool:
        tool = self.static.get(name)
        if tool is not None:
            return tool
        for source in self.sources:
            tool = source.tools.get(name)
            if tool is not None:
                return tool
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        seen = set(self.static)
        yield from self.static
        for source in self.sources:
            for name in list(source.tools):
                if name not in seen:
                    seen.add(name)
                    yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def names(self) -> Collection[str]:
        """The names of the tools offered now (a skill's `required-tools` are checked in them)."""
        return list(self)

    def activate(self, session: str, names: Collection[str]) -> None:
        """Offer these deferred tools to `session` from its next step on."""
        self.activated.setdefault(session, set()).update(names)

    def active(self, session: str) -> Collection[str]:
        """The deferred tools `tool_search` activated for `session`."""
        return self.activated.get(session, set())

    def forget(self, session: str) -> None:
        """The session is gone: drop the deferred tools it found."""
        self.activated.pop(session, None)
