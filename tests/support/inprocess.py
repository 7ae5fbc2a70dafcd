"""A real kernel in the test's own process, for kernel rules that need no HTTP or subprocess.

The kernel runs on an event loop in a thread of its own (the kernel's store thread and its
tasks behave as under `foya serve`); a test calls it with `run(coroutine)`. It talks to the
fake OpenAI-compatible provider through one connection. Tests that need the wire (statuses,
SSE framing, auth, crash and restart) keep using a real `foya serve` (streams_helpers).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app import events as k
from app.events import Event
from app.kernel import Kernel
from app.kernel.automations import Clock
from app.kernel.emit import topic
from app.kernel.turns.inputs import TurnInput
from app.metrics import Metrics
from app.settings import Settings
from support.fake_provider import API_KEY, BOUND, FakeProvider

T = TypeVar("T")


@dataclass
class InProcess:
    """A started kernel, its loop and a connection to the fake provider."""

    kernel: Kernel
    fake: FakeProvider
    loop: asyncio.AbstractEventLoop
    connection: str = ""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the kernel's loop and wait for its result (at most `BOUND`)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(BOUND)


@contextlib.contextmanager
def inprocess_kernel(
    data_dir: Path,
    *,
    clock: Clock | None = None,
    fake: FakeProvider | None = None,
    **settings: Any,
) -> Iterator[InProcess]:
    """A kernel on `data_dir` with the fake provider connected; shut down afterwards.

    `clock` drives the kernel's automations scheduler. `fake` is a provider the caller keeps
    running across kernels (one is started otherwise); a restart on the same `data_dir` then
    finds the connection made before and uses it. `settings` are further `Settings` fields.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with contextlib.ExitStack() as stack:
            if fake is None:
                fake = stack.enter_context(FakeProvider.running())
            kernel = Kernel(Settings(data_dir=data_dir, **settings), Metrics(), clock=clock)
            rig = InProcess(kernel, fake, loop)
            rig.run(rig.kernel.start())
            try:
                rig.connection = connect(rig)
                yield rig
            finally:
                rig.run(rig.kernel.begin_shutdown())
                rig.run(rig.kernel.close())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(BOUND)
        loop.close()


def connect(rig: InProcess) -> str:
    """The ID of a connection to `rig.fake`: the one already stored, or a new one."""
    for connection in rig.kernel.connections.all():
        if connection["base_url"] == rig.fake.base_url:
            return str(connection["id"])
    body = {"name": "fake", "base_url": rig.fake.base_url, "api_key": API_KEY}
    return str(rig.run(rig.kernel.connections.create(body))["id"])


async def turn_events(rig: InProcess, session: str, message: str) -> list[Event]:
    """Submit a turn and collect the session's stored events up to its `turn_complete`."""
    seen: list[Event] = []
    with rig.kernel.broker.subscribe(topic(session)) as sub:
        await rig.kernel.turns.submit(session, TurnInput(message=message))
        while not seen or seen[-1].kind != k.TURN_COMPLETE:
            event = await asyncio.wait_for(sub.get(), BOUND)
            assert event is not None, "the stream ended"
            if event.seq:
                seen.append(event)
    return seen


def turn(rig: InProcess, session: str, message: str = "go") -> list[Event]:
    """Run a turn to its `turn_complete` and return its stored events."""
    return rig.run(turn_events(rig, session, message))


def tool_messages(events: list[Event]) -> list[dict[str, Any]]:
    """The payloads of the tool messages among `events`."""
    return [
        dict(e.payload)
        for e in events
        if e.kind == k.MESSAGE_END and e.payload.get("role") == "tool"
    ]
