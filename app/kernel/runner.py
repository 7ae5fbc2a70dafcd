"""Turns: one turn at a time per session, with its queue, compaction and cancel.

A busy session has one runner task. It runs a turn, then the next queued input, until the queue
is empty or a cancel pauses it. A turn is its opening facts, steps (`app.kernel.steps`) while
the model asks for tools, and `turn_complete`. Event order follows reference §2.

Cancellation is cooperative: `cancel` records the reason and cancels the turn task; the turn
saves the partial reply with `turn_status` cancelled and emits `turn_complete{cancelled}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from app import events as k
from app.errors import Conflict, FoyaError, InsufficientStorage
from app.events import EventDraft
from app.kernel import inputs
from app.kernel.approvals import Approvals
from app.kernel.compaction import Compactor
from app.kernel.ids import iso_now, new_id
from app.kernel.providers import Providers
from app.kernel.queue import Queues
from app.kernel.sessions import SessionBusy, Sessions
from app.kernel.steps import Run, Steps, emit
from app.kernel.titles import Titles
from app.kernel.tooling import ToolRunner
from app.logs import get_logger
from app.metrics import Metrics
from app.providers.base import (
    ProviderError,
)
from app.store import Store
from app.tools import Tool

STOP_GRACE = 3.0
FULL_DISK_RETRY_MAX = 30.0


#: Cancel reasons that end the runner (the others, like queue_dispatch, only end one turn).
_ENDING = ("user_stop", "session_deleted", "context_cancelled")


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
    ) -> None:
        self.sessions = sessions
        self.store = store
        self.providers = providers
        self.approvals = approvals
        self.queues = queues
        self.metrics = metrics
        self.compactor = Compactor(sessions, store, providers)
        self.titles = Titles(sessions, store, providers)
        self.compacting: dict[str, asyncio.Task[dict[str, Any]]] = {}
        self.holding: set[str] = set()
        self.tool_runner = ToolRunner(tools, approvals, providers, data_dir / "trash", store)
        self.steps = Steps(sessions, store, providers, self.tool_runner, self.compactor, metrics)
        self._emit = functools.partial(emit, sessions)
        self.runs: dict[str, Run] = {}
        self.log = get_logger("foya.turns")

    # -- state ---------------------------------------------------------------------------------

    def running(self, session: str) -> bool:
        """A turn runs, or a compaction or file restore is under way: new input is queued."""
        return session in self.runs or session in self.compacting or session in self.holding

    @contextlib.asynccontextmanager
    async def exclusive(self, session: str) -> AsyncIterator[None]:
        """Keep turns and compactions off an idle session while its history or files change
        (rewind, review undo); input arriving meanwhile is queued and runs afterwards."""
        if self.active(session):
            raise SessionBusy("the session is busy; wait for the turn to finish")
        self.holding.add(session)
        try:
            yield
        finally:
            self.holding.discard(session)
            self._resume(session)

    def _resume(self, session: str) -> None:
        """Start the queue's next input unless something already runs or the queue is paused."""
        queue = self.queues.of(session)
        if queue.items and not queue.paused and not self.running(session):
            self._start(Run(session), None)

    def active(self, session: str) -> bool:
        """A turn runs or is about to (a runner that only winds down after `turn_complete`
        does not count)."""
        if session in self.compacting or session in self.holding:
            return True
        run = self.runs.get(session)
        if run is None:
            return False
        queue = self.queues.of(session)
        pending = bool(queue.items) and not queue.paused
        return run.turn is None or not (run.completed or run.turn.done()) or pending

    def is_busy(self, session: str) -> bool:
        """A runner exists or input is queued: what fork refuses as `session_busy`."""
        return session in self.runs or bool(self.queues.of(session).items)

    def partial(self, session: str) -> dict[str, Any] | None:
        """The message being generated right now, if any."""
        run = self.runs.get(session)
        return run.partial() if run is not None and (run.text or run.reasoning) else None

    # -- commands ------------------------------------------------------------------------------

    async def _accept(self, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Validated input with its attachments committed."""
        row = await self.sessions.row(session)
        return await inputs.accept(self.sessions.artifacts, self.sessions.connections, row, body)

    async def submit(self, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start a turn, or queue the input if the session is busy. A turn is answered
        `started` only once its opening facts are committed: one that cannot start (a full
        disk, say) is refused and leaves nothing behind."""
        body = await self._accept(session, body)
        queue = self.queues.of(session)
        if self.running(session) or (queue.items and queue.paused):
            item = await self._add_to_queue(session, body)
            if not self.running(session):
                queue.paused = False
                self._start(Run(session), None)
            return {"run_id": session, "status": "queued", "queued": item}
        run = Run(session)
        self.runs[session] = run  # input arriving during the opening commit is queued
        try:
            await self._open(run, body)
        except BaseException:
            self.runs.pop(session, None)
            self._resume(session)
            raise
        queue.paused = False  # new input after a stop resumes the queue behind it
        self._start(run, body)
        return {"run_id": session, "status": "started"}

    async def enqueue(self, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Add to the queue without starting anything."""
        return await self._add_to_queue(session, await self._accept(session, body))

    async def _add_to_queue(self, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Queue `body`; if the `queue_updated` fact cannot be stored the item is taken out
        again, so an input is never kept after an error answer."""
        item = self.queues.add(session, body)
        try:
            await self._queue_changed(session)
        except BaseException:
            self.queues.remove(session, item["id"])
            raise
        return item

    async def update_item(
        self, session: str, item_id: str, text: str | None, position: int | None
    ) -> dict[str, Any]:
        await self.sessions.row(session)
        item = self.queues.update(session, item_id, text, position)
        await self._queue_changed(session)
        return item

    async def remove_item(self, session: str, item_id: str) -> None:
        await self.sessions.row(session)
        self.queues.remove(session, item_id)
        await self._queue_changed(session)

    async def dispatch(self, session: str, item_id: str) -> dict[str, Any]:
        """Run a queued item now: start it if idle, else put it first and end the running turn
        (or compaction) with reason `queue_dispatch`. Answers the dispatched item."""
        await self.sessions.row(session)
        self.queues.to_head(session, item_id)
        await self._queue_changed(session)
        queue = self.queues.of(session)
        queue.paused = False
        item = dict(queue.items[0])
        if self.running(session):
            await self.cancel(session, "queue_dispatch")
        else:
            self._start(Run(session), None)
        return item

    async def cancel(self, session: str, reason: str = "user_stop") -> None:
        """Stop the running turn (if any); a user stop also pauses the queue. A queue dispatch
        ends the turn without a `turn_cancel_requested` (Foya's order): its `turn_complete`
        says `queue_dispatch`."""
        run = self.runs.get(session)
        if reason == "user_stop":
            self.queues.of(session).paused = True
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
        if reason != "queue_dispatch":
            await self._emit(
                run,
                k.TURN_CANCEL_REQUESTED,
                {"run_id": run.run_id, "reason": reason, "requested_at": iso_now()},
            )
        run.turn.cancel()

    async def cancel_tool(self, session: str, tool_call_id: str) -> None:
        run = self.runs.get(session)
        task = run.tools.get(tool_call_id) if run is not None else None
        if task is None or task.done():
            raise ToolNotRunning(f"tool call {tool_call_id} is not running")
        task.cancel()

    async def stop(self, session: str, reason: str) -> None:
        """End the session's work for good (deletion, shutdown): cancel, wait, forget."""
        self.queues.drop(session)
        self.approvals.forget(session)
        run = self.runs.get(session)
        if run is None:
            return
        await self.cancel(session, reason)
        if run.task is not None:
            done, _ = await asyncio.wait({run.task}, timeout=STOP_GRACE)
            if not done:
                run.task.cancel()

    async def stop_all(self) -> None:
        self.titles.cancel_all()
        await asyncio.gather(*(self.stop(s, "context_cancelled") for s in list(self.runs)))

    async def compact(self, session: str) -> dict[str, Any]:
        """`POST /sessions/{id}/compact`: idle sessions only; input meanwhile is queued."""
        await self.sessions.row(session)
        if self.active(session):
            raise SessionBusy("the session is busy; compact it when the turn has finished")
        # Its own task, so POST /cancel (or a queue dispatch) can stop it.
        task = asyncio.create_task(self._compact(session))
        self.compacting[session] = task
        try:
            made = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # the request itself went away; the compaction goes on
            raise CompactionCancelled("the compaction was cancelled") from None
        return {
            "checkpoint_id": made["id"],
            "phase": made["phase"],
            "projection_kind": made["projection_kind"],
            "level": made["level"],
            "segment_count": made["segment_count"],
            "through_seq": made["through_seq"],
            "estimated_tokens_before": made["estimated_tokens_before"],
            "estimated_tokens_after": made["estimated_tokens_after"],
        }

    async def _compact(self, session: str) -> dict[str, Any]:
        try:
            await self.sessions.save(
                session, {"phase": "compaction", "updated_at_ns": time.time_ns()}
            )
            try:
                return await self.compactor.compact(session, "standalone")
            finally:
                await self.sessions.save(
                    session, {"phase": "idle", "updated_at_ns": time.time_ns()}
                )
        finally:
            self.compacting.pop(session, None)
            self._resume(session)  # input that arrived meanwhile

    # -- the runner ------------------------------------------------------------------------------

    def _start(self, run: Run, opened: dict[str, Any] | None) -> None:
        """Run `run` as the session's runner: the turn already opened for `opened` (if any),
        then queued input until the queue is empty or paused."""
        self.runs[run.session] = run
        run.task = asyncio.create_task(self._drain(run, opened), name=f"runner:{run.session}")

    async def _drain(self, run: Run, opened: dict[str, Any] | None) -> None:
        try:
            if opened is not None:
                await self._run_turn(run)
            while run.cancel_reason is None:
                queue = self.queues.of(run.session)
                if queue.paused or run.session in self.holding:
                    return  # a rewind or review undo holds the session: it resumes the queue
                item = self.queues.pop(run.session)
                if item is None:
                    return
                try:
                    await self._queue_changed(run.session)
                    await self._open(run, {"message": item["text"], **_extras(item)})
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
            self.runs.pop(run.session, None)
            if run.cancel_reason not in _ENDING:
                self._resume(run.session)  # input queued while this runner was ending

    async def _run_turn(self, run: Run) -> None:
        """Run the opened turn to its `turn_complete` in its own task (so cancel reaches only
        the turn, not the runner)."""
        run.turn = asyncio.create_task(self._turn(run))
        await asyncio.shield(run.turn)
        if run.cancel_reason not in _ENDING:
            run.cancel_reason = None  # completed, failed, or dispatched: go on

    async def _set_phase(
        self, run: Run, phase: str, then: list[EventDraft], before: list[EventDraft] | None = None
    ) -> None:
        """Change the session's phase, between `before` and `then`, in one commit."""
        columns = {"phase": phase, "updated_at_ns": time.time_ns()}
        await self.sessions.save(run.session, columns, then, before)

    async def _queue_changed(self, session: str) -> None:
        items = self.queues.items(session)
        await self.sessions.emit(EventDraft(session, k.QUEUE_UPDATED, {"items": items}))

    async def _open(self, run: Run, body: dict[str, Any]) -> None:
        """Commit a turn's opening facts (user message, `turn_started`, phase) in one go."""
        run.run_id, run.started_at = new_id(), iso_now()
        run.text, run.reasoning = [], []
        run.steps, run.overflow_retried, run.completed = 0, False, False
        run.turn = None
        user = {"role": "user", "content": body["message"], "created_at": iso_now()}
        user.update(_extras(body))
        await self._set_phase(
            run,
            "turn",
            [
                EventDraft(run.session, k.MESSAGE_END, user, run.run_id),
                EventDraft(
                    run.session,
                    k.TURN_STARTED,
                    {"run_id": run.run_id, "started_at": run.started_at},
                    run.run_id,
                ),
            ],
        )

    async def _turn(self, run: Run) -> None:
        """The steps of an opened turn, then `turn_complete` whatever happened."""
        status, reason = "completed", None
        try:
            if run.cancel_reason is not None:  # stopped while it was being opened
                raise asyncio.CancelledError
            while await self.steps.run(run):
                pass
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()
            status, reason = "cancelled", run.cancel_reason or "user_stop"
        except ProviderError as exc:
            status, reason = "failed", "error"
            await self._report(run, exc.message)
        except FoyaError as exc:  # e.g. the disk filled up: the user can act on the message
            status, reason = "failed", "error"
            await self._report(run, exc.message)
        except Exception as exc:
            self.log.exception("turn failed", session=run.session)
            status, reason = "failed", "error"
            await self._report(run, f"internal error ({type(exc).__name__})")
        finally:
            await self._finish_durably(run, status, reason)

    async def _report(self, run: Run, message: str) -> None:
        """Store the turn's `error` fact; on a full disk it is logged instead (the turn still
        ends with `turn_complete` once there is room)."""
        try:
            await self._emit(run, k.ERROR, message)
        except InsufficientStorage:
            self.log.error("turn failed", session=run.session, error=message)

    async def _finish_durably(self, run: Run, status: str, reason: str | None) -> None:
        """`_finish`, retried while the disk is full: a turn must end with `turn_complete`
        (clients and the session's phase wait for it), and the runner keeps the session busy
        meanwhile, so new input is queued rather than lost. Shutdown cancels the wait."""
        for attempt in itertools.count():
            try:
                await self._finish(run, status, reason)
                return
            except InsufficientStorage:
                delay = min(2.0**attempt, FULL_DISK_RETRY_MAX)
                self.log.warning("disk full: turn_complete waits", session=run.session, retry=delay)
                await asyncio.sleep(delay)

    async def _finish(self, run: Run, status: str, reason: str | None) -> None:
        """Store the partial reply (if the turn did not complete) and `turn_complete`. Safe to
        repeat after a failure: each fact is stored once."""
        if run.completed:
            return
        completed = iso_now()
        if status != "completed" and (run.text or run.reasoning):
            message = run.partial()
            message.update(turn_completed_at=completed, turn_status=status, turn_reason=reason)
            await self._emit(run, k.MESSAGE_END, message)
        run.text, run.reasoning = [], []
        done: dict[str, Any] = {
            "run_id": run.run_id,
            "started_at": run.started_at,
            "completed_at": completed,
            "status": status,
        }
        if reason:
            done["reason"] = reason
        # turn_complete stays the turn's last fact; the phase change follows it.
        await self._set_phase(
            run, "idle", [], [EventDraft(run.session, k.TURN_COMPLETE, done, run.run_id)]
        )
        run.completed = True
        if status == "completed":
            self.titles.schedule(run.session)
        # After turn_complete (see snapshots.py); a leftover row is harmless: the next turn's
        # snapshot replaces it and a restart clears it.
        with contextlib.suppress(InsufficientStorage):
            await self.store.clear_snapshot(run.session)


def _extras(body: dict[str, Any]) -> dict[str, Any]:
    return {
        key: body[key] for key in ("skill_ref", "attachments", "browser_elements") if body.get(key)
    }
