"""Turns: the agent loop, one turn at a time per session, with its queue, tools and cancel.

A busy session has one runner task. It runs a turn, then the next queued input, until the queue
is empty or a cancel pauses it. Within a turn each step streams a model reply (deltas are
published, never stored), records usage and the assistant message, then runs the requested
tools one by one (approvals first) and records each result. Event order follows reference §2.

Cancellation is cooperative: `cancel` records the reason and cancels the turn task; the turn
saves the partial reply with `turn_status` cancelled and emits `turn_complete{cancelled}`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import events as k
from app.errors import BadRequest, Conflict, FoyaError
from app.events import EventDraft
from app.kernel import compaction, context
from app.kernel.approvals import Approvals
from app.kernel.compaction import Compactor
from app.kernel.ids import iso_now, new_id
from app.kernel.providers import Providers
from app.kernel.queue import Queues
from app.kernel.sessions import SessionBusy, Sessions
from app.kernel.titles import Titles
from app.kernel.tooling import ToolRunner, parsed
from app.logs import get_logger
from app.metrics import Metrics
from app.providers.base import (
    ChatRequest,
    Done,
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from app.store import Store
from app.tools import Tool, ToolResult

SNAPSHOT_EVERY = 0.25
STOP_GRACE = 3.0
MAX_ELEMENTS, MAX_ELEMENT_BYTES, MAX_ELEMENTS_BYTES, MAX_FILES = 8, 40 * 1024, 96 * 1024, 16


#: Cancel reasons that end the runner (the others, like queue_dispatch, only end one turn).
_ENDING = ("user_stop", "session_deleted", "context_cancelled")


class CompactionCancelled(Conflict):
    code = "compaction_cancelled"


class ToolNotRunning(Conflict):
    code = "tool_not_running"


@dataclass
class Run:
    """A busy session's runner state."""

    session: str
    task: asyncio.Task[None] | None = None
    turn: asyncio.Task[None] | None = None
    run_id: str = ""
    started_at: str = ""
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    cancel_reason: str | None = None
    tools: dict[str, asyncio.Task[ToolResult]] = field(default_factory=dict)
    steps: int = 0
    last_output: int | None = None
    overflow_retried: bool = False

    def partial(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message["reasoning"] = "".join(self.reasoning)
        message["turn_started_at"] = self.started_at
        return message


def validate_turn(body: dict[str, Any]) -> dict[str, Any]:
    """Input limits of `POST …/turns` and the queue (reference §1)."""
    message = body.get("message")
    if not isinstance(message, str) or not message.strip():
        raise BadRequest("message: must be a non-empty string", code="invalid_queue_message")
    elements = body.get("browser_elements") or []
    sizes = [len(json.dumps(e)) for e in elements]
    if len(elements) > MAX_ELEMENTS or any(s > MAX_ELEMENT_BYTES for s in sizes):
        raise BadRequest(
            f"browser_elements: at most {MAX_ELEMENTS}, {MAX_ELEMENT_BYTES // 1024} KiB each",
            code="invalid_queue_message",
        )
    if sum(sizes) > MAX_ELEMENTS_BYTES:
        raise BadRequest("browser_elements: at most 96 KiB in total", code="invalid_queue_message")
    if len(body.get("attachments") or []) > MAX_FILES:
        raise BadRequest(f"attachments: at most {MAX_FILES}", code="invalid_queue_message")
    return body


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
        self.tool_runner = ToolRunner(tools, approvals, providers, data_dir / "trash")
        self.runs: dict[str, Run] = {}
        self.log = get_logger("foya.turns")

    # -- state ---------------------------------------------------------------------------------

    def running(self, session: str) -> bool:
        """A turn runs or a compaction is under way: new input is queued."""
        return session in self.runs or session in self.compacting

    def _turn_active(self, session: str) -> bool:
        """A turn runs or is about to (a runner that only winds down after `turn_complete`
        does not count)."""
        if session in self.compacting:
            return True
        run = self.runs.get(session)
        if run is None:
            return False
        queue = self.queues.of(session)
        pending = bool(queue.items) and not queue.paused
        return run.turn is None or not run.turn.done() or pending

    def is_busy(self, session: str) -> bool:
        return session in self.runs or bool(self.queues.of(session).items)

    def partial(self, session: str) -> dict[str, Any] | None:
        """The message being generated right now, if any."""
        run = self.runs.get(session)
        return run.partial() if run is not None and (run.text or run.reasoning) else None

    # -- commands ------------------------------------------------------------------------------

    async def submit(self, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start a turn, or queue the input if the session is busy."""
        await self.sessions.row(session)
        validate_turn(body)
        queue = self.queues.of(session)
        if self.running(session) or (queue.items and queue.paused):
            item = self.queues.add(session, body)
            await self._queue_changed(session)
            if not self.running(session):
                queue.paused = False
                self._start(session, None)
            return {"run_id": session, "status": "queued", "queued": item}
        queue.paused = False  # new input after a stop resumes the queue behind it
        self._start(session, body)
        return {"run_id": session, "status": "started"}

    async def enqueue(self, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Add to the queue without starting anything."""
        await self.sessions.row(session)
        item = self.queues.add(session, validate_turn(body))
        await self._queue_changed(session)
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
        """Run a queued item now: start it if idle, else put it first and cancel the turn."""
        await self.sessions.row(session)
        self.queues.to_head(session, item_id)
        await self._queue_changed(session)
        self.queues.of(session).paused = False
        if self.running(session):
            await self.cancel(session, "queue_dispatch")
            return {"run_id": session, "status": "queued"}
        self.queues.of(session).paused = False
        self._start(session, None)
        return {"run_id": session, "status": "started"}

    async def cancel(self, session: str, reason: str = "user_stop") -> None:
        """Stop the running turn (if any); a user stop also pauses the queue."""
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
        if self._turn_active(session):
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
            queue = self.queues.of(session)
            if queue.items and not queue.paused and session not in self.runs:
                self._start(session, None)  # input that arrived meanwhile

    # -- the runner ------------------------------------------------------------------------------

    def _start(self, session: str, body: dict[str, Any] | None) -> None:
        run = Run(session)
        self.runs[session] = run
        run.task = asyncio.create_task(self._drain(run, body), name=f"runner:{session}")

    async def _drain(self, run: Run, first: dict[str, Any] | None) -> None:
        try:
            body = first
            while run.cancel_reason is None:
                if body is None:
                    if self.queues.of(run.session).paused:
                        return
                    item = self.queues.pop(run.session)
                    if item is None:
                        return
                    await self._queue_changed(run.session)
                    body = {"message": item["text"], **_extras(item)}
                run.turn = asyncio.create_task(self._turn(run, body))
                await asyncio.shield(run.turn)
                body = None
                if run.cancel_reason not in _ENDING:
                    run.cancel_reason = None  # completed, failed, or dispatched: go on
        except Exception:
            self.log.exception("runner failed", session=run.session)
        finally:
            self.runs.pop(run.session, None)
            queue = self.queues.of(run.session)
            if queue.items and not queue.paused and run.cancel_reason not in _ENDING:
                self._start(run.session, None)  # input queued while this runner was ending

    async def _emit(
        self,
        run: Run,
        kind: str,
        payload: Any,
        blobs: dict[str, bytes] | None = None,
    ) -> None:
        await self.sessions.emit(EventDraft(run.session, kind, payload, run.run_id, blobs or {}))

    async def _set_phase(
        self, run: Run, phase: str, then: list[EventDraft], before: list[EventDraft] | None = None
    ) -> None:
        """Change the session's phase, between `before` and `then`, in one commit."""
        columns = {"phase": phase, "updated_at_ns": time.time_ns()}
        await self.sessions.save(run.session, columns, then, before)

    async def _queue_changed(self, session: str) -> None:
        items = self.queues.items(session)
        await self.sessions.emit(EventDraft(session, k.QUEUE_UPDATED, {"items": items}))

    async def _turn(self, run: Run, body: dict[str, Any]) -> None:
        run.run_id, run.started_at = new_id(), iso_now()
        run.text, run.reasoning = [], []
        run.steps, run.overflow_retried = 0, False
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
        status, reason = "completed", None
        try:
            while await self._step_or_compact(run):
                pass
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            status, reason = "cancelled", run.cancel_reason or "user_stop"
        except ProviderError as exc:
            status, reason = "failed", "error"
            await self._emit(run, k.ERROR, exc.message)
        except Exception as exc:
            self.log.exception("turn failed", session=run.session)
            status, reason = "failed", "error"
            await self._emit(run, k.ERROR, f"internal error ({type(exc).__name__})")
        finally:
            await self._finish(run, status, reason)

    async def _finish(self, run: Run, status: str, reason: str | None) -> None:
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
        await self.store.clear_snapshot(run.session)  # after turn_complete: see snapshots.py
        if status == "completed":
            self.titles.schedule(run.session)

    async def _step_or_compact(self, run: Run) -> bool:
        """A step; after the provider's first context-overflow error in a turn, compact and
        let the loop try the step once more."""
        try:
            return await self._step(run)
        except ProviderError as exc:
            if exc.kind != "context_overflow" or run.overflow_retried:
                raise
            run.overflow_retried = True
            run.text, run.reasoning = [], []
            try:
                await self.compactor.compact(run.session, "mid_turn", run.run_id)
            except FoyaError:
                raise exc from None
            return True

    async def _request(
        self, run: Run, row: dict[str, Any], cwd: Path
    ) -> tuple[ChatRequest, str, int, str | None]:
        """The step's model request (compacting first if it would not fit); its route, the last
        message seq it includes and the checkpoint it starts from."""
        connection = self.providers.connections.get(row["connection_id"])
        route = compaction.route_key(row, connection)
        window = compaction.context_window(connection, row["model"])
        for attempt in range(2):
            # Only the messages after the checkpoint are read: the summary stands for the rest.
            checkpoint = await self.store.checkpoint(run.session)
            after = int(checkpoint["through_seq"]) if checkpoint else 0
            history = await self.store.history(run.session, after_seq=after)
            messages = context.build(cwd, history, checkpoint)
            estimate = await self._estimate(run.session, route, messages, history, checkpoint)
            if attempt or not compaction.over_budget(estimate, window, run.last_output):
                break
            phase = "mid_turn" if run.steps else "pre_turn"
            try:
                await self.compactor.compact(run.session, phase, run.run_id)
            except FoyaError as exc:  # nothing to compact, or the summary failed: try as is
                self.log.warning("compaction before a request failed", error=exc.message)
                break
        request = ChatRequest(
            model=row["model"],
            messages=messages,
            tools=self.tool_runner.schemas(),
            reasoning_effort=row.get("reasoning_effort") or None,
        )
        last = int(history[-1]["event_seq"]) if history else after
        return request, route, last, checkpoint["id"] if checkpoint else None

    async def _estimate(
        self,
        session: str,
        route: str,
        messages: list[dict[str, Any]],
        history: list[dict[str, Any]],
        checkpoint: dict[str, Any] | None,
    ) -> int:
        """Tokens of `messages`: the last accepted request's real count for what it covered
        (if the context below it has not changed since), plus an estimate of the rest."""
        accepted = await self.store.boundary(session, route)
        same_base = accepted is not None and accepted["checkpoint_id"] == (
            checkpoint["id"] if checkpoint else None
        )
        if accepted is None or not same_base or not accepted["input_tokens"]:
            return compaction.estimate_tokens(messages)
        newer = [m for m in history if int(m["event_seq"]) > accepted["through_seq"]]
        return int(accepted["input_tokens"]) + compaction.estimate_tokens(
            [context.to_openai(m) or {} for m in newer]
        )

    async def _step(self, run: Run) -> bool:
        """One model request and its tools; True if the model asked for tools (go on)."""
        row = await self.sessions.row(run.session)
        cwd = self.sessions.workspace(row)
        provider = self.providers.for_session(row)
        request, route, through_seq, checkpoint_id = await self._request(run, row, cwd)
        run.steps += 1
        calls: dict[int, dict[str, Any]] = {}
        usage: Usage | None = None
        last_snapshot = time.monotonic()
        async for item in provider.stream(request):
            if isinstance(item, TextDelta | ReasoningDelta):
                kind = k.MESSAGE_DELTA if isinstance(item, TextDelta) else k.REASONING_DELTA
                (run.text if isinstance(item, TextDelta) else run.reasoning).append(item.text)
                if self.sessions.publish_delta(run.session, kind, item.text, run.run_id):
                    # A burst from one network read would overflow a subscriber's buffer
                    # before its writer runs: let the writers drain first.
                    await asyncio.sleep(0)
            elif isinstance(item, ToolCallDelta):
                await self._tool_delta(run, calls, item)
            elif isinstance(item, Usage):
                usage = item
            elif isinstance(item, Done):
                pass
            if time.monotonic() - last_snapshot >= SNAPSHOT_EVERY and run.text:
                last_snapshot = time.monotonic()
                await self.store.put_snapshot(run.session, run.run_id, run.partial())
        tokens = {
            "input_tokens": usage.input_tokens if usage else 0,
            "output_tokens": usage.output_tokens if usage else 0,
            "total_tokens": usage.total_tokens if usage else 0,
            "cached_tokens": usage.cached_tokens if usage else 0,
        }
        if usage is not None:
            run.last_output = usage.output_tokens
            await self._emit(run, k.USAGE_UPDATED, {"model": row["model"], **tokens})
            for kind in ("input", "output", "cached"):
                self.metrics.tokens.labels(row["model"], kind).inc(tokens[f"{kind}_tokens"])
        accepted = {
            "session_id": run.session,
            "route": route,
            "through_seq": through_seq,
            "usage": tokens,
            "payload_bytes": len(json.dumps(request.messages, ensure_ascii=False)),
            "checkpoint_id": checkpoint_id,
        }
        await self._emit(run, k.CONTEXT_REQUEST_ACCEPTED, accepted)
        tool_calls = [parsed(calls[i]) for i in sorted(calls)]
        message = run.partial()
        del message["turn_started_at"]
        message["created_at"] = iso_now()
        if tool_calls:
            message["tool_calls"] = [
                {key: c[key] for key in ("id", "name", "input")} for c in tool_calls
            ]
        else:
            message.update(
                turn_started_at=run.started_at,
                turn_completed_at=iso_now(),
                turn_status="completed",
            )
        await self._emit(run, k.MESSAGE_END, message)
        run.text, run.reasoning = [], []
        if not tool_calls:
            return False
        for call in tool_calls:
            await self._emit(
                run,
                k.TOOL_UPDATE,
                {
                    "id": call["id"],
                    "name": call["name"],
                    "input": call["input"],
                    "status": "pending",
                },
            )
        emit = functools.partial(self._emit, run)
        for call in tool_calls:
            await self.tool_runner.run(run.session, row, cwd, call, emit, run.tools)
        return True

    async def _tool_delta(
        self, run: Run, calls: dict[int, dict[str, Any]], item: ToolCallDelta
    ) -> None:
        call = calls.setdefault(item.index, {"id": None, "name": None, "args": [], "begun": False})
        if item.id:
            call["id"] = item.id
        if item.name:
            call["name"] = item.name
        call["args"].append(item.arguments)
        if call["id"] and call["name"] and not call["begun"]:
            call["begun"] = True
            await self._emit(
                run, k.TOOL_BEGIN, {"id": call["id"], "name": call["name"], "status": "queued"}
            )


def _extras(body: dict[str, Any]) -> dict[str, Any]:
    return {
        key: body[key] for key in ("skill_ref", "attachments", "browser_elements") if body.get(key)
    }
