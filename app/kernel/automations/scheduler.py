"""The scheduler's loop: a pass, then sleep until the next due time or a change.

It sleeps until the earliest due time, but at most `MAX_NAP` (see app.kernel.automations.clock
for why), and `wake()` (any change of the automations) ends a sleep early. What a pass does is
the service's rule (`Automations._fire_due`); this module only decides when passes run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

from app.kernel.automations.clock import Clock
from app.kernel.lifecycle import cancel_and_wait
from app.logs import get_logger

MAX_NAP = 60.0  # seconds the scheduler sleeps at most before it looks at the clock again


class Scheduler:
    """Runs `run_pass(now)` whenever something may be due; `next_due()` names the earliest
    due time (None: nothing scheduled)."""

    def __init__(
        self,
        clock: Clock,
        run_pass: Callable[[dt.datetime], Awaitable[None]],
        next_due: Callable[[], dt.datetime | None],
    ) -> None:
        self.clock = clock
        self.run_pass = run_pass
        self.next_due = next_due
        self.log = get_logger("foya.automations")
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="automations")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def wake(self) -> None:
        """Ask for a pass now (never waits; wakes coalesce)."""
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()  # a change from now on asks for another pass
            now = self.clock.now()
            try:
                await self.run_pass(now)
            except Exception:
                self.log.exception("automation pass failed")
            due = self.next_due()
            latest = now + dt.timedelta(seconds=MAX_NAP)
            await self._nap(latest if due is None else min(due, latest))

    async def _nap(self, until: dt.datetime) -> None:
        """Sleep until `until` by the clock, or until a change wakes the scheduler."""
        sleeping = asyncio.ensure_future(self.clock.sleep_until(until))
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((sleeping, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            woken.cancel()
