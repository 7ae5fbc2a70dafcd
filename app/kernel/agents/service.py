"""Sub-agents (Foya's `subagent` manager): child agents started for a parent session, run under
limits, followed to their answer, cancelled with their parent.

`spawn` checks the request (task, agent, the root run's 64 children, its token budget, the
context to pass), stores the run `queued`, tells the parent (`subagent_queued`) and answers; the
run's life from there is `app.kernel.agents.work`'s. Each payload is the run's snapshot; each
change is stored before it is announced.

A user stop of a session (`POST /sessions/{id}/cancel`) and its deletion cancel every run under
it, at any depth (the runs it started, those their children started, …: `app.kernel.agents.table`).
A kernel that stops leaves its records as they are: the next `start` marks the unfinished ones
`interrupted` (`subagent_interrupted`) and runs none of them again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Literal

from app import events as k
from app.broker import Broker
from app.errors import Unavailable
from app.kernel.agents import limits as limit_file
from app.kernel.agents.budget import Budget, budget, exceeded
from app.kernel.agents.definitions import WORKER, Definition, Definitions
from app.kernel.agents.errors import AgentRunFailed, RunNotFound
from app.kernel.agents.limits import MAX_CHILDREN_PER_ROOT, AgentLimits
from app.kernel.agents.package import SpawnRequest, checked, package
from app.kernel.agents.runs import INTERRUPTED, AgentRun, AgentRunSnapshot, RunFiles
from app.kernel.agents.table import CANCELLED, RunTable
from app.kernel.agents.work import BUDGET_SPENT, Work
from app.kernel.ids import iso_now, new_id
from app.kernel.projects import ParentProjectNotFound, Projects
from app.kernel.sessionrow import SessionRow, session_row
from app.kernel.sessions import Sessions
from app.kernel.turns.control import TurnControl
from app.metrics import Metrics
from app.settings import Settings

__all__ = ["BUDGET_SPENT", "CANCELLED", "Agents", "SpawnRequest"]

WAIT_BOUND = 300.0  # seconds a `POST …/agents/wait` waits at most; then it answers as things are
END_WAIT = 15.0  # how long deleting a session waits for its runs to end
PARENT_DELETED = "the parent session was deleted"


class Agents:
    """Every run of every session, its scheduling and its records."""

    def __init__(
        self,
        settings: Settings,
        sessions: Sessions,
        broker: Broker,
        turns: TurnControl,
        projects: Projects,
        definitions: Definitions,
        metrics: Metrics,
    ) -> None:
        self.data_dir = settings.data_dir
        self.sessions = sessions
        self.store = sessions.store
        self.projects = projects
        self.definitions = definitions
        self.files = RunFiles(settings.data_dir)
        self.runs = RunTable()
        self._defaults = limit_file.defaults(settings)
        self._limits = self._defaults
        self.work = Work(
            sessions, broker, turns, self.runs, self.files, lambda: self._limits, metrics
        )
        self.tokens = self.work.tokens
        admission = self.work.admission
        metrics.subagents.labels(state="queued").set_function(lambda: admission.waiting)
        metrics.subagents.labels(state="running").set_function(lambda: admission.running)

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the limits and the records; runs left unfinished become `interrupted`."""
        self._limits = await asyncio.to_thread(limit_file.load, self.data_dir, self._defaults)
        loaded = await asyncio.to_thread(self.files.load)
        for run in loaded:
            if await self.store.get_session(run.parent_session_id) is None:
                await self.files.remove(run)  # its parent was deleted as the kernel went down
                continue
            self.runs.add(run)
        self.tokens.restore(self.runs)
        for run in self.runs:
            run.tokens_used = self.tokens.used(run.root_run_id)
            if run.active:
                run.status, run.error, run.completed_at = "interrupted", INTERRUPTED, iso_now()
                await self.work.changed(run, k.SUBAGENT_INTERRUPTED)
                self.work.ended.labels(status="interrupted").inc()
            run.ended.set()

    async def stop(self) -> None:
        """End every run's task without recording an end: the records stay as they are, and
        the next start marks the unfinished ones interrupted."""
        await self.work.stop()

    # -- definitions and limits ------------------------------------------------------------------

    async def list_definitions(self, project_id: str | None = None) -> list[Definition]:
        """`GET /agents` (no project) and `GET /projects/{id}/agents`."""
        if project_id is not None and not self.projects.exists(project_id):
            raise ParentProjectNotFound(f"project {project_id} not found")
        return await asyncio.to_thread(self.definitions.effective, project_id)

    def limits(self) -> AgentLimits:
        return self._limits.copy()

    async def set_limits(self, limits: AgentLimits) -> AgentLimits:
        """Check, store (atomically), then apply: waiting runs that now fit start."""
        limit_file.check(limits)
        await asyncio.to_thread(limit_file.save, self.data_dir, limits)
        self._limits = limits.copy()
        self.work.admission.admit()
        return self.limits()

    # -- runs --------------------------------------------------------------------------------

    async def spawn(self, parent_id: str, request: SpawnRequest) -> AgentRunSnapshot:
        """Start a child agent for `parent_id`; its run as stored (`queued`)."""
        if self.work.stopping:
            raise Unavailable("the kernel is stopping; start the agent once it is back")
        parent = await self._session(parent_id)
        task = checked(request)
        definition = await self._definition(parent, request.agent_ref.strip())
        root_session, depth = await self._root_of(parent_id)
        history = await self.store.history(parent_id) if request.context.wanted else []
        message = package(task, request.context, history)
        root_run = request.root_run_id.strip() or new_id()
        # From here to the insertion nothing awaits: the cap and the budget hold for
        # concurrent requests too.
        if len(self.runs.tree(root_run)) >= MAX_CHILDREN_PER_ROOT:
            raise AgentRunFailed("internal safety limit reached: too many children per root run")
        if exceeded(self.tokens.used(root_run), self._limits["max_tree_tokens"]):
            raise AgentRunFailed(BUDGET_SPENT)
        run = AgentRun(
            id=new_id(),
            status="queued",
            root_session_id=root_session,
            root_run_id=root_run,
            parent_session_id=parent_id,
            task=task,
            depth=depth + 1,
            created_at=iso_now(),
            parent_tool_call_id=request.parent_tool_call_id,
            agent_ref=definition.ref,
            agent_name=definition.name,
            tokens_used=self.tokens.used(root_run),
        )
        self.runs.add(run)
        try:
            await self.files.save(run)
            await self.work.emit(parent_id, k.SUBAGENT_QUEUED, run.wire())
        except BaseException:
            self.runs.drop(run)
            await self.files.remove(run)
            raise
        self.work.begin(run, definition, message)
        return run.wire()

    async def listing(self, session: str) -> list[AgentRunSnapshot]:
        """The runs `session` started, oldest first."""
        await self._session(session)
        return [r.wire() for r in self.runs.started_by(session)]

    async def get(self, session: str, run_id: str) -> AgentRunSnapshot:
        await self._session(session)
        return self.runs.find(session, run_id).wire()

    async def wait(
        self,
        session: str,
        ids: Iterable[str],
        mode: Literal["all", "any"],
        bound: float | None = WAIT_BOUND,
    ) -> list[AgentRunSnapshot]:
        """The runs once all (or any) of them ended, or once `bound` seconds passed (None: no
        bound, for the model's `wait_agents`, which its turn's cancel ends)."""
        await self._session(session)
        runs = [self.runs.find(session, run_id) for run_id in ids]
        pending = [r for r in runs if not r.ended.is_set()]
        if pending and (mode == "all" or len(pending) == len(runs)):
            waits = [asyncio.ensure_future(r.ended.wait()) for r in pending]
            when = asyncio.ALL_COMPLETED if mode == "all" else asyncio.FIRST_COMPLETED
            try:
                await asyncio.wait(waits, timeout=bound, return_when=when)
            finally:
                for waiting in waits:
                    waiting.cancel()
        return [r.wire() for r in runs]

    async def result(self, run_id: str) -> AgentRunSnapshot:
        """The run once it ended (the `agent` tool's wait)."""
        run = self.runs[run_id]
        await run.ended.wait()
        return run.wire()

    def stop_run(self, run_id: str) -> None:
        """Cancel the run if it has not ended (the `agent` tool's turn was cancelled)."""
        run = self.runs.get(run_id)
        if run is not None:
            self.runs.cancel([run], CANCELLED)

    async def cancel(self, session: str, run_id: str) -> None:
        """Cancel one run of `session` (a run that has ended stays as it is)."""
        await self._session(session)
        self.runs.cancel([self.runs.find(session, run_id)], CANCELLED)

    def cancel_tree(self, session: str) -> None:
        """Cancel every unfinished run under `session` (a user stop of it)."""
        self.runs.cancel(self.runs.under(session), CANCELLED)

    async def end_session(self, session: str) -> None:
        """`session` is being deleted: cancel the runs under it, wait (a while) for them to
        end, and forget the runs it started."""
        under = self.runs.under(session)
        self.runs.cancel(under, PARENT_DELETED)
        workers = [r.worker for r in under if r.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=END_WAIT)
        mine = self.runs.started_by(session)
        for run in mine:
            self.runs.drop(run)
            await self.files.remove(run)
        self.tokens.forget({r.root_run_id for r in mine} - self.runs.root_runs())

    async def budget(self, session: str) -> Budget:
        """`GET …/agent-budget`: the tree `session` belongs to (a child's root run), else the
        latest tree under its root session."""
        row = await self._session(session)
        root_session, _ = await self._root_of(session)
        root_run = _spawned_by_run(row) or ""
        if not root_run:
            trees = self.runs.of_root_session(root_session)
            root_run = trees[-1].root_run_id if trees else root_session
        used = self.tokens.used(root_run)
        return budget(root_session, root_run, used, self._limits["max_tree_tokens"])

    # -- helpers -------------------------------------------------------------------------------

    async def _session(self, session: str) -> SessionRow:
        found = await self.store.get_session(session)
        if found is None:
            raise RunNotFound(f"session {session} not found")
        return session_row(found)

    async def _definition(self, parent: SessionRow, ref: str) -> Definition:
        if not ref:
            return WORKER
        found = await asyncio.to_thread(self.definitions.find, ref, parent.get("project_id"))
        if found is None:
            raise AgentRunFailed(f'unknown agent "{ref}"')
        return found

    async def _root_of(self, session: str) -> tuple[str, int]:
        """The top-level session above `session`, and how many levels up it is."""
        root, depth = session, 0
        while True:
            row = await self.store.get_session(root)
            if row is None or not row.get("parent_id"):
                return root, depth
            root, depth = str(row["parent_id"]), depth + 1


def _spawned_by_run(row: SessionRow) -> str | None:
    raw = row.get("spawned_by_json")
    if not raw:
        return None
    value = json.loads(raw).get("parent_run_id")
    return str(value) if value else None
