"""Which queued runs may start: at most `max_global_concurrency` running in the kernel and
`max_per_root` under one root run.

Waiting runs are admitted in the order they asked, skipping one whose root is full (so one busy
tree does not hold back the others). A change of limits takes effect at once for waiting runs;
lowering a limit below what is running stops nothing, the next admissions wait for room.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.kernel.agents.limits import AgentLimits


@dataclass
class _Waiting:
    root: str
    admitted: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Admission:
    """Running counts, and the runs waiting for a slot."""

    def __init__(self, limits: Callable[[], AgentLimits]) -> None:
        self._limits = limits
        self._waiting: deque[_Waiting] = deque()
        self.running = 0
        self._per_root: Counter[str] = Counter()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def enter(self, root: str) -> None:
        """Take a slot under `root`, waiting for one if need be. A cancel while waiting takes
        nothing (and gives back a slot granted at that very moment)."""
        ticket = _Waiting(root)
        self._waiting.append(ticket)
        self.admit()
        try:
            await ticket.admitted
        except asyncio.CancelledError:
            if ticket.admitted.done() and not ticket.admitted.cancelled():
                self.leave(root)
            else:
                self._waiting.remove(ticket)
            raise

    def leave(self, root: str) -> None:
        """Give back a slot of `root`, and admit whoever fits now."""
        self.running -= 1
        self._per_root[root] -= 1
        if self._per_root[root] <= 0:
            del self._per_root[root]
        self.admit()

    def admit(self) -> None:
        """Admit waiting runs, in order, while they fit (also after the limits changed)."""
        for ticket in list(self._waiting):
            if ticket.admitted.done():
                continue  # cancelled: its waiter takes it off the queue
            if self._fits(ticket.root):
                self._waiting.remove(ticket)
                self._take(ticket.root)
                ticket.admitted.set_result(None)

    def _fits(self, root: str) -> bool:
        limits = self._limits()
        return (
            self.running < limits["max_global_concurrency"]
            and self._per_root[root] < limits["max_per_root"]
        )

    def _take(self, root: str) -> None:
        self.running += 1
        self._per_root[root] += 1
