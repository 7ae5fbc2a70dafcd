"""Turns: one turn at a time per session, with its queue, compaction and cancel.

A session's state (`app.kernel.turns.activity`) says what it is doing. A busy session (`turn`) has
one runner task: it runs a turn (`app.kernel.turns.turn`), then the next queued input, until the
queue is empty or a cancel pauses it; the moment it has nothing left to run the session is idle
again, before the task itself winds down. A compaction (`compaction`) or a rewind or review undo
(`exclusive`) holds the session the same way; input arriving meanwhile is queued and starts when
the session is idle again.

Cancellation is cooperative: `cancel` records the reason and cancels the turn task; the turn
saves the partial reply with `turn_status` cancelled and emits `turn_complete{cancelled}`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from app import events as k
from app.errors import Conflict
from app.events import (
    Checkpoint,
    EventDraft,
    Message,
    QueueItem,
    QueueUpdated,
    TurnCancelRequested,
)
from app.files import ProtectedPaths
from app.kernel.approvals import Approvals
from app.kernel.binding import rebinding
from app.kernel.hooks import Hooks
from app.kernel.ids import iso_now
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
from app.kernel.turns import inputs
from app.kernel.turns.activity import Activities, Activity
from app.kernel.turns.compaction import Compacted, Compactor, compacted
from app.kernel.turns.inputs import Accepted, TurnAccepted, TurnInput
from app.kernel.turns.queue import Queues, as_input
from app.kernel.turns.steps import Run, Steps
from app.kernel.turns.titles import Titles
from app.kernel.turns.tooling import ToolRunner
from app.kernel.turns.turn import Answered, TurnCycle
from app.kernel.usercontext.prompt import PromptContext
from app.logs import get_logger
from app.metrics import Metrics
from app.store import Store
from app.tools import Tool

STOP_GRACE = 3.0

#: Cancel reasons that end the runner (the others, like queue_dispatch, only end one turn).
_ENDING = ("user_stop", "session_deleted", "context_cancelled")


async def _unanswered(session: str, run_id: str, answer: str) -> None:
    return None


class CompactionCancelled(Conflict):
    code = "compaction_cancelled"


class ToolNotRunning(Conflict):
    code = "tool_not_running"


class Turns:
    """Runners of all busy sessions."""

    def __init__(
        self,
        sessions: Sessions,
        store: Store,
        providers: Providers,
        approvals: Approvals,
        queues: Queues,
        tools: dict[str, Tool],
        data_dir: Path,
        metrics: Metrics,
        prompt: PromptContext | None = None,
        *,
        hooks: Hooks,
        protected: ProtectedPaths | None = None,
        turn_completed: Callable[[], None] = lambda: None,
        user_stopped: Callable[[str], None] = lambda session: None,
        turn_answered: Answered = _unanswered,
    ) -> None:
        """`turn_completed` is called after each completed turn (memory maintenance's wake),
        `user_stopped` on each user stop of a session (its sub-agents stop too),
        `turn_answered` when a turn's model is done, before its `turn_complete` (plan mode);
        `protected` is what a turn's `workspace_files` may never name."""
        self.sessions = sessions
        self.protected = protected or ProtectedPaths()
        self.store = store
        self.approvals = approvals
        self.queues = queues
        self.compactor = Compactor(sessions, store, providers)
        self.titles = Titles(sessions, store, providers)
        self.tool_runner = ToolRunner(tools, approvals, providers, data_dir / "trash", store)
        self.steps = Steps(
            sessions, store, providers, self.tool_runner, self.compactor, metrics, prompt
        )
        self.cycle = TurnCycle(
            sessions, self.steps, self.titles, hooks, turn_completed, turn_answered
        )
        self.activities = Activities()
        self.runs: dict[str, Run] = {}  # the runner of each session in `turn`
        self.compacting: dict[str, asyncio.Task[Checkpoint]] = {}
        self.user_stopped = user_stopped
        self.log = get_logger("foya.turns")

    # -- state ---------------------------------------------------------------------------------

    def running(self, session: str) -> bool:
        """Something holds the session (a turn, a compaction, a restore): new input is queued."""
        return self.activities.busy(session)

    def is_busy(self, session: str) -> bool:
        """Busy, or input is queued: what fork refuses as `session_busy`."""
        return self.activities.busy(session) or bool(self.queues.of(session).items)

    @contextlib.asynccontextmanager
    async def exclusive(self, session: str) -> AsyncIterator[None]:
        """Keep turns and compactions off an idle session while its history or files change
        (rewind, review undo); input arriving meanwhile is queued and runs afterwards."""
        self.activities.begin(session, Activity.EXCLUSIVE)
        try:
            yield
        finally:
            self.activities.end(session, Activity.EXCLUSIVE)
            self._resume(session)

    def partial(self, session: str) -> Message | None:
        """The message being generated right now, if any."""
        run = self.runs.get(session)
        return run.partial() if run is not None and (run.text or run.reasoning) else None

    # -- commands ------------------------------------------------------------------------------

    async def _accept(self, session: str, turn: TurnInput) -> Accepted:
        """Input checked by the input rules, with its workspace files made canonical and its
        attachments committed. A session without a usable connection is bound to the default
        model first (`app.kernel.binding`); input that is refused binds nothing."""
        row = await self.sessions.row(session)
        bind = rebinding(self.sessions.connections, row)
        candidate = {**row, **(bind or {})}
        workspace = (self.sessions.workspace(row), self.protected)
        accepted = await inputs.accept(
            self.sessions.artifacts, self.sessions.connections, candidate, turn, workspace
        )
        if bind:
            await self.sessions.save(session, bind)
        return accepted

    async def workspace_files(self, session: str, paths: list[str]) -> list[str]:
        """`paths` as canonical files of the session's workspace (`inputs.workspace_files`),
        for a caller that must check them before it changes anything else (plan mode)."""
        root = self.sessions.workspace(await self.sessions.row(session))
        return await asyncio.to_thread(inputs.workspace_files, root, paths, self.protected)

    async def submit(
        self, session: str, turn: TurnInput, command: str | None = None
    ) -> TurnAccepted:
        """Start a turn, or queue the input if the session is busy. A turn is answered
        `started` only once its opening facts are committed: one that cannot start (a full
        disk, say) is refused and leaves nothing behind. `command` names the command the input
        was expanded from; its message records it."""
        accepted = await self._accept(session, turn)
        if command:
            accepted["command"] = command
        queue = self.queues.of(session)
        if self.running(session) or (queue.items and queue.paused):
            item = await self._add_to_queue(session, accepted)
            queue.paused = False  # new input after a stop resumes the queue behind it
            self._resume(session)
            return {"run_id": session, "status": "queued", "queued": item}
        run = self._claim(session)  # input arriving during the opening commit is queued
        try:
            await self.cycle.open(run, accepted)
        except BaseException:
            self._release(run)
            self._resume(session)
            raise
        queue.paused = False
        run.task = asyncio.create_task(self._drain(run, opened=True), name=f"runner:{session}")
        return {"run_id": session, "status": "started"}

    async def enqueue(self, session: str, turn: TurnInput) -> QueueItem:
        """Add to the queue without starting anything."""
        return await self._add_to_queue(session, await self._accept(session, turn))

    async def _add_to_queue(self, session: str, accepted: Accepted) -> QueueItem:
        """Queue the input; if the `queue_updated` fact cannot be stored the item is taken out
        again, so an input is never kept after an error answer."""
        item = self.queues.add(session, accepted)
        try:
            await self._queue_changed(session)
        except BaseException:
            self.queues.remove(session, item["id"])
            raise
        return item

    async def update_item(
        self, session: str, item_id: str, text: str | None, position: int | None
    ) -> QueueItem:
        await self.sessions.row(session)
        item = self.queues.update(session, item_id, text, position)
        await self._queue_changed(session)
        return item

    async def remove_item(self, session: str, item_id: str) -> None:
        await self.sessions.row(session)
        self.queues.remove(session, item_id)
        await self._queue_changed(session)

    async def dispatch(self, session: str, item_id: str) -> QueueItem:
        """Run a queued item now: start it if idle, else put it first and end the running turn
        (or compaction) with reason `queue_dispatch`. Answers the dispatched item."""
        await self.sessions.row(session)
        self.queues.to_head(session, item_id)
        await self._queue_changed(session)
        queue = self.queues.of(session)
        queue.paused = False
        item = queue.items[0].copy()
        if self.running(session):
            await self.cancel(session, "queue_dispatch")
        else:
            self._resume(session)
        return item

    async def cancel(self, session: str, reason: str = "user_stop") -> None:
        """Stop the running turn (if any); a user stop also pauses the queue. A queue dispatch
        ends the turn without a `turn_cancel_requested` (Foya's order): its `turn_complete`
        says `queue_dispatch`."""
        run = self.runs.get(session)
        if reason == "user_stop":
            self.queues.of(session).paused = True
            self.user_stopped(session)
        compaction = self.compacting.get(session)
        if compaction is not None and reason in ("user_stop", "queue_dispatch"):
            compaction.cancel()  # it ends with compaction_failed{error: cancelled}
        if run is None or run.cancel_reason is not None:
            return
        if run.turn is None or run.turn.done():
            if reason in _ENDING:
                run.cancel_reason = reason  # between turns: the runner stops before the next
            return
        run.cancel_reason = reason
        try:
            if reason != "queue_dispatch":
                requested: TurnCancelRequested = {
                    "run_id": run.run_id,
                    "reason": reason,
                    "requested_at": iso_now(),
                }
                await self.sessions.facts.emit(
                    EventDraft(session, k.TURN_CANCEL_REQUESTED, requested, run.run_id)
                )
        finally:  # even if our caller is cancelled meanwhile: the reason is set, so must this be
            run.turn.cancel()

    async def cancel_tool(self, session: str, tool_call_id: str) -> None:
        run = self.runs.get(session)
        task = run.tools.get(tool_call_id) if run is not None else None
        if task is None or task.done():
            raise ToolNotRunning(f"tool call {tool_call_id} is not running")
        task.cancel()

    async def stop(self, session: str, reason: str) -> None:
        """End the session's work for good (deletion, shutdown): nothing new starts on it, the
        running turn or compaction is cancelled and waited for (at most `STOP_GRACE`)."""
        self.activities.begin(session, Activity.DELETING)
        self.queues.drop(session)
        self.approvals.forget(session)
        run = self.runs.get(session)
        compaction = self.compacting.get(session)
        await self.cancel(session, reason)
        if compaction is not None:
            compaction.cancel()
        for task in (run.task if run else None, compaction):
            if task is not None:
                done, _ = await asyncio.wait({task}, timeout=STOP_GRACE)
                if not done:
                    task.cancel()

    def forget(self, session: str) -> None:
        """The session is gone: drop what is kept of it."""
        self.activities.forget(session)
        self.queues.drop(session)
        self.tool_runner.activated.pop(session, None)  # deferred tools it found

    async def stop_all(self) -> None:
        self.titles.cancel_all()
        busy = set(self.runs) | set(self.compacting)
        await asyncio.gather(*(self.stop(s, "context_cancelled") for s in busy))

    async def compact(self, session: str) -> Compacted:
        """`POST /sessions/{id}/compact`: idle sessions only; input meanwhile is queued."""
        await self.sessions.row(session)
        self.activities.begin(session, Activity.COMPACTION)
        # Its own task, so POST /cancel (or a queue dispatch) can stop it.
        task = asyncio.create_task(self._compact(session))
        self.compacting[session] = task
        try:
            made = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # the request itself went away; the compaction goes on
            raise CompactionCancelled("the compaction was cancelled") from None
        return compacted(made)

    async def _compact(self, session: str) -> Checkpoint:
        try:
            await self.sessions.save(session, {"phase": "compaction"})
            try:
                return await self.compactor.compact(session, "standalone")
            finally:
                await self.sessions.save(session, {"phase": "idle"})
        finally:
            self.compacting.pop(session, None)
            self.activities.end(session, Activity.COMPACTION)
            self._resume(session)  # input that arrived meanwhile

    # -- the runner ------------------------------------------------------------------------------

    def _claim(self, session: str) -> Run:
        """Make a new runner the session's (the session must be idle)."""
        self.activities.begin(session, Activity.TURN)
        run = Run(session)
        self.runs[session] = run
        return run

    def _release(self, run: Run) -> None:
        """The runner has nothing left to run: the session is idle from now on."""
        if self.runs.get(run.session) is run:
            del self.runs[run.session]
            self.activities.end(run.session, Activity.TURN)

    def _resume(self, session: str) -> None:
        """Start the queue's next input if the session is idle and its queue is not paused."""
        queue = self.queues.of(session)
        if queue.items and not queue.paused and not self.running(session):
            run = self._claim(session)
            run.task = asyncio.create_task(self._drain(run), name=f"runner:{session}")

    async def _drain(self, run: Run, *, opened: bool = False) -> None:
        """Run the opened turn (if any), then queued input, until there is none to run."""
        try:
            if opened:
                await self._run_turn(run)
            while run.cancel_reason is None and self.runs.get(run.session) is run:
                queue = self.queues.of(run.session)
                item = None if queue.paused else self.queues.pop(run.session)
                if item is None:
                    return
                try:
                    await self._queue_changed(run.session)
                    await self.cycle.open(run, as_input(item))
                except Exception:
                    # The turn never started (nothing of it is stored): keep the input queued
                    # and paused, so it is neither lost nor retried in a loop.
                    self.log.exception("a queued turn could not start", session=run.session)
                    self.queues.restore(run.session, item)
                    queue.paused = True
                    return
                await self._run_turn(run)
        except Exception:
            self.log.exception("runner failed", session=run.session)
        finally:
            self._release(run)
            if run.cancel_reason not in _ENDING:
                self._resume(run.session)  # input queued while this runner was ending

    async def _run_turn(self, run: Run) -> None:
        """Run the opened turn to its `turn_complete` in its own task (so cancel reaches only
        the turn, not the runner). When nothing runnable is queued behind it, the session is
        idle as soon as `turn_complete` is stored."""
        run.turn = asyncio.create_task(self._turn(run))
        await asyncio.shield(run.turn)
        if run.cancel_reason not in _ENDING:
            run.cancel_reason = None  # completed, failed, or dispatched: go on

    async def _turn(self, run: Run) -> None:
        await self.cycle.run(run)
        # Still in the turn's task, right after `turn_complete` was stored and published: a
        # client that reacts to it must find the session idle, not a runner winding down.
        queue = self.queues.of(run.session)
        if run.cancel_reason in _ENDING or queue.paused or not queue.items:
            self._release(run)

    async def _queue_changed(self, session: str) -> None:
        changed: QueueUpdated = {"items": self.queues.items(session)}
        await self.sessions.facts.emit(EventDraft(session, k.QUEUE_UPDATED, changed))
