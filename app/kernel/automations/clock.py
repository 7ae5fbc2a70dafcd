"""The scheduler's clock: wall time to compare with due times, and a sleep to wait for them.

Injected so tests can drive time (`now()` jumps, sleepers wake) instead of sleeping. The sleep
is until a moment, not for a duration, so a jump of the time between the scheduler reading it
and going to sleep cannot make it oversleep a due time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Protocol


class Clock(Protocol):
    """Wall time and a way to wait for it."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    async def sleep_until(self, moment: dt.datetime) -> None:
        """Return once this clock's time is `moment` or later (cancellable)."""
        ...


class SystemClock:
    """The host's clock. `asyncio.sleep` counts monotonic time, which stops while the machine
    is suspended and ignores wall-clock steps: the scheduler never sleeps longer than a minute
    at a time, so it notices either within a minute."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    async def sleep_until(self, moment: dt.datetime) -> None:
        await asyncio.sleep(max(0.0, (moment - self.now()).total_seconds()))
