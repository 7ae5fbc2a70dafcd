"""One turn, from its opening facts to its `turn_complete` (reference §2 "Order within a turn").

1. `open`: the user message, `turn_started` and the phase change, in one commit. Only then is
   the turn acknowledged (`started`), so a turn that cannot be stored is refused, never lost.
2. `run`: steps (`app.kernel.steps`) while the model asks for tools.
3. `turn_complete`, whatever happened: a cancel keeps the partial reply (`turn_status`
   cancelled), a failure stores `error` first. On a full disk the closing facts are retried
   until there is room: clients and the session's phase wait for `turn_complete`.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Literal

from app import events as k
from app.errors import FoyaError, InsufficientStorage
from app.events import EventDraft, Message, TurnComplete, TurnStarted, input_context
from app.kernel.ids import iso_now, new_id
from app.kernel.inputs import Accepted
from app.kernel.sessions import Sessions
from app.kernel.steps import Run, Steps
from app.kernel.titles import Titles
from app.logs import get_logger
from app.providers.base import ProviderError

FULL_DISK_RETRY_MAX = 30.0
Status = Literal["completed", "cancelled", "failed"]


class TurnCycle:
    """Opens, runs and closes the turns of every session."""

    def __init__(self, sessions: Sessions, steps: Steps, titles: Titles) -> None:
        self.sessions = sessions
        self.steps = steps
        self.titles = titles
        self.log = get_logger("foya.turns")

    async def open(self, run: Run, turn: Accepted) -> None:
        """Commit a turn's opening facts (user message, `turn_started`, phase) in one go."""
        run.begin(new_id(), iso_now())
        user: Message = {"role": "user", "content": turn["message"], "created_at": iso_now()}
        context = input_context(turn)
        if "skill_ref" in context:
            user["skill_ref"] = context["skill_ref"]
        if "attachments" in context:
            user["attachments"] = context["attachments"]
        if "browser_elements" in context:
            user["browser_elements"] = context["browser_elements"]
        if "command" in context:
            user["command"] = context["command"]
        started: TurnStarted = {"run_id": run.run_id, "started_at": run.started_at}
        await self.sessions.save(
            run.session,
            {"phase": "turn"},
            [
                EventDraft(run.session, k.MESSAGE_END, user, run.run_id),
                EventDraft(run.session, k.TURN_STARTED, started, run.run_id),
            ],
        )

    async def run(self, run: Run) -> None:
        """The steps of an opened turn, then `turn_complete` whatever happened."""
        status: Status = "completed"
        reason: str | None = None
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
        except (ProviderError, FoyaError) as exc:  # a user can act on these messages
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
            await self.sessions.facts.emit(EventDraft(run.session, k.ERROR, message, run.run_id))
        except InsufficientStorage:
            self.log.error("turn failed", session=run.session, error=message)

    async def _finish_durably(self, run: Run, status: Status, reason: str | None) -> None:
        """`_finish`, retried while the disk is full; shutdown cancels the wait."""
        for attempt in itertools.count():
            try:
                await self._finish(run, status, reason)
                return
            except InsufficientStorage:
                delay = min(2.0**attempt, FULL_DISK_RETRY_MAX)
                self.log.warning("disk full: turn_complete waits", session=run.session, retry=delay)
                await asyncio.sleep(delay)

    async def _finish(self, run: Run, status: Status, reason: str | None) -> None:
        """Store the partial reply (if the turn did not complete) and `turn_complete` with the
        phase change, in one commit. Safe to repeat after a failure: nothing is stored twice."""
        if run.completed:
            return
        completed = iso_now()
        closing: list[EventDraft] = []
        if status != "completed" and (run.text or run.reasoning):
            message = run.partial()
            message["turn_completed_at"] = completed
            message["turn_status"] = status
            message["turn_reason"] = reason
            closing.append(EventDraft(run.session, k.MESSAGE_END, message, run.run_id))
        done: TurnComplete = {
            "run_id": run.run_id,
            "started_at": run.started_at,
            "completed_at": completed,
            "status": status,
        }
        if reason:
            done["reason"] = reason
        closing.append(EventDraft(run.session, k.TURN_COMPLETE, done, run.run_id))
        # turn_complete stays the turn's last fact; the phase change follows it.
        await self.sessions.save(run.session, {"phase": "idle"}, [], closing)
        run.text, run.reasoning = [], []
        run.completed = True
        if status == "completed":
            self.titles.schedule(run.session)
