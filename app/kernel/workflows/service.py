"""Plan mode (Foya's plan workflow): a session plans read-only, the user approves, it executes.

A session's `agent_mode` follows its plan workflow (Foya's transitions):

- `start_plan` (the builtin `plan` command, `args` the goal): any other open or approved
  workflow of the session is closed, a new one is `active`, the session is `plan`
  (`pre_plan_mode` execute), and the goal is submitted as a turn (command `plan`).
- `answered`, when a turn's model is done: the final answer of a turn of an `active` plan
  becomes its content, the workflow `ready`, the session `plan_ready`.
- `approve` (a `ready` workflow): `approved`, the session `execute` again, and a turn is
  submitted that carries out the plan.
- `close` (`DELETE`, an `active` or `ready` workflow): the session's turn is stopped (a user
  stop: the queue pauses), the workflow `closed`, the session back to its `pre_plan_mode`
  (execute).

While a workflow is open, `policy` limits the session's tools and `instructions` is added to
its system prompt (`app.kernel.workflows.policy`). Each change rewrites `workflows.json` and the
plan file, then stores the session's new mode (`session_updated`) and `workflow_updated` (the
record) in one transaction; if any of it fails, both files are put back as they were.

Errors (Foya's statuses and codes):

- `WorkflowNotFound` 404 `not_found`: no such workflow in this session (an unknown session is
  `SessionNotFound`, 404 `not_found` too)
- `InvalidWorkflow` 400 `bad_request`: an empty goal; approving a workflow that is not `ready`,
  closing one that is not `active` or `ready`
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel

from app import events as k
from app.errors import BadRequest, FoyaError, NotFound
from app.events import EventDraft
from app.kernel.ids import iso_now, new_id
from app.kernel.sessions import SessionRow, Sessions
from app.kernel.turns.control import TurnControl
from app.kernel.turns.inputs import TurnAccepted, TurnInput, validate_turn
from app.kernel.workflows import policy, records
from app.kernel.workflows.records import OPEN, Status, Workflow
from app.logs import get_logger
from app.tools.base import settled

PLAN = "plan"


class WorkflowNotFound(NotFound):
    """No such workflow in the session."""


class InvalidWorkflow(BadRequest):
    """A workflow request that does not fit the workflow's state (or an empty goal)."""


class WorkflowApproval(BaseModel):
    """`POST …/workflow/{id}/approve`: the approved workflow and its execution turn."""

    workflow: Workflow
    submission: TurnAccepted


class PlanColumns(TypedDict):
    """The session columns plan mode sets: its mode, and the one to go back to."""

    agent_mode: str
    pre_plan_mode: str | None


class Workflows:
    """The plan workflows of every session, kept in memory and in `workflows.json`."""

    def __init__(self, data_dir: Path, sessions: Sessions, turns: TurnControl) -> None:
        self.path = data_dir / records.FILE
        self.sessions = sessions
        self.turns = turns
        self.records: dict[str, Workflow] = {}
        self._lock = asyncio.Lock()
        self.log = get_logger("foya.workflows")

    def load(self) -> None:
        """Read `workflows.json` (at start)."""
        self.records = records.load(self.path)

    # -- reads ---------------------------------------------------------------------------------

    def open(self, session: str) -> Workflow | None:
        """The session's open (`active` or `ready`) workflow, if any."""
        found = [r for r in self.records.values() if r.session_id == session and r.status in OPEN]
        return max(found, key=lambda r: r.updated_at, default=None)

    def policy(self, row: SessionRow) -> Collection[str] | None:
        """A `ToolRunner` policy: the read-only tools while the session plans."""
        return policy.PLAN_TOOLS if self.open(str(row["id"])) else None

    def instructions(self, row: SessionRow) -> str | None:
        """What a planning session's system prompt must add (None otherwise)."""
        found = self.open(str(row["id"]))
        return policy.instructions(found.goal) if found else None

    async def current(self, session: str) -> Workflow | None:
        """`GET /sessions/{id}/workflow`: the open workflow, or None."""
        await self.sessions.row(session)
        return self.open(session)

    # -- transitions ---------------------------------------------------------------------------

    async def start_plan(
        self, session: str, goal: str, workspace_files: list[str] | None = None
    ) -> tuple[Workflow, TurnAccepted]:
        """Put the session in plan mode for `goal` and submit the goal as its turn, with the
        workspace files the user picked."""
        turn = TurnInput(message=goal.strip(), workspace_files=workspace_files or None)
        if not turn.message:
            raise InvalidWorkflow("workflow goal is required")
        validate_turn(turn)  # refused input changes nothing
        if turn.workspace_files:
            turn.workspace_files = await self.turns.workspace_files(session, turn.workspace_files)
        row = await self.sessions.row(session)
        base = self.sessions.workspace(row)
        now = iso_now()
        wid = f"wf-{new_id()}"
        record = Workflow(
            id=wid,
            session_id=session,
            kind=PLAN,
            status="active",
            goal=turn.message,
            path=str(records.plan_path(base, wid)),
            revision=1,
            created_at=now,
            updated_at=now,
        )

        def change() -> list[Workflow]:
            ended = [
                _moved(r, "closed")
                for r in self.records.values()
                if r.session_id == session and r.status in (*OPEN, "approved")
            ]
            return [*ended, record]

        await self._commit(session, change, {"agent_mode": PLAN, "pre_plan_mode": "execute"})
        return record, await self.turns.submit(session, turn, PLAN)

    async def answered(self, session: str, run_id: str, answer: str) -> None:
        """A turn's model is done with `answer`: an `active` plan becomes `ready` with it.
        A failure is reported on the session's stream; the turn goes on to its end."""
        found = self.open(session)
        if found is None or found.status != "active" or not answer.strip():
            return

        def change() -> list[Workflow]:
            current = self.records.get(found.id)
            if current is None or current.status != "active":
                return []
            return [_moved(current, "ready", content=answer.strip())]

        columns: PlanColumns = {"agent_mode": "plan_ready", "pre_plan_mode": "execute"}
        try:
            await self._commit(session, change, columns)
        except (FoyaError, OSError) as exc:
            message = exc.message if isinstance(exc, FoyaError) else str(exc)
            self.log.error("could not save a workflow", session=session, error=message)
            draft = EventDraft(session, k.ERROR, f"Failed to save workflow: {message}", run_id)
            await self.sessions.facts.emit(draft)

    async def approve(self, session: str, workflow_id: str) -> WorkflowApproval:
        """Approve a `ready` plan: the session executes again, starting with the plan."""
        await self.sessions.row(session)

        def change() -> list[Workflow]:
            return [_moved(self._in_state(session, workflow_id, ("ready",)), "approved")]

        columns: PlanColumns = {"agent_mode": "execute", "pre_plan_mode": None}
        approved = (await self._commit(session, change, columns))[-1]
        turn = TurnInput(message=policy.execution_prompt(approved.path))
        return WorkflowApproval(
            workflow=approved, submission=await self.turns.submit(session, turn, PLAN)
        )

    async def close(self, session: str, workflow_id: str) -> Workflow:
        """Abandon an open workflow: stop the session's turn, leave plan mode."""
        await self.sessions.row(session)
        self._in_state(session, workflow_id, OPEN)
        await self.turns.cancel(session, "user_stop")

        def change() -> list[Workflow]:
            return [_moved(self._in_state(session, workflow_id, OPEN), "closed")]

        # Back to `pre_plan_mode`, which plan mode always sets to execute.
        columns: PlanColumns = {"agent_mode": "execute", "pre_plan_mode": None}
        return (await self._commit(session, change, columns))[-1]

    async def end_session(self, session: str) -> None:
        """Forget a deleted session's workflows (its plan files stay where they are)."""
        async with self._lock:
            kept = {i: r for i, r in self.records.items() if r.session_id != session}
            if len(kept) != len(self.records):
                self.records = kept
                await settled(asyncio.to_thread(records.save, self.path, kept.values()))

    # -- one change ----------------------------------------------------------------------------

    def _in_state(self, session: str, workflow_id: str, states: tuple[Status, ...]) -> Workflow:
        found = self.records.get(workflow_id)
        if found is None or found.session_id != session:
            raise WorkflowNotFound(f"workflow {workflow_id} not found")
        if found.status not in states:
            raise InvalidWorkflow(f"invalid workflow status: the workflow is {found.status}")
        return found

    async def _commit(
        self, session: str, change: Callable[[], list[Workflow]], columns: PlanColumns
    ) -> list[Workflow]:
        """Apply `change` (the records it returns, computed under the lock; the last is the one
        the client is told of): `workflows.json`, the plan file, then the session's `columns`
        with `workflow_updated`. Carried through even if the caller is cancelled meanwhile."""
        async with self._lock:
            changed = change()
            if changed:
                await settled(self._apply(session, changed, columns))
            return changed

    async def _apply(self, session: str, changed: list[Workflow], columns: PlanColumns) -> None:
        before = dict(self.records)
        self.records.update((r.id, r) for r in changed)
        record = changed[-1]
        try:
            await asyncio.to_thread(self._write, record)
            updated = EventDraft(session, k.WORKFLOW_UPDATED, record.payload())
            await self.sessions.save(session, columns, [updated])
        except Exception:
            self.records = before
            with contextlib.suppress(OSError, FoyaError):
                await asyncio.to_thread(self._undo, record, before.get(record.id))
            raise

    def _write(self, record: Workflow) -> None:
        records.save(self.path, self.records.values())
        records.write_plan(record)

    def _undo(self, record: Workflow, previous: Workflow | None) -> None:
        """Put the file and the plan file back as they were before `record` (best effort)."""
        records.save(self.path, self.records.values())
        if previous is not None:
            records.write_plan(previous)
        else:
            Path(record.path).unlink(missing_ok=True)


def _moved(record: Workflow, status: Status, **fields: Any) -> Workflow:
    """`record` in `status` (with `fields`), one revision later."""
    update = {"status": status, "revision": record.revision + 1, "updated_at": iso_now()}
    return record.model_copy(update={**update, **fields})
