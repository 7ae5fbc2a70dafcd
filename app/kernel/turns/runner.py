"""Turns: one turn at a time per session, with its queue, compaction and cancel.

A session's state (`app.kernel.turns.activity`) says what it is doing. A busy session (`turn`)
has one runner task (`app.kernel.turns.runners`) that runs its turns (`app.kernel.turns.turn`)
and then its queued input. A compaction (`compactions`) or a rewind or review undo
(`exclusive`) holds the session the same way; input arriving meanwhile is queued and starts
when the session is idle again. Input is checked and made ready by `app.kernel.turns.intake`
before it is run or queued.

Cancellation is cooperative: `cancel` records the reason and cancels the turn task; the turn
saves the partial reply with `turn_status` cancelled and emits `turn_complete{cancelled}`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from app import events as k
from app.errors import Conflict
from app.events import (
    EventDraft,
    Message,
    QueueItem,
    TurnCancelRequested,
)
from app.files import ProtectedPaths
from app.kernel.approvals import Approvals
from app.kernel.ids import iso_now
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
from app.kernel.turns.activity import Activity, ToolNotRunning
from app.kernel.turns.compaction import Compacted, Compactor, compacted
from app.kernel.turns.compactions import Compactions
from app.kernel.turns.inputs import TurnAccepted, TurnInput
from app.kernel.turns.intake import Intake
from app.kernel.turns.plugs import TurnPlugs
from app.kernel.turns.queue import Queues
from app.kernel.turns.request import Requests
from app.kernel.turns.runners import ENDING, Runners
from app.kernel.turns.steps import Steps
from app.kernel.turns.titles import Titles
from app.kernel.turns.tooling import ToolRunner
from app.kernel.turns.turn import TurnCycle
from app.logs import get_logger
from app.metrics import Metrics
from app.store import Store
from app.store.channel_ledger import Receipt

STOP_GRACE = 3.0


class CompactionCancelled(Conflict):
    """A compaction the user cancelled before it finished."""

    code = "compaction_cancelled"


class Turns:
    """Runners of all busy sessions."""

    def __init__(
        self,
        sessions: Sessions,
        store: Store,
        providers: Providers,
        approvals: Approvals,
        queues: Queues,
        data_dir: Path,
        metrics: Metrics,
        plugs: TurnPlugs,
        *,
        protected: ProtectedPaths | None = None,
    ) -> None:
        """`plugs` is what the capabilities plug in (the complete tool table among them);
        `protected` is what a turn's `workspace_files` may never name."""
        self.sessions = sessions
        self.protected = protected or ProtectedPaths()
        self.intake = Intake(sessions, self.protected)
        self.store = store
        self.approvals = approvals
        self.queues = queues
        self.compactor = Compactor(sessions, store, providers)
        self.titles = Titles(sessions, store, providers)
        trash = data_dir / "trash"
        self.tool_runner = ToolRunner(
            plugs.tools, approvals, providers, trash, store, plugs.policies
        )
        requests = Requests(
            sessions,
            store,
            providers,
            self.tool_runner,
            self.compactor,
            plugs.prompt,
            plugs.instructions,
        )
        self.steps = Steps(requests, metrics)
        self.cycle = TurnCycle(
            sessions,
            self.steps,
            self.titles,
            plugs.hooks,
            plugs.turn_completed,
            plugs.turn_answered,
        )
        self.runners = Runners(sessions, queues, self.cycle)
        self.activities = self.runners.activities
        self.runs = self.runners.runs
        self.compactions = Compactions(sessions, self.compactor, self.runners)
        self.compacting = self.compactions.tasks
        self.user_stopped = plugs.user_stopped
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
            self.runners.resume(session)

    def partial(self, session: str) -> Message | None:
        """The message being generated right now, if any."""
        run = self.runs.get(session)
        return run.partial() if run is not None and (run.text or run.reasoning) else None

    # -- commands ------------------------------------------------------------------------------

    async def workspace_files(self, session: str, paths: list[str]) -> list[str]:
        """`paths` as canonical files of the session's workspace, for a caller that must check
        them before it changes anything else (plan mode)."""
        return await self.intake.workspace_files(session, paths)

    async def submit(
        self,
        session: str,
        turn: TurnInput,
        command: str | None = None,
        *,
        receipt: Receipt | None = None,
    ) -> TurnAccepted:
        """Start a turn, or queue the input if the session is busy. A turn is answered
        `started` only once its opening facts are committed: one that cannot start (a full
        disk, say) is refused and leaves nothing behind. `command` names the command the input
        was expanded from; its message records it. `receipt` (a chat channel's item) is
        recorded in the commit that makes the input the turn's or the queue's, or not at all."""
        accepted, row = await self.intake.admit(session, turn)
        if command:
            accepted["command"] = command
        queue = self.queues.of(session)
        if self.running(session) or (queue.items and queue.paused):
            item = await self.runners.add(session, accepted, receipt)
            queue.paused = False  # new input after a stop resumes the queue behind it
            self.runners.resume(session)
            return {"run_id": session, "status": "queued", "queued": item}
        run = self.runners.claim(session)  # input arriving during the opening commit is queued
        try:
            await self.cycle.open(run, accepted, row, receipt)
        except BaseException:
            self.runners.release(run)
            self.runners.resume(session)
            raise
        queue.paused = False
        run.task = asyncio.create_task(
            self.runners.drain(run, opened=True), name=f"runner:{session}"
        )
        return {"run_id": session, "status": "started"}

    async def enqueue(self, session: str, turn: TurnInput) -> QueueItem:
        """Add to the queue without starting anything."""
        return await self.runners.add(session, await self.intake.accept(session, turn))

    async def update_item(
        self, session: str, item_id: str, text: str | None, position: int | None
    ) -> QueueItem:
        await self.sessions.row(session)
        return await self.runners.update(session, item_id, text, position)

    async def remove_item(self, session: str, item_id: str) -> None:
        await self.sessions.row(session)
        await self.runners.remove(session, item_id)

    async def dispatch(self, session: str, item_id: str) -> QueueItem:
        """Run a queued item now: start it if idle, else put it first and end the running turn
        (or compaction) with reason `queue_dispatch`. Answers the dispatched item."""
        await self.sessions.row(session)
        item = await self.runners.to_head(session, item_id)
        if self.running(session):
            await self.cancel(session, "queue_dispatch")
        else:
            self.runners.resume(session)
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
            if reason in ENDING:
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
        self.tool_runner.tools.forget(session)  # deferred tools it found

    async def stop_all(self) -> None:
        self.titles.cancel_all()
        busy = set(self.runs) | set(self.compacting)
        await asyncio.gather(*(self.stop(s, "context_cancelled") for s in busy))

    async def compact(self, session: str) -> Compacted:
        """`POST /sessions/{id}/compact`: idle sessions only; input meanwhile is queued."""
        await self.sessions.row(session)
        task = self.compactions.begin(session)
        try:
            made = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # the request itself went away; the compaction goes on
            raise CompactionCancelled("the compaction was cancelled") from None
        return compacted(made)
