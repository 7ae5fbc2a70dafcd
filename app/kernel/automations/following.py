"""The runs going on: at most one per automation, each a task that follows its run's session
until the first turn ends, then records how it ended.

The service decides when a run starts (`run` now, or a scheduler pass); this module starts the
task, counts the outcome (`automation_runs`) and hands the run's fields back through `record`,
which writes them only if the automation still exists.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from app.broker import Broker
from app.errors import FoyaError
from app.kernel.automations import runs
from app.kernel.automations.store import Automation, AutomationInput
from app.kernel.sessions import Sessions
from app.logs import get_logger
from app.metrics import Metrics

if TYPE_CHECKING:
    from app.kernel.turns.control import TurnControl

#: Stores a run's fields on its automation: (automation id, **fields of `Automation`).
Record = Callable[..., Awaitable[None]]


class Following:
    """The tasks of the runs going on, by automation id."""

    def __init__(
        self,
        sessions: Sessions,
        turns: TurnControl,
        broker: Broker,
        metrics: Metrics,
        unanswerable: runs.Unanswerable,
        record: Record,
    ) -> None:
        self.sessions = sessions
        self.turns = turns
        self.broker = broker
        self.runs = metrics.automation_runs
        self.unanswerable = unanswerable
        self.record = record
        self.log = get_logger("foya.automations")
        self._running: dict[str, asyncio.Task[None]] = {}

    def __contains__(self, automation_id: object) -> bool:
        return automation_id in self._running

    def skipped(self) -> None:
        """Count a due time that came while the automation's run was still going."""
        self.runs.labels(outcome="skipped").inc()

    def start(self, item: Automation, now: dt.datetime) -> Automation:
        """Start a run of `item` (none is going); `item` as a running one."""
        task = asyncio.create_task(self._run(item.id, item.spec), name=f"automation:{item.id}")
        self._running[item.id] = task
        self.runs.labels(outcome="started").inc()
        return dataclasses.replace(
            item, last_status="running", last_error="", last_run_at=now, updated_at=now
        )

    def forget(self, automation_id: str) -> None:
        """Stop following the automation's run, if one is going (its session goes on)."""
        run = self._running.pop(automation_id, None)
        if run is not None:
            run.cancel()

    async def cancel_all(self) -> bool:
        """Cancel every run still followed and wait for them; whether there was any."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return bool(tasks)

    async def _run(self, automation_id: str, spec: AutomationInput) -> None:
        session = ""

        async def opened(session_id: str) -> None:
            nonlocal session
            session = session_id
            await self.record(automation_id, last_session_id=session_id)

        outcome = runs.Outcome("cancelled")
        try:
            outcome = await runs.execute(
                self.sessions, self.turns, self.broker, spec, opened, self.unanswerable
            )
        except FoyaError as exc:
            outcome = runs.Outcome("failed", exc.message)
        except Exception as exc:
            self.log.exception("automation run failed", automation=automation_id)
            outcome = runs.Outcome("failed", f"internal error: {type(exc).__name__}")
        finally:
            if self._running.get(automation_id) is asyncio.current_task():
                del self._running[automation_id]
            self.runs.labels(outcome=outcome.status).inc()
            await self.record(
                automation_id,
                last_status=outcome.status,
                last_error=outcome.error,
                last_session_id=session,
            )
