"""The life of one agent run, once it is stored `queued`: its task waits for a slot
(`app.kernel.agents.admission`), becomes `running` (`subagent_running`), creates the child
session (`subagent_started`), runs its turn (`app.kernel.agents.child`) and ends `completed`,
`failed` or `cancelled` (`subagent_completed`, …). Each change is stored before it is announced.
Every `usage_updated` of a child is charged to its tree (`agent_budget_updated` on the root
session; `agent_budget_exceeded` cancels the tree).

A kernel that stops ends the tasks without recording an end: the records stay as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

from app import events as k
from app.broker import Broker
from app.errors import FoyaError, NotFound
from app.events import EventDraft, Kind, Record
from app.kernel.agents.admission import Admission
from app.kernel.agents.budget import TreeTokens, budget
from app.kernel.agents.child import DEFAULT_TIMEOUT, Children, Outcome
from app.kernel.agents.definitions import Definition
from app.kernel.agents.limits import AgentLimits
from app.kernel.agents.runs import AgentRun, RunFiles
from app.kernel.agents.table import CANCELLED, RunTable
from app.kernel.ids import iso_now
from app.kernel.sessions import Sessions
from app.kernel.turns.control import TurnControl
from app.logs import get_logger
from app.metrics import Metrics

BUDGET_SPENT = "the token budget of the agent tree was exceeded"
P = TypeVar("P")  # an event kind's payload type
_ENDED = {
    "completed": k.SUBAGENT_COMPLETED,
    "failed": k.SUBAGENT_FAILED,
    "cancelled": k.SUBAGENT_CANCELLED,
}


class Work:
    """Runs each run's task, stores and announces its changes, charges its tree's tokens."""

    def __init__(
        self,
        sessions: Sessions,
        broker: Broker,
        turns: TurnControl,
        table: RunTable,
        files: RunFiles,
        limits: Callable[[], AgentLimits],
        metrics: Metrics,
    ) -> None:
        self.sessions = sessions
        self.table = table
        self.files = files
        self.tokens = TreeTokens()
        self.limits = limits  # the limits in force now (they change with a PUT)
        self.children = Children(sessions, broker, turns)
        self.admission = Admission(limits)
        self.stopping = False
        self.ended = metrics.subagent_runs
        self.log = get_logger("foya.agents")

    def begin(self, run: AgentRun, definition: Definition, message: str) -> None:
        """Start the task of a run just stored `queued`."""
        run.worker = asyncio.create_task(
            self._life(run, definition, message), name=f"agent:{run.id}"
        )

    async def stop(self) -> None:
        """End every run's task without recording an end; the children's turns are the
        runner's to stop."""
        self.stopping = self.children.stopping = True
        workers = [r.worker for r in self.table if r.worker and not r.worker.done()]
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _life(self, run: AgentRun, definition: Definition, message: str) -> None:
        admitted = False
        try:
            await self.admission.enter(run.root_run_id)
            admitted = True
            run.status, run.started_at = "running", iso_now()
            await self.changed(run, k.SUBAGENT_RUNNING)
            parent = await self.sessions.row(run.parent_session_id)
            run.child_session_id = await self.children.create(parent, run, definition)
            await self.changed(run, k.SUBAGENT_STARTED)
            timeout = definition.timeout_seconds or DEFAULT_TIMEOUT
            outcome = await self.children.run(
                run.child_session_id, message, timeout, lambda tokens: self._charge(run, tokens)
            )
        except asyncio.CancelledError:
            if self.stopping:
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            outcome = Outcome("cancelled", error=self.table.why(run))
        except FoyaError as exc:
            outcome = Outcome("failed", error=exc.message)
        except Exception as exc:
            self.log.exception("agent run failed", run=run.id)
            outcome = Outcome("failed", error=f"internal error ({type(exc).__name__})")
        finally:
            if admitted:
                self.admission.leave(run.root_run_id)
        if run.child_session_id and outcome.status == "cancelled":
            # What the child itself started.
            self.table.cancel(self.table.under(run.child_session_id), CANCELLED)
        await self._finish(run, outcome)

    async def _finish(self, run: AgentRun, outcome: Outcome) -> None:
        run.status, run.output, run.error = outcome.status, outcome.output, outcome.error
        run.completed_at = iso_now()
        self.table.settled(run)
        try:
            await self.changed(run, _ENDED[outcome.status])
        except FoyaError as exc:  # a full disk: the end is known here, if not to the parent
            self.log.error("agent run end not announced", run=run.id, error=exc.message)
        finally:
            run.ended.set()
            self.ended.labels(status=outcome.status).inc()

    async def _charge(self, run: AgentRun, tokens: int) -> None:
        """A child's model request used `tokens`: charge its tree, tell the root session, and
        cancel the tree once its budget is spent."""
        if tokens <= 0:
            return
        total = self.tokens.charge(run.root_run_id, tokens)
        tree = self.table.tree(run.root_run_id)
        for member in tree:
            member.tokens_used = total
        await self.save(run)
        cap = self.limits()["max_tree_tokens"]
        state = budget(run.root_session_id, run.root_run_id, total, cap)
        await self.emit(run.root_session_id, k.AGENT_BUDGET_UPDATED, state)
        if state["exceeded"]:
            await self.emit(run.root_session_id, k.AGENT_BUDGET_EXCEEDED, state)
            self.table.cancel(tree, BUDGET_SPENT)

    async def changed(self, run: AgentRun, kind: Kind[Record]) -> None:
        """Store the run's record, then tell its parent."""
        await self.save(run)
        await self.emit(run.parent_session_id, kind, run.wire())

    async def save(self, run: AgentRun) -> None:
        if not self.table.holds(run):
            return  # forgotten with its deleted parent: no record comes back
        try:
            await self.files.save(run)
        except OSError as exc:  # the run goes on; its record is as of its last write
            self.log.error("agent run record not written", run=run.id, error=str(exc))

    async def emit(self, session: str, kind: Kind[P], payload: P) -> None:
        with contextlib.suppress(NotFound):  # the session is gone: nobody to tell
            await self.sessions.facts.emit(EventDraft(session, kind, payload))
