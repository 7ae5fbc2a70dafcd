"""One step of a turn: build the model request (compacting first if it would not fit), stream the
reply (deltas published, never stored), record the step, then run the requested tools.
`Steps.run` returns True while the model wants to go on.

Recording a step is one transaction: `usage_updated`, `context_request_accepted`, the assistant
`message_end` and one `tool_update` per requested call (reference §2 order) are stored together
and published in order, so a one-step text turn costs two commits after its user message (this
one and `turn_complete`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from app import events as k
from app.errors import FoyaError
from app.events import (
    Checkpoint,
    ContextRequestAccepted,
    EventDraft,
    Message,
    ToolBegin,
    ToolUpdate,
)
from app.kernel import usage
from app.kernel.ids import iso_now
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
from app.kernel.turns import compaction, context
from app.kernel.turns.compaction import Compactor
from app.kernel.turns.loopguard import LoopGuard
from app.kernel.turns.tooling import Emit, ToolRunner, parsed
from app.kernel.usercontext.prompt import PromptContext, Where, activity
from app.logs import get_logger
from app.metrics import Metrics
from app.providers.base import (
    ChatRequest,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from app.store import Store
from app.tools import ToolResult
from app.wire import arguments_text

SNAPSHOT_EVERY = 0.25

#: What a session's state adds to its system prompt (plan mode's instructions), or None.
Instructions = Callable[[dict[str, Any]], str | None]


def agent_role(row: dict[str, Any]) -> str | None:
    """A sub-agent's role instructions (its definition's body), stored on its row."""
    text = row.get("agent_instructions")
    return f"<agent_instructions>\n{text}\n</agent_instructions>" if text else None


class StepLimitReached(FoyaError):
    code = "max_turns_reached"


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
    guard: LoopGuard = field(default_factory=LoopGuard)
    answer: str = ""  # the text of the model's last reply, once it asked for no more tools

    def begin(self, run_id: str, started_at: str) -> None:
        """Reset the per-turn state for a new turn of this runner."""
        self.run_id, self.started_at = run_id, started_at
        self.text, self.reasoning = [], []
        self.steps, self.overflow_retried, self.completed = 0, False, False
        self.answer = ""
        self.guard = LoopGuard()
        self.turn = None

    def partial(self) -> Message:
        message: Message = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message["reasoning"] = "".join(self.reasoning)
        message["turn_started_at"] = self.started_at
        return message


@dataclass(frozen=True)
class UserInput:
    """The user's context in a step's request: the system message, the text of messages that
    named a skill (by event seq), and the estimated tokens of the context sections."""

    system: dict[str, Any]
    expanded: dict[int, str]
    tokens: int


class Request(NamedTuple):
    """A step's model request and what its `context_request_accepted` records."""

    chat: ChatRequest
    route: str
    through_seq: int
    checkpoint_id: str | None
    context_tokens: int


@dataclass
class Streamed:
    """What one model reply brought: its tool calls (by index) and its usage."""

    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Usage | None = None


def emitter(sessions: Sessions, run: Run) -> Emit:
    """Store and publish one event of `run` (forgetting a finished file `journal` with it)."""

    async def emit(
        kind: str, payload: Any, blobs: dict[str, bytes] | None = None, journal: int | None = None
    ) -> None:
        draft = EventDraft(run.session, kind, payload, run.run_id, blobs or {})
        await sessions.facts.emit(draft, journal=journal)

    return emit


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
        prompt: PromptContext | None = None,
    ) -> None:
        self.sessions = sessions
        self.store = store
        self.providers = providers
        self.tool_runner = tool_runner
        self.compactor = compactor
        self.metrics = metrics
        self.prompt = prompt
        self.instructions: list[Instructions] = [agent_role]
        self.log = get_logger("foya.turns")

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

    async def _request(self, run: Run, row: dict[str, Any], cwd: Path) -> Request:
        """The step's model request (compacting first if it would not fit); its route, the last
        message seq it includes and the checkpoint it starts from."""
        connection = self.providers.connections.get(row["connection_id"])
        route = compaction.route_key(row, connection)
        window = compaction.context_window(connection, row["model"])
        for attempt in range(2):
            # Only the messages after the checkpoint are read: the summary stands for the rest.
            checkpoint, history, accepted = await self.store.request_inputs(run.session, route)
            after = int(checkpoint["through_seq"]) if checkpoint else 0
            user = await self._user_context(row, cwd, history, opening=not run.steps)
            notes = [text for note in self.instructions if (text := note(row))]
            if notes:
                content = "\n\n".join([user.system["content"], *notes])
                user = dataclasses.replace(user, system={**user.system, "content": content})
            messages = context.build(user.system, history, checkpoint, user.expanded)
            estimate = self._estimate(accepted, messages, history, checkpoint, user)
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
            tools=self.tool_runner.schemas(row),
            reasoning_effort=row.get("reasoning_effort") or None,
        )
        last = int(history[-1]["event_seq"]) if history else after
        return Request(request, route, last, checkpoint["id"] if checkpoint else None, user.tokens)

    async def _user_context(
        self, row: dict[str, Any], cwd: Path, history: list[Message], opening: bool = False
    ) -> UserInput:
        """The system message with the user's context (rules, memory, skills, AGENTS.md), and
        the text of messages that named a skill, read off the event loop. In a turn's `opening`
        step, a skill its message names that cannot be loaded fails the turn."""
        if self.prompt is None:
            return UserInput(context.system_message(cwd), {}, 0)
        prompt = self.prompt
        where = self.where(row, cwd)

        def read() -> UserInput:
            done = activity(history, cwd)
            if row.get("import_rule"):  # the imported session's own system prompt, a manual rule
                done += f"\n@{row['import_rule']}"
            sections = prompt.sections(where, done)
            text = "\n\n".join(s.text for s in sections)
            users = [m for m in history if m.get("role") == "user"]
            expanded = {
                int(m["event_seq"]): prompt.invoked_skill(
                    str(m["skill_ref"]),
                    where,
                    str(m.get("content") or ""),
                    strict=opening and m is users[-1],
                )
                for m in users
                if m.get("skill_ref")
            }
            tokens = compaction.estimate_tokens([{"content": text}]) if text else 0
            return UserInput(context.system_message(cwd, text), expanded, tokens)

        return await asyncio.to_thread(read)

    def where(self, row: dict[str, Any], cwd: Path) -> Where:
        """The session's project (if it still exists) and working directory."""
        projects = self.sessions.projects
        pid = row.get("project_id")
        if pid and projects.exists(pid):
            return Where(pid, Path(str(projects.get(pid)["path"])), cwd)
        return Where(None, None, cwd)

    @staticmethod
    def _estimate(
        accepted: dict[str, Any] | None,
        messages: list[dict[str, Any]],
        history: list[Message],
        checkpoint: Checkpoint | None,
        user: UserInput,
    ) -> int:
        """Tokens of `messages`: the `accepted` request's real count for what it covered (if the
        context below it has not changed since), corrected by how much the user's context grew
        or shrank since, plus an estimate of the rest."""
        same_base = accepted is not None and accepted["checkpoint_id"] == (
            checkpoint["id"] if checkpoint else None
        )
        if accepted is None or not same_base or not accepted["input_tokens"]:
            return compaction.estimate_tokens(messages)
        newer = [m for m in history if int(m["event_seq"]) > accepted["through_seq"]]
        grown = user.tokens - int(accepted.get("context_tokens") or 0)
        return (
            int(accepted["input_tokens"])
            + grown
            + compaction.estimate_tokens([context.to_openai(m, user.expanded) or {} for m in newer])
        )

    async def _step(self, run: Run) -> bool:
        """One model request and its tools; True if the model asked for tools (go on)."""
        row = await self.sessions.row(run.session)
        limit = row.get("agent_max_turns")
        if limit and run.steps >= limit:  # a sub-agent's `max_turns`
            raise StepLimitReached(f"the agent reached its limit of {limit} model steps")
        cwd = self.sessions.workspace(row)
        provider = self.providers.for_session(row)
        request = await self._request(run, row, cwd)
        run.steps += 1
        streamed = await self._stream(run, provider.stream(request.chat))
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
            "through_seq": request.through_seq,
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
    def _reply(run: Run, tool_calls: list[dict[str, Any]]) -> Message:
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
    def _draft(run: Run, kind: str, payload: Any) -> EventDraft:
        return EventDraft(run.session, kind, payload, run.run_id)

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
            begun: ToolBegin = {"id": call["id"], "name": call["name"], "status": "queued"}
            await self.sessions.facts.emit(self._draft(run, k.TOOL_BEGIN, begun))
