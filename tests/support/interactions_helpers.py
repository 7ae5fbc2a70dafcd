"""Helpers for the in-process interaction tests (questions, browser actions): a fresh session
on the fake provider and a watch over its stored events as they come."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

from app.events import Event
from app.kernel.emit import topic
from support.fake_provider import BOUND
from support.inprocess import InProcess, tool_messages

_models = itertools.count()


class Watch:
    """A session's stored events as they come, read on the kernel's loop."""

    def __init__(self, rig: InProcess, sub: Any) -> None:
        self.rig, self.sub = rig, sub
        self.events: list[Event] = []

    def until(self, kind: str) -> Event:
        """The next event of `kind` (every stored event before it is kept in `events`)."""

        async def read() -> Event:
            while True:
                event: Event | None = await asyncio.wait_for(self.sub.get(), BOUND)
                assert event is not None, "the stream ended"
                if event.seq:
                    self.events.append(event)
                    if event.kind == kind:
                        return event

        return self.rig.run(read())

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def only(self, kind: str) -> Any:
        """The payload of the one event of `kind`."""
        (found,) = [e.payload for e in self.events if e.kind == kind]
        return found

    def tool_messages(self) -> list[dict[str, Any]]:
        return tool_messages(self.events)

    def tool_message(self) -> dict[str, Any]:
        """The one tool message."""
        (message,) = self.tool_messages()
        return message


@contextlib.contextmanager
def watch(rig: InProcess, session: str) -> Iterator[Watch]:
    manager = rig.kernel.broker.subscribe(topic(session))

    async def enter() -> Any:
        return manager.__enter__()

    async def leave() -> None:
        manager.__exit__(None, None, None)

    sub = rig.run(enter())
    try:
        yield Watch(rig, sub)
    finally:
        rig.run(leave())


def new_session(rig: InProcess, approval_mode: str = "manual") -> dict[str, Any]:
    """A session on a model of its own, so that each test scripts the fake provider apart."""
    fields = {"connection_id": rig.connection, "model": f"interact-{next(_models)}"}
    session = rig.run(rig.kernel.sessions.create({**fields, "approval_mode": approval_mode}))
    # A title of its own: no title request reaches the fake provider.
    return dict(rig.run(rig.kernel.sessions.update(session["id"], {"title": "interacts"})))
