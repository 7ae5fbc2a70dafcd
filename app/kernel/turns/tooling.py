"""Running the tool calls of a step: approval first, then the tool, then its recorded result.

Calls of tools declared `parallel` (they never change anything) run side by side, at most
`MAX_PARALLEL` at once; the others run one after another, in the model's order. Each step's
results are recorded in call order either way. Each call announces itself with a `tool_update`
(Foya's card states: `running` as it starts, `error` when the loop guard holds it back), then
ends with `tool_end` and its `message_end`. A session may be limited to some tools
(`ToolPolicy`: a sub-agent's allowed tools, plan mode); a call of another tool is refused with
an error result. The turn's `LoopGuard` holds back a call that keeps failing and ends a turn
that repeats itself.

A tool's `exposure` (Foya's; absent means `direct`) decides whether the model is offered it:
`direct` always, `hidden` never, `deferred` once `tool_search` activated it for the session
(`activate`; from the next step on, for as long as the kernel runs). A call of a tool not
offered is refused like a call of a tool the session may not use.

A file tool's change is journaled before it reaches the disk and forgotten when its record
commits (`app.kernel.turns.intents`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app import events as k
from app.events import ToolUpdate
from app.jsontypes import JSONObject
from app.kernel.approvals import Approvals, Ask, Decision
from app.kernel.providers import Providers
from app.kernel.sessionrow import SessionRow
from app.kernel.turns.intents import Intent, intender, record, undo
from app.kernel.turns.loopguard import LoopGuard, call_signature, gate_text
from app.kernel.turns.toolcalls import Emit, ParsedCall, exposure, schema
from app.kernel.turns.tooltable import ToolTable
from app.logs import get_logger
from app.store import Store
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import ToolContext, inside, settled
from app.wire import arguments_text

GUARDIAN_PROMPT = (
    "You review tool calls of a coding agent for safety. Answer with exactly one word: ALLOW if "
    "the call is a reasonable, non-destructive step for a developer's task, DENY otherwise."
)

#: The tool names a session may use (None: no limit of this policy's), from its row.
ToolPolicy = Callable[[SessionRow], Collection[str] | None]

MAX_PARALLEL = 5


def allowed_tools_policy(row: SessionRow) -> Collection[str] | None:
    """A sub-agent's `allowed_tools` (stored as JSON on its row)."""
    raw = row.get("allowed_tools_json")
    return None if raw is None else frozenset(json.loads(raw))


@dataclass
class _Step:
    """What every call of one step shares."""

    session: str
    run_id: str
    row: SessionRow
    cwd: Path
    tools: dict[str, Tool]
    emit: Emit
    running: dict[str, asyncio.Task[ToolResult]]
    guard: LoopGuard


@dataclass
class _Call:
    """One call of a step: what it asked, its change journal, and (once run) its result."""

    call: ParsedCall
    intent: Intent = field(default_factory=Intent)
    result: ToolResult | None = None


class ToolRunner:
    """Executes parsed tool calls for a session and records each result."""

    def __init__(
        self,
        tools: ToolTable,
        approvals: Approvals,
        providers: Providers,
        trash: Path,
        store: Store,
        policies: Sequence[ToolPolicy] = (),
    ) -> None:
        """`policies` are the capabilities' limits on a session's tools (plan mode's), applied
        after a sub-agent's own `allowed_tools`."""
        self.tools = tools
        self.approvals = approvals
        self.providers = providers
        self.trash = trash
        self.store = store
        self.log = get_logger("foya.tools")
        self.policies: tuple[ToolPolicy, ...] = (allowed_tools_policy, *policies)

    def available(self, row: SessionRow) -> dict[str, Tool]:
        """The tools session `row` may use: those every policy allows, if offered at all."""
        active = self.tools.active(str(row.get("id")))
        tools = {
            name: tool
            for name, tool in self.tools.items()
            if exposure(tool) == "direct" or (exposure(tool) == "deferred" and name in active)
        }
        for policy in self.policies:
            allowed = policy(row)
            if allowed is not None:
                tools = {name: tool for name, tool in tools.items() if name in allowed}
        return tools

    def approval(self, row: SessionRow, emit: Emit) -> Callable[[Ask], Awaitable[Decision]]:
        """How a call of session `row` asks for approval: its mode, hooks and guardian."""

        async def approve(ask: Ask) -> Decision:
            return await self.approvals.check(
                row["approval_mode"],
                ask,
                emit,
                lambda a: self.providers.guardian(row, GUARDIAN_PROMPT, a),
            )

        return approve

    def activate(self, session: str, names: Collection[str]) -> None:
        """Offer these deferred tools to `session` from its next step on."""
        self.tools.activate(session, names)

    def schemas(self, row: SessionRow | None = None) -> list[JSONObject]:
        """The tools (of session `row`, if given) as Chat Completions function definitions."""
        tools = self.tools if row is None else self.available(row)
        return [schema(t) for t in tools.values()]

    async def run_step(
        self,
        session: str,
        run_id: str,
        row: SessionRow,
        cwd: Path,
        calls: list[ParsedCall],
        emit: Emit,
        running: dict[str, asyncio.Task[ToolResult]],
        guard: LoopGuard,
    ) -> None:
        """Execute a step's `calls` and record each (`tool_end` and the tool's `message_end`)
        in call order; then let the loop guard see the step (it may end the turn)."""
        step = _Step(session, run_id, row, cwd, self.available(row), emit, running, guard)
        pending = [_Call(call) for call in calls]
        try:
            lane: list[_Call] = []
            for item in pending:
                if getattr(step.tools.get(item.call["name"]), "parallel", False):
                    lane.append(item)
                    continue
                await self._side_by_side(step, lane)
                lane = []
                await self._one(step, item)
            await self._side_by_side(step, lane)
        finally:
            for item in pending:
                intent = item.intent
                if intent.journal is not None and not intent.recorded:
                    try:
                        await settled(undo(self.store, intent))
                    except Exception as exc:  # the journal stays: the next start rolls it back
                        self.log.error(
                            "could not take back an unrecorded file change", error=str(exc)
                        )
        guard.step((i.call["name"], i.call["input"], i.result.output) for i in pending if i.result)

    async def _one(self, step: _Step, item: _Call) -> None:
        await self._guarded(step, item)
        assert item.result is not None
        await record(item.call, item.result, step.emit, item.intent)

    async def _side_by_side(self, step: _Step, lane: list[_Call]) -> None:
        """Consecutive parallel calls: at most MAX_PARALLEL at once, recorded in call order."""
        if len(lane) < 2:
            for item in lane:
                await self._one(step, item)
            return
        slots = asyncio.Semaphore(MAX_PARALLEL)

        async def bounded(item: _Call) -> None:
            async with slots:
                await self._guarded(step, item)

        async with asyncio.TaskGroup() as group:
            for item in lane:
                group.create_task(bounded(item))
        for item in lane:
            assert item.result is not None
            await record(item.call, item.result, step.emit, item.intent)

    async def _guarded(self, step: _Step, item: _Call) -> None:
        """Run one call unless the loop guard holds it back; its result goes to `item`."""
        call = item.call
        signature = call_signature(call["name"], call["input"])
        update: ToolUpdate = {"id": call["id"], "name": call["name"], "status": "running"}
        if step.guard.blocks(signature):
            item.result = ToolResult(gate_text(call["name"]), is_error=True)
            update["status"] = "error"
            update["output"], update["is_error"] = item.result.output, True
            await step.emit(k.TOOL_UPDATE, update)
            return
        # Foya's card turns `running` here, before the approval the call may still need.
        update["input"] = arguments_text(call["input"])
        await step.emit(k.TOOL_UPDATE, update)
        item.result = await self._execute(step, call, item.intent)
        step.guard.result(signature, item.result.is_error)

    async def _execute(self, step: _Step, call: ParsedCall, intent: Intent) -> ToolResult:
        session, row, cwd, tools = step.session, step.row, step.cwd, step.tools
        tool = tools.get(call["name"])
        if tool is None:
            known = self.tools.get(call["name"])
            if known is not None and exposure(known) == "deferred":
                return ToolResult(
                    f"tool {call['name']!r} is not active: find it with tool_search first",
                    is_error=True,
                )
            if known is not None:
                return ToolResult(f"tool {call['name']!r} is not allowed here", is_error=True)
            return ToolResult(f"unknown tool {call['name']!r}", is_error=True)
        if call.get("invalid"):
            return ToolResult("the tool arguments are not a JSON object", is_error=True)
        approve = self.approval(row, step.emit)
        ctx = ToolContext(
            cwd,
            self.trash,
            intender(self.store, session, intent),
            row.get("project_id"),
            session,
            step.run_id,
            call["id"],
            step.emit,
            approve,
        )
        args = call["input"]
        try:
            resource = tool.resource(args, ctx)
            ask = Ask(
                session,
                tool.name,
                tool.action(args),
                arguments_text(args)[:2000],
                str(resource) if resource else None,
                resource is not None and not inside(resource, cwd),
            )
            if await approve(ask) == "denied":
                return ToolResult("The user denied this tool call.", is_error=True)
            task = asyncio.create_task(tool.run(args, ctx))
            step.running[call["id"]] = task
            try:
                return await task
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise  # the whole turn is being cancelled
                return ToolResult("cancelled by the user", is_error=True)
            finally:
                step.running.pop(call["id"], None)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except OSError as exc:
            return ToolResult(f"{tool.name} failed: {exc.strerror or exc}", is_error=True)
