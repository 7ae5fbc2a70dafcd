"""Sub-agents (Foya's `subagent` manager): child agents started for a parent session, run under
limits, followed to their answer, cancelled with their parent.

`spawn` checks the request (task, agent, the root run's 64 children, its token budget, the
context to pass), stores the run `queued`, tells the parent (`subagent_queued`) and answers; the
run's own task then waits for a slot (`app.kernel.agents.admission`), becomes `running`
(`subagent_running`), creates the child session (`subagent_started`), runs its turn
(`app.kernel.agents.child`) and ends `completed`, `failed` or `cancelled` (`subagent_completed`,
…). Each payload is the run's snapshot; each change is stored before it is announced. Every
`usage_updated` of a child is charged to its tree (`agent_budget_updated` on the root session;
`agent_budget_exceeded` cancels the tree).

A user stop of a session (`POST /sessions/{id}/cancel`) and its deletion cancel every run under
it, at any depth (the runs it started, those their children started, …). A kernel that stops
leaves its records as they are: the next `start` marks the unfinished ones `interrupted`
(`subagent_interrupted`) and runs none of them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from app import events as k
from app.broker import Broker
from app.errors import FoyaError, NotFound, Unavailable
from app.events import EventDraft
from app.kernel.agents import limits as limit_file
from app.kernel.agents.admission import Admission
from app.kernel.agents.budget import Budget, TreeTokens, budget, exceeded
from app.kernel.agents.child import DEFAULT_TIMEOUT, Children, Outcome
from app.kernel.agents.definitions import WORKER, Definition, Definitions
from app.kernel.agents.errors import AgentRunFailed, RunNotFound
from app.kernel.agents.limits import MAX_CHILDREN_PER_ROOT, AgentLimits
from app.kernel.agents.package import NO_CONTEXT, ContextSelection, package
from app.kernel.agents.runs import INTERRUPTED, AgentRun, AgentRunSnapshot, RunFiles
from app.kernel.ids import iso_now, new_id
from app.kernel.projects import ProjectNotFound, Projects
from app.kernel.sessions import Sessions
from app.kernel.turns.runner import Turns
from app.logs import get_logger
from app.metrics import Metrics
from app.settings import Settings
from app.text.surrogates import has_lone_surrogate

MAX_TASK_CHARS = 256 * 1024
MAX_ID_CHARS = 256
WAIT_BOUND = 300.0  # seconds a `POST …/agents/wait` waits at most; then it answers as things are
END_WAIT = 15.0  # how long deleting a session waits for its runs to end
CANCELLED = "the agent run was cancelled"
BUDGET_SPENT = "the token budget of the agent tree was exceeded"
PARENT_DELETED = "the parent session was deleted"
_ENDED = {
    "completed": k.SUBAGENT_COMPLETED,
    "failed": k.SUBAGENT_FAILED,
    "cancelled": k.SUBAGENT_CANCELLED,
}


@dataclass(frozen=True)
class SpawnRequest:
    """`POST /sessions/{id}/agents` (and the agent tools): what to delegate, and where it hangs."""

    task: str
    agent_ref: str = ""
    root_run_id: str = ""
    parent_tool_call_id: str = ""
    context: ContextSelection = NO_CONTEXT


class Agents:
    """Every run of every session, its scheduling and its records."""

    def __init__(
        self,
        settings: Settings,
        sessions: Sessions,
        broker: Broker,
        turns: Turns,
        projects: Projects,
        definitions: Definitions,
        metrics: Metrics,
    ) -> None:
        self.data_dir = settings.data_dir
        self.sessions = sessions
        self.store = sessions.store
        self.projects = projects
        self.definitions = definitions
        self.children = Children(sessions, broker, turns)
        self.files = RunFiles(settings.data_dir)
        self.tokens = TreeTokens()
        self._defaults = limit_file.defaults(settings)
        self._limits = self._defaults
        self.admission = Admission(lambda: self._limits)
        self.runs: dict[str, AgentRun] = {}
        self._why: dict[str, str] = {}  # why a run was cancelled, by run id
        self._stopping = False
        self._ended = metrics.subagent_runs
        metrics.subagents.labels(state="queued").set_function(lambda: self.admission.waiting)
        metrics.subagents.labels(state="running").set_function(lambda: self.admission.running)
        self.log = get_logger("foya.agents")

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the limits and the records; runs left unfinished become `interrupted`."""
        self._limits = await asyncio.to_thread(limit_file.load, self.data_dir, self._defaults)
        loaded = await asyncio.to_thread(self.files.load)
        for run in loaded:
            if await self.store.get_session(run.parent_session_id) is None:
                await self.files.remove(run)  # its parent was deleted as the kernel went down
                continue
            self.runs[run.id] = run
        self.tokens.restore(self.runs.values())
        for run in list(self.runs.values()):
            run.tokens_used = self.tokens.used(run.root_run_id)
            if run.active:
                run.status, run.error, run.completed_at = "interrupted", INTERRUPTED, iso_now()
                await self._changed(run, k.SUBAGENT_INTERRUPTED)
                self._ended.labels(status="interrupted").inc()
            run.ended.set()

    async def stop(self) -> None:
        """End every run's task without recording an end: the records stay as they are, and
        the next start marks the unfinished ones interrupted. The children's turns are the
        runner's to stop."""
        self._stopping = self.children.stopping = True
        workers = [r.worker for r in self.runs.values() if r.worker and not r.worker.done()]
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    # -- definitions and limits ------------------------------------------------------------------

    async def list_definitions(self, project_id: str | None = None) -> list[Definition]:
        """`GET /agents` (no project) and `GET /projects/{id}/agents`."""
        if project_id is not None and not self.projects.exists(project_id):
            raise ProjectNotFound(f"project {project_id} not found", code="project_not_found")
        return await asyncio.to_thread(self.definitions.effective, project_id)

    def limits(self) -> AgentLimits:
        return self._limits.copy()

    async def set_limits(self, limits: AgentLimits) -> AgentLimits:
        """Check, store (atomically), then apply: waiting runs that now fit start."""
        limit_file.check(limits)
        await asyncio.to_thread(limit_file.save, self.data_dir, limits)
        self._limits = limits.copy()
        self.admission.admit()
        return self.limits()

    # -- runs --------------------------------------------------------------------------------

    async def spawn(self, parent_id: str, request: SpawnRequest) -> AgentRunSnapshot:
        """Start a child agent for `parent_id`; its run as stored (`queued`)."""
        if self._stopping:
            raise Unavailable("the kernel is stopping; start the agent once it is back")
        parent = await self._session(parent_id)
        task = _checked(request)
        definition = await self._definition(parent, request.agent_ref.strip())
        root_session, depth = await self._root_of(parent_id)
        history = await self.store.history(parent_id) if request.context.wanted else []
        message = package(task, request.context, history)
        root_run = request.root_run_id.strip() or new_id()
        # From here to the insertion nothing awaits: the cap and the budget hold for
        # concurrent requests too.
        if sum(1 for r in self.runs.values() if r.root_run_id == root_run) >= MAX_CHILDREN_PER_ROOT:
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
        self.runs[run.id] = run
        try:
            await self.files.save(run)
            await self._emit(parent_id, k.SUBAGENT_QUEUED, run.wire())
        except BaseException:
            del self.runs[run.id]
            await self.files.remove(run)
            raise
        run.worker = asyncio.create_task(
            self._work(run, definition, message), name=f"agent:{run.id}"
        )
        return run.wire()

    async def listing(self, session: str) -> list[AgentRunSnapshot]:
        """The runs `session` started, oldest first."""
        await self._session(session)
        return [r.wire() for r in self.runs.values() if r.parent_session_id == session]

    async def get(self, session: str, run_id: str) -> AgentRunSnapshot:
        await self._session(session)
        return self._run(session, run_id).wire()

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
        runs = [self._run(session, run_id) for run_id in ids]
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
            self._cancel([run], CANCELLED)

    async def cancel(self, session: str, run_id: str) -> None:
        """Cancel one run of `session` (a run that has ended stays as it is)."""
        await self._session(session)
        self._cancel([self._run(session, run_id)], CANCELLED)

    def cancel_tree(self, session: str) -> None:
        """Cancel every unfinished run under `session` (a user stop of it)."""
        self._cancel(self._under(session), CANCELLED)

    async def end_session(self, session: str) -> None:
        """`session` is being deleted: cancel the runs under it, wait (a while) for them to
        end, and forget the runs it started."""
        under = self._under(session)
        self._cancel(under, PARENT_DELETED)
        workers = [r.worker for r in under if r.worker is not None]
        if workers:
            await asyncio.wait(workers, timeout=END_WAIT)
        mine = [r for r in self.runs.values() if r.parent_session_id == session]
        for run in mine:
            del self.runs[run.id]
            await self.files.remove(run)
        remaining = {r.root_run_id for r in self.runs.values()}
        self.tokens.forget({r.root_run_id for r in mine} - remaining)

    async def budget(self, session: str) -> Budget:
        """`GET …/agent-budget`: the tree `session` belongs to (a child's root run), else the
        latest tree under its root session."""
        row = await self._session(session)
        root_session, _ = await self._root_of(session)
        root_run = _spawned_by_run(row) or ""
        if not root_run:
            trees = [r for r in self.runs.values() if r.root_session_id == root_session]
            root_run = trees[-1].root_run_id if trees else root_session
        used = self.tokens.used(root_run)
        return budget(root_session, root_run, used, self._limits["max_tree_tokens"])

    # -- a run's life ----------------------------------------------------------------------------

    async def _work(self, run: AgentRun, definition: Definition, message: str) -> None:
        admitted = False
        try:
            await self.admission.enter(run.root_run_id)
            admitted = True
            run.status, run.started_at = "running", iso_now()
            await self._changed(run, k.SUBAGENT_RUNNING)
            parent = await self.sessions.row(run.parent_session_id)
            run.child_session_id = await self.children.create(parent, run, definition)
            await self._changed(run, k.SUBAGENT_STARTED)
            timeout = definition.timeout_seconds or DEFAULT_TIMEOUT
            outcome = await self.children.run(
                run.child_session_id, message, timeout, lambda tokens: self._charge(run, tokens)
            )
        except asyncio.CancelledError:
            if self._stopping:
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            outcome = Outcome("cancelled", error=self._why.get(run.id, CANCELLED))
        except FoyaError as exc:
            outcome = Outcome("failed", error=exc.message)
        except Exception as exc:
            self.log.exception("agent run failed", run=run.id)
            outcome = Outcome("failed", error=f"internal error ({type(exc).__name__})")
        finally:
            if admitted:
                self.admission.leave(run.root_run_id)
        if run.child_session_id and outcome.status == "cancelled":
            self.cancel_tree(run.child_session_id)  # what the child itself started
        await self._finish(run, outcome)

    async def _finish(self, run: AgentRun, outcome: Outcome) -> None:
        run.status, run.output, run.error = outcome.status, outcome.output, outcome.error
        run.completed_at = iso_now()
        self._why.pop(run.id, None)
        try:
            await self._changed(run, _ENDED[outcome.status])
        except FoyaError as exc:  # a full disk: the end is known here, if not to the parent
            self.log.error("agent run end not announced", run=run.id, error=exc.message)
        finally:
            run.ended.set()
            self._ended.labels(status=outcome.status).inc()

    async def _charge(self, run: AgentRun, tokens: int) -> None:
        """A child's model request used `tokens`: charge its tree, tell the root session, and
        cancel the tree once its budget is spent."""
        if tokens <= 0:
            return
        total = self.tokens.charge(run.root_run_id, tokens)
        tree = [r for r in self.runs.values() if r.root_run_id == run.root_run_id]
        for member in tree:
            member.tokens_used = total
        await self._save(run)
        state = budget(run.root_session_id, run.root_run_id, total, self._limits["max_tree_tokens"])
        await self._emit(run.root_session_id, k.AGENT_BUDGET_UPDATED, state)
        if state["exceeded"]:
            await self._emit(run.root_session_id, k.AGENT_BUDGET_EXCEEDED, state)
            self._cancel(tree, BUDGET_SPENT)

    # -- helpers -------------------------------------------------------------------------------

    def _cancel(self, runs: Iterable[AgentRun], why: str) -> None:
        """Cancel each run's task once (a second cancel would cut its clean-up short)."""
        for run in runs:
            if run.active and run.worker and not run.worker.done() and run.id not in self._why:
                self._why[run.id] = why
                run.worker.cancel()

    def _under(self, session: str) -> list[AgentRun]:
        """Every run below `session`: those it started, those their children started, …"""
        found: dict[str, AgentRun] = {}
        parents = {session}
        while parents:
            more = [
                r
                for r in self.runs.values()
                if r.parent_session_id in parents and r.id not in found
            ]
            found.update((r.id, r) for r in more)
            parents = {r.child_session_id for r in more if r.child_session_id}
        return list(found.values())

    def _run(self, session: str, run_id: str) -> AgentRun:
        run = self.runs.get(run_id)
        if run is None or run.parent_session_id != session:
            raise RunNotFound(f"agent run {run_id} not found")
        return run

    async def _session(self, session: str) -> dict[str, Any]:
        found = await self.store.get_session(session)
        if found is None:
            raise RunNotFound(f"session {session} not found")
        return found

    async def _definition(self, parent: dict[str, Any], ref: str) -> Definition:
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

    async def _changed(self, run: AgentRun, kind: str) -> None:
        """Store the run's record, then tell its parent."""
        await self._save(run)
        await self._emit(run.parent_session_id, kind, run.wire())

    async def _save(self, run: AgentRun) -> None:
        if self.runs.get(run.id) is not run:
            return  # forgotten with its deleted parent: no record comes back
        try:
            await self.files.save(run)
        except OSError as exc:  # the run goes on; its record is as of its last write
            self.log.error("agent run record not written", run=run.id, error=str(exc))

    async def _emit(self, session: str, kind: str, payload: object) -> None:
        with contextlib.suppress(NotFound):  # the session is gone: nobody to tell
            await self.sessions.facts.emit(EventDraft(session, kind, payload))


def _checked(request: SpawnRequest) -> str:
    """The task, trimmed; `AgentRunFailed` for input Foya's routes would choke on later."""
    task = request.task.strip()
    if not task:
        raise AgentRunFailed("task is required")
    if len(task) > MAX_TASK_CHARS:
        raise AgentRunFailed(f"task is longer than {MAX_TASK_CHARS} characters")
    ids = (request.agent_ref, request.root_run_id, request.parent_tool_call_id)
    if any(len(value) > MAX_ID_CHARS for value in ids):
        raise AgentRunFailed(
            f"agent_ref, root_run_id and parent_tool_call_id: at most {MAX_ID_CHARS} characters"
        )
    if has_lone_surrogate([task, *ids]):
        raise AgentRunFailed("the request holds text that is not valid Unicode")
    return task


def _spawned_by_run(row: dict[str, Any]) -> str | None:
    raw = row.get("spawned_by_json")
    if not raw:
        return None
    value = json.loads(raw).get("parent_run_id")
    return str(value) if value else None
