"""A capability as the kernel's life sees it, and the runner of the one ordered list of them.

Every capability declares, in one `Capability` record, what it plugs into the turn (its tools,
its limits on a session's tools, what it adds to the system prompt) and what it does at each
moment of the kernel's life. `Lifecycle` runs those steps: `start` in the list's order, and
every teardown (`shutdown`, `close`, and the three steps of deleting a session) in reverse, so
teardown always mirrors setup. The list is read again for each phase: a capability built on
first use joins it once it exists, and has nothing to stop before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from app.kernel.turns.ports import Instructions
    from app.kernel.turns.tooling import ToolPolicy
    from app.tools import Tool

Step = Callable[[], Awaitable[None]]
#: A capability's tools, read once, when the tool table is built (with the turn core).
ToolLoader = Callable[[], "Mapping[str, Tool]"]
SessionStep = Callable[[str], Awaitable[None]]
Phase = Literal["start", "shutdown", "close", "end_session", "removed", "forget"]
#: Told `(phase, capability name)` as each step begins: how a test watches the order.
Observer = Callable[[Phase, str], None]


def no_tools() -> Mapping[str, Tool]:
    return {}


@dataclass(frozen=True)
class Capability:
    """One capability. `start` runs in list order; `shutdown` (end long-lived work so streams
    close themselves) and `close` (release what start opened) in reverse. Deleting a session
    runs `end_session` in reverse order before the session is removed, `removed` once it is,
    and `forget` whatever the removal's outcome."""

    name: str
    tools: ToolLoader = no_tools
    policies: Sequence[ToolPolicy] = ()
    instructions: Sequence[Instructions] = ()
    start: Step | None = None
    shutdown: Step | None = None
    close: Step | None = None
    end_session: SessionStep | None = None
    removed: SessionStep | None = None
    forget: SessionStep | None = None


def blocking(work: Callable[[], object]) -> Step:
    """A blocking start step as a `Step` (nothing is served before start returns)."""

    async def step() -> None:
        work()

    return step


def _nobody(phase: Phase, name: str) -> None:
    return None


_STEPS: dict[str, Callable[[Capability], Step | None]] = {
    "start": lambda c: c.start,
    "shutdown": lambda c: c.shutdown,
    "close": lambda c: c.close,
}
_SESSION_STEPS: dict[str, Callable[[Capability], SessionStep | None]] = {
    "end_session": lambda c: c.end_session,
    "removed": lambda c: c.removed,
    "forget": lambda c: c.forget,
}


class Lifecycle:
    """Runs the capabilities' steps, phase by phase, in the declared order or its reverse."""

    def __init__(
        self, capabilities: Callable[[], list[Capability]], observe: Observer | None = None
    ) -> None:
        """`capabilities` gives the ordered list as it is now (lazy ones join once built)."""
        self.capabilities = capabilities
        self.observe = observe or _nobody

    def _order(self, phase: Phase) -> list[Capability]:
        order = self.capabilities()
        return order if phase == "start" else order[::-1]  # teardown mirrors setup

    async def run(self, phase: Literal["start", "shutdown", "close"]) -> None:
        """Every capability's step of `phase` (start in order, the others in reverse)."""
        for capability in self._order(phase):
            step = _STEPS[phase](capability)
            if step is not None:
                self.observe(phase, capability.name)
                await step()

    async def run_session(
        self, phase: Literal["end_session", "removed", "forget"], session: str
    ) -> None:
        """Every capability's step of `phase` for `session`, in reverse order."""
        for capability in self._order(phase):
            step = _SESSION_STEPS[phase](capability)
            if step is not None:
                self.observe(phase, capability.name)
                await step(session)
