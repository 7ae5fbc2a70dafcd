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

from fake_provider import API_KEY, BOUND, FakeProvider

from app.kernel import Kernel
from app.metrics import Metrics
from app.settings import Settings

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
def inprocess_kernel(data_dir: Path) -> Iterator[InProcess]:
    """A kernel on `data_dir` with the fake provider connected; shut down afterwards."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with FakeProvider.running() as fake:
            rig = InProcess(Kernel(Settings(data_dir=data_dir), Metrics()), fake, loop)
            rig.run(rig.kernel.start())
            try:
                body = {"name": "fake", "base_url": fake.base_url, "api_key": API_KEY}
                rig.connection = rig.run(rig.kernel.connections.create(body))["id"]
                yield rig
            finally:
                rig.run(rig.kernel.begin_shutdown())
                rig.run(rig.kernel.close())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(BOUND)
        loop.close()
