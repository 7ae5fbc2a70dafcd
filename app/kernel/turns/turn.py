"""One turn, from its opening facts to its `turn_complete`.

1. `open`: the prompt's `UserPromptSubmit` hooks (`app.kernel.hooks`), then their
   `hook_completed` facts, the user message, `turn_started` and the phase change, in one commit.
   Only then is the turn acknowledged (`started`), so a turn that cannot be stored is refused,
   never lost. A prompt its hooks deny is never stored: `error` ("User request blocked by a
   hook: <reason>") and `turn_complete{failed, error}` are, in one commit, and the turn is
   answered `started` like any other (Foya's facts and answer), so every client sees the
   refusal on the session's stream. Just before that commit, the first model request of a
   plain message is built and sent (`app.kernel.turns.opening`): the commit's fsync and the
   provider's answer then overlap, and the reply is read by the first step, after the commit.
2. `run`: steps (`app.kernel.turns.steps`) while the model asks for tools. When the model is done
   the `Stop` hooks may deny the ending, once per turn: their reason is stored as a system message
   and the model gets one more round. The turn's `PermissionRequest` hooks reach approvals
   through `app.kernel.approvals.permission_hooks`, set in the turn's own task.
3. `turn_complete`, whatever happened: a cancel keeps the partial reply (`turn_status`
   cancelled), a failure stores `error` first. On a full disk the closing facts are retried
   until there is room: clients and the session's phase wait for `turn_complete`.

`UserPromptSubmit` runs, as in Foya, before anything of the turn is stored, so `POST …/turns`
waits for those hooks (side by side, each killed at its timeout); queued input runs them when it
leaves the queue. They run as the turn's task: a cancel kills them, and the turn then opens and
ends cancelled, as Foya's does.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Literal

from app import events as k
from app.errors import FoyaError, InsufficientStorage
from app.events import EventDraft, Message, TurnComplete, TurnStarted, input_context
from app.kernel.approvals import Ask, Decision, permission_hooks
from app.kernel.ids import iso_now, new_id
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.kernel.turns import opening
from app.kernel.turns.inputs import Accepted
from app.kernel.turns.ports import (
    PERMISSION_REQUEST,
    STOP,
    USER_PROMPT_SUBMIT,
    Answered,
    HookOutcome,
    HookPort,
    Unheard,
)
from app.kernel.turns.steps import Run, Steps
from app.kernel.turns.titles import Titles
from app.logs import get_logger
from app.providers.base import ProviderError
from app.store.channel_ledger import Receipt
from app.tools.base import settled

#: What of a turn's input its user message keeps.
INPUT_FIELDS = ("skill_ref", "attachments", "browser_elements", "command", "workspace_files")
FULL_DISK_RETRY_MAX = 30.0
CONTINUE = "Continue working on the current task instead of ending the turn."
Status = Literal["completed", "cancelled", "failed"]


class TurnCycle:
    """Opens, runs and closes the turns of every session."""

    def __init__(
        self,
        sessions: Sessions,
        steps: Steps,
        titles: Titles,
        hooks: HookPort,
        turn_completed: Callable[[], None],
        answered: Answered,
    ) -> None:
        self.sessions = sessions
        self.steps = steps
        self.titles = titles
        self.hooks = hooks
        self.turn_completed = turn_completed
        self.answered = answered
        self.log = get_logger("foya.turns")

    async def open(
        self,
        run: Run,
        turn: Accepted,
        row: SessionRow | None = None,
        receipt: Receipt | None = None,
        before: Sequence[EventDraft] = (),
    ) -> None:
        """Run the prompt's UserPromptSubmit hooks, then commit `before` (the queue the input
        left) and the opening facts (hooks' results, user message, `turn_started`, phase, the
        chat item's `receipt`) in one go; or, if the hooks deny it, its refusal."""
        run.begin(new_id(), iso_now())
        row = row or await self.sessions.row(run.session)  # `row`: if the caller just read it
        prompt = await self._prompt_hooks(run, row, turn["message"])
        facts = [*before, *prompt.facts(run.session, run.run_id)]
        if prompt.decision == "deny":
            await self._refuse(run, prompt, facts, receipt)
            return
        user: Message = {"role": "user", "content": turn["message"], "created_at": iso_now()}
        context = input_context(turn)
        for name in INPUT_FIELDS:
            if name in context:
                user[name] = context[name]  # type: ignore[literal-required]
        started: TurnStarted = {"run_id": run.run_id, "started_at": run.started_at}
        early = None
        try:
            # Not after a hook ran (a killed hook is Unheard too, but leaves a cancel reason).
            if isinstance(prompt, Unheard):
                early = await opening.begin(self.steps.requests, run, row, user)
            await self.sessions.save(
                run.session,
                {"phase": "turn"},
                [
                    EventDraft(run.session, k.MESSAGE_END, user, run.run_id),
                    EventDraft(run.session, k.TURN_STARTED, started, run.run_id),
                ],
                facts,
                receipt=receipt,
            )
        except BaseException:
            await asyncio.shield(opening.discard(early))
            raise
        run.early = early

    async def _prompt_hooks(self, run: Run, row: SessionRow, prompt: str) -> HookOutcome:
        """What the UserPromptSubmit hooks say of `prompt`. They run as the turn's task, so a
        cancel of the turn kills them; a killed hook says nothing."""
        if not self.hooks.wants(USER_PROMPT_SUBMIT, row):
            return Unheard()
        said: list[HookOutcome] = []

        async def ask() -> None:
            fields = {"user_prompt": prompt}
            said.append(await self.hooks.run(USER_PROMPT_SUBMIT, row, run.run_id, fields))

        run.turn = task = asyncio.create_task(ask())
        try:
            await asyncio.wait({task})  # a cancel of the turn ends the task, not this wait
        finally:
            task.cancel()  # when this call itself is cancelled (a no-op once done)
            run.turn = None
        if task.cancelled():
            return Unheard()
        task.result()  # raises what went wrong, if anything did
        return said[0]

    async def _refuse(
        self, run: Run, prompt: HookOutcome, facts: list[EventDraft], receipt: Receipt | None
    ) -> None:
        """A denied prompt: `facts`, `error` and `turn_complete{failed}` in one commit (not
        the prompt itself). The turn has ended."""
        message = "User request blocked by a hook: " + prompt.feedback("Request not allowed")
        done = _complete(run, iso_now(), "failed", "error")
        facts.append(EventDraft(run.session, k.ERROR, message, run.run_id))
        facts.append(EventDraft(run.session, k.TURN_COMPLETE, done, run.run_id))
        store = self.sessions.store
        await self.sessions.facts.commit(
            run.session, lambda: store.append_all(facts, receipt=receipt)
        )
        run.completed = True

    async def run(self, run: Run) -> None:
        """The steps of an opened turn, then `turn_complete` whatever happened. A turn its
        UserPromptSubmit hooks refused has ended already."""
        if run.completed:
            return
        status: Status = "completed"
        reason: str | None = None
        try:
            if run.cancel_reason is not None:  # stopped while it was being opened
                raise asyncio.CancelledError
            permission_hooks.set(functools.partial(self._permission, run))
            await self._steps(run)
            await self.answered(run.session, run.run_id, run.answer)
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
            try:
                await self._finish_durably(run, status, reason)
            finally:
                early, run.early = run.early, None  # a turn that ended before its first step
                await opening.discard(early)

    async def _steps(self, run: Run) -> None:
        """Steps while the model asks for tools; when it is done, its Stop hooks may ask for
        one more round of steps (once per turn)."""
        continued = False
        while True:
            while await self.steps.run(run):
                pass
            if continued or not await self._stop_hooks(run):
                return
            continued = True

    async def _stop_hooks(self, run: Run) -> bool:
        """Run the Stop hooks; True if they deny the ending: their reason is stored as a system
        message (Foya's `<hook_context source="stop">`) for the model's next step."""
        row = await self.sessions.row(run.session)
        if not self.hooks.wants(STOP, row):
            return False
        history = await self.sessions.history(run.session)
        last = {m.get("role"): str(m.get("content") or "") for m in history}
        fields = {
            "user_prompt": last.get("user", ""),
            "assistant_message": last.get("assistant", ""),
        }
        said = await self.hooks.run(STOP, row, run.run_id, fields)
        facts = said.facts(run.session, run.run_id)
        go_on = said.decision == "deny" and not said.halt
        if go_on:
            note = f'<hook_context source="stop">\n{said.feedback(CONTINUE)}\n</hook_context>'
            message: Message = {"role": "system", "content": note, "created_at": iso_now()}
            facts.append(EventDraft(run.session, k.MESSAGE_END, message, run.run_id))
        await self.sessions.facts.emit_all(run.session, facts)
        return go_on

    async def _permission(self, run: Run, ask: Ask, request_id: str) -> Decision | None:
        """The turn's PermissionRequest hooks on a tool call that needs approval, matched on
        the tool's name (`tool_call_id` is the approval request's id, as Foya sends it): an
        allow approves it, a deny or a halt denies it, else the mode decides (None)."""
        row = await self.sessions.row(run.session)
        metadata = {
            "action": ask.action,
            "detail": ask.detail,
            "resource": ask.resource or "",
            "scope": ask.scope,
        }
        fields = {"tool_name": ask.tool_name, "tool_call_id": request_id, "metadata": metadata}
        said = await self.hooks.run(PERMISSION_REQUEST, row, run.run_id, fields, ask.tool_name)
        await self.sessions.facts.emit_all(run.session, said.facts(run.session, run.run_id))
        if said.decision == "allow":
            return "approved"
        return "denied" if said.decision == "deny" or said.halt else None

    async def _report(self, run: Run, message: str) -> None:
        """Store the turn's `error` fact; on a full disk it is logged instead (the turn still
        ends with `turn_complete` once there is room)."""
        try:
            await self.sessions.facts.emit(EventDraft(run.session, k.ERROR, message, run.run_id))
        except InsufficientStorage:
            self.log.error("turn failed", session=run.session, error=message)

    async def _finish_durably(self, run: Run, status: Status, reason: str | None) -> None:
        """`_finish`, retried while the disk is full; shutdown cancels the wait. A cancel during
        the write (a second stop of an ending turn) lets `turn_complete` be stored first."""
        for attempt in itertools.count():
            try:
                await settled(self._finish(run, status, reason))
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
        done = _complete(run, completed, status, reason)
        closing.append(EventDraft(run.session, k.TURN_COMPLETE, done, run.run_id))
        # turn_complete stays the turn's last fact; the phase change follows it.
        await self.sessions.save(run.session, {"phase": "idle"}, [], closing)
        run.text, run.reasoning = [], []
        run.completed = True
        if status == "completed":
            self.titles.schedule(run.session)
            self.turn_completed()


def _complete(run: Run, completed: str, status: Status, reason: str | None) -> TurnComplete:
    done = TurnComplete(
        run_id=run.run_id, started_at=run.started_at, completed_at=completed, status=status
    )
    if reason:
        done["reason"] = reason
    return done
