"""One step of a turn: build the model request (`app.kernel.turns.request`: compacting first if
it would not fit), stream the reply (deltas published, never stored), record the step, then run
the requested tools. `Steps.run` returns True while the model wants to go on. A turn's first
step may find its request already sent, before the turn's opening commit
(`app.kernel.turns.opening`).

Recording a step is one transaction: `usage_updated`, `context_request_accepted`, the assistant
`message_end` and one `tool_update` per requested call (Foya's order) are stored together
and published in order, so a one-step text turn costs two commits after its user message (this
one and `turn_complete`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TypeVar

from app import events as k
from app.errors import FoyaError
from app.events import (
    ContextRequestAccepted,
    EventDraft,
    Kind,
    Message,
    ToolBegin,
    ToolUpdate,
)
from app.kernel import usage
from app.kernel.ids import iso_now
from app.kernel.sessions import Sessions
from app.kernel.turns.opening import Opening
from app.kernel.turns.request import PENDING, Requests
from app.kernel.turns.run import Run
from app.kernel.turns.toolcalls import Emit, ParsedCall, PartialCall, parsed
from app.metrics import Metrics
from app.providers.base import (
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from app.wire import arguments_text

__all__ = ["Run", "StepLimitReached", "Steps", "emitter"]

P = TypeVar("P")  # an event kind's payload type
SNAPSHOT_EVERY = 0.25


class StepLimitReached(FoyaError):
    """A turn that reached its limit of model steps without an answer."""

    code = "max_turns_reached"


@dataclass
class Streamed:
    """What one model reply brought: its tool calls (by index) and its usage."""

    calls: dict[int, PartialCall] = field(default_factory=dict)
    usage: Usage | None = None


def emitter(sessions: Sessions, run: Run) -> Emit:
    """Store and publish one event of `run` (forgetting a finished file `journal` with it)."""

    async def emit(
        kind: Kind[P], payload: P, blobs: dict[str, bytes] | None = None, journal: int | None = None
    ) -> None:
        draft = EventDraft(run.session, kind, payload, run.run_id, blobs or {})
        await sessions.facts.emit(draft, journal=journal)

    return emit


class Steps:
    """The model-and-tools steps of turns."""

    def __init__(self, requests: Requests, metrics: Metrics) -> None:
        """`requests` builds each step's model request; the step uses the same services."""
        self.requests = requests
        self.sessions = requests.sessions
        self.store = requests.store
        self.providers = requests.providers
        self.tool_runner = requests.tool_runner
        self.compactor = requests.compactor
        self.metrics = metrics

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

    async def _begin(self, run: Run) -> Opening:
        """The step's request and its reply: the one opened with the turn's commit (the first
        step's, when there is one), else one built now."""
        early, run.early = run.early, None
        opened: Opening | None = await early if early is not None else None
        if opened is not None:
            return opened
        row = await self.sessions.row(run.session)
        limit = row.get("agent_max_turns")
        if limit and run.steps >= limit:  # a sub-agent's `max_turns`
            raise StepLimitReached(f"the agent reached its limit of {limit} model steps")
        cwd = self.sessions.workspace(row)
        provider = self.providers.for_session(row)
        request = await self.requests.build(run, row, cwd)
        return Opening(row, cwd, request, provider.stream(request.chat), None)

    async def _step(self, run: Run) -> bool:
        """One model request and its tools; True if the model asked for tools (go on)."""
        opened = await self._begin(run)
        row, cwd, request = opened.row, opened.cwd, opened.request
        run.steps += 1
        streamed = await self._stream(run, opened.items())
        through = request.through_seq
        if through == PENDING:  # built before the turn's user message had its seq
            through = await self.store.history_head(run.session)
        spent = usage.payload(row["model"], streamed.usage)
        drafts: list[EventDraft] = []
        if streamed.usage is not None:
            run.last_output = streamed.usage.output_tokens
            drafts.append(self._draft(run, k.USAGE_UPDATED, spent))
            tokens = self.metrics.tokens
            tokens.labels(row["model"], "input").inc(spent["input_tokens"])
            tokens.labels(row["model"], "output").inc(spent["output_tokens"])
            tokens.labels(row["model"], "cached").inc(spent["cached_tokens"])
        accepted: ContextRequestAccepted = {
            "session_id": run.session,
            "route": request.route,
            "through_seq": through,
            "usage": {
                "input_tokens": spent["input_tokens"],
                "output_tokens": spent["output_tokens"],
                "total_tokens": spent["total_tokens"],
                "cached_tokens": spent["cached_tokens"],
            },
            "payload_bytes": len(json.dumps(request.chat.messages, ensure_ascii=False)),
            "checkpoint_id": request.checkpoint_id,
        }
        if request.context_tokens:
            accepted["context_tokens"] = request.context_tokens
        drafts.append(self._draft(run, k.CONTEXT_REQUEST_ACCEPTED, accepted))
        tool_calls = [parsed(streamed.calls[i]) for i in sorted(streamed.calls)]
        drafts.append(self._draft(run, k.MESSAGE_END, self._reply(run, tool_calls)))
        for call in tool_calls:
            update: ToolUpdate = {
                "id": call["id"],
                "name": call["name"],
                "input": arguments_text(call["input"]),
                "status": "queued",
            }
            drafts.append(self._draft(run, k.TOOL_UPDATE, update))
        await self.sessions.facts.emit_all(run.session, drafts)
        run.answer = "" if tool_calls else "".join(run.text)
        run.text, run.reasoning = [], []
        emit = emitter(self.sessions, run)
        await self.tool_runner.run_step(
            run.session, run.run_id, row, cwd, tool_calls, emit, run.tools, run.guard
        )
        return bool(tool_calls)

    async def _stream(self, run: Run, items: AsyncIterator[StreamItem]) -> Streamed:
        """Consume the model's reply: deltas are published (never stored), tool calls gathered,
        and the text so far saved as a snapshot every `SNAPSHOT_EVERY` seconds for recovery."""
        streamed = Streamed()
        last_snapshot = time.monotonic()
        async for item in items:
            if isinstance(item, TextDelta | ReasoningDelta):
                kind = k.MESSAGE_DELTA if isinstance(item, TextDelta) else k.REASONING_DELTA
                (run.text if isinstance(item, TextDelta) else run.reasoning).append(item.text)
                if self.sessions.facts.publish_delta(run.session, kind, item.text, run.run_id):
                    # A burst from one network read would overflow a subscriber's buffer
                    # before its writer runs: let the writers drain first.
                    await asyncio.sleep(0)
            elif isinstance(item, ToolCallDelta):
                await self._tool_delta(run, streamed.calls, item)
            elif isinstance(item, Usage):
                streamed.usage = item
            if time.monotonic() - last_snapshot >= SNAPSHOT_EVERY and run.text:
                last_snapshot = time.monotonic()
                await self.store.put_snapshot(run.session, run.run_id, run.partial())
        return streamed

    @staticmethod
    def _reply(run: Run, tool_calls: list[ParsedCall]) -> Message:
        """The step's assistant message: its calls, or (the last step) the turn's timings."""
        message = run.partial()
        del message["turn_started_at"]
        message["created_at"] = iso_now()
        if tool_calls:
            message["tool_calls"] = [
                {"id": c["id"], "name": c["name"], "input": c["input"]} for c in tool_calls
            ]
        else:
            message["turn_started_at"] = run.started_at
            message["turn_completed_at"] = iso_now()
            message["turn_status"] = "completed"
        return message

    @staticmethod
    def _draft(run: Run, kind: Kind[P], payload: P) -> EventDraft:
        return EventDraft(run.session, kind, payload, run.run_id)

    async def _tool_delta(
        self, run: Run, calls: dict[int, PartialCall], item: ToolCallDelta
    ) -> None:
        call = calls.setdefault(item.index, {"id": None, "name": None, "args": [], "begun": False})
        if item.id:
            call["id"] = item.id
        if item.name:
            call["name"] = item.name
        call["args"].append(item.arguments)
        if call["id"] and call["name"] and not call["begun"]:
            call["begun"] = True
            begun: ToolBegin = {"id": call["id"], "name": call["name"], "status": "queued"}
            await self.sessions.facts.emit(self._draft(run, k.TOOL_BEGIN, begun))
