"""One step of a turn: build the model request (compacting first if it would not fit), stream the
reply (deltas published, never stored), record usage, the accepted boundary and the assistant
message, then run the requested tools. `Steps.run` returns True while the model wants to go on.
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
from app.errors import FoyaError
from app.events import EventDraft
from app.kernel import compaction, context
from app.kernel.compaction import Compactor
from app.kernel.ids import iso_now
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
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
from app.tools import ToolResult

SNAPSHOT_EVERY = 0.25


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
    completed: bool = False  # `turn_complete` is stored: only bookkeeping is left of the turn

    def partial(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message["reasoning"] = "".join(self.reasoning)
        message["turn_started_at"] = self.started_at
        return message


async def emit(
    sessions: Sessions,
    run: Run,
    kind: str,
    payload: Any,
    blobs: dict[str, bytes] | None = None,
    journal: int | None = None,
) -> None:
    """Store and publish one event of `run`; forget a finished file `journal` with it."""
    draft = EventDraft(run.session, kind, payload, run.run_id, blobs or {})
    if journal is None:
        await sessions.emit(draft)
    else:
        await sessions.commit(run.session, lambda: sessions.store.append(draft, journal=journal))


class Steps:
    """The model-and-tools steps of turns."""

    def __init__(
        self,
        sessions: Sessions,
        store: Store,
        providers: Providers,
        tool_runner: ToolRunner,
        compactor: Compactor,
        metrics: Metrics,
    ) -> None:
        self.sessions = sessions
        self.store = store
        self.providers = providers
        self.tool_runner = tool_runner
        self.compactor = compactor
        self.metrics = metrics
        self.log = get_logger("foya.turns")
        self._emit = functools.partial(emit, sessions)

    async def run(self, run: Run) -> bool:
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
        if any(isinstance(m.get("content"), list) for m in messages):
            load = functools.partial(self.sessions.artifacts.read, run.session)
            messages = await asyncio.to_thread(context.inline_images, messages, load)
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
