"""The model's sub-agent tools (Foya's names and schemas).

- `agent {task, agent?}`: delegate a task to a child and wait for its answer (the result is
  `{status, child_session_id, agent_ref, agent_name, output?, error?}`, an error result unless
  it completed). Several `agent` calls of one step run side by side.
- `spawn_agent {task, agent?, context?}`: start a child and return its run at once;
  `wait_agents {ids, mode?: all|any}`, `read_agent_output {id}`, `cancel_agent {id}` and
  `list_agents {}` work on the runs this session started.
- `agent_search {query?}`: the definitions this session may use, by name and description.

Children are started with the turn's run id as their root run (so one turn's children share
the 64-children cap, the per-root concurrency and the token budget) and the call's id as their
`parent_tool_call_id`. None of these asks for approval: each child asks for its own tool calls.
A child never has these tools. Unlike Foya's `agent`, whose child is not listed as a run, every
child started here is a run (`GET …/agents`, `subagent_queued` first).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal

from app.errors import FoyaError
from app.jsontypes import JSONObject
from app.kernel.agents.package import ContextSelection
from app.kernel.agents.runs import AgentRunSnapshot
from app.kernel.agents.service import Agents, SpawnRequest
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import Action, ToolContext, schema

TASK = {
    "type": "string",
    "description": "A self-contained task with the context and expected output",
}
CONTEXT = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["none", "selected", "summary", "last_n_turns"]},
        "message_seqs": {"type": "array", "items": {"type": "integer"}},
        "last_turns": {"type": "integer", "minimum": 1, "maximum": 20},
    },
    "additionalProperties": False,
}
RUN_ID = schema({"id": {"type": "string"}}, ["id"])


def _text(args: JSONObject, key: str, required: bool = False) -> str:
    value = args.get(key, "")
    if not isinstance(value, str):
        raise ToolError(f"invalid arguments: {key} must be a string")
    if required and not value.strip():
        raise ToolError(f"{key} is required")
    return value.strip()


def _context(args: JSONObject) -> ContextSelection:
    raw = args.get("context")
    if raw is None:
        return ContextSelection()
    mode = raw.get("mode") if isinstance(raw, dict) else None
    seqs = raw.get("message_seqs", []) if isinstance(raw, dict) else None
    turns = raw.get("last_turns", 0) if isinstance(raw, dict) else None
    if mode not in (None, "", "none", "selected", "summary", "last_n_turns"):
        raise ToolError(
            "invalid arguments: context.mode must be none, selected, summary or last_n_turns"
        )
    if (
        not isinstance(seqs, list)
        or not all(type(s) is int for s in seqs)
        or type(turns) is not int
    ):
        raise ToolError(
            "invalid arguments: context must be {mode, message_seqs: [int], last_turns: int}"
        )
    return ContextSelection(mode or None, tuple(seqs), turns)


def _json(value: Any) -> ToolResult:
    return ToolResult(json.dumps(value, ensure_ascii=False))


class _AgentTool:
    """Drives this session's runs; never needs approval."""

    def __init__(self, agents: Agents) -> None:
        self.agents = agents

    def action(self, args: JSONObject) -> Action:
        return "read"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def _spawn(
        self, args: JSONObject, ctx: ToolContext, context: ContextSelection
    ) -> AgentRunSnapshot:
        request = SpawnRequest(
            task=_text(args, "task", required=True),
            agent_ref=_text(args, "agent"),
            root_run_id=ctx.run_id,
            parent_tool_call_id=ctx.call_id,
            context=context,
        )
        try:
            return await self.agents.spawn(ctx.session, request)
        except FoyaError as exc:
            raise ToolError(exc.message) from None

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except FoyaError as exc:
            raise ToolError(exc.message) from None


class AgentTool(_AgentTool):
    name = "agent"
    parallel = True
    description = (
        "Delegate an independent task to an isolated child agent. Multiple agent calls in one "
        "response run concurrently. Use agent_search first when a specialized user or project "
        "agent may apply."
    )
    parameters = schema(
        {
            "task": TASK,
            "agent": {
                "type": "string",
                "description": "Optional agent ref or name returned by agent_search",
            },
        },
        ["task"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        run_id = (await self._spawn(args, ctx, ContextSelection()))["id"]
        try:
            done = await self.agents.result(run_id)
        finally:
            self.agents.stop_run(run_id)  # the turn was cancelled: so is its child
        wanted = ("status", "child_session_id", "agent_ref", "agent_name", "output", "error")
        result = {key: value for key, value in done.items() if key in wanted}
        return ToolResult(
            json.dumps(result, ensure_ascii=False), is_error=done["status"] != "completed"
        )


class SpawnAgent(_AgentTool):
    name = "spawn_agent"
    parallel = True
    description = "Start an isolated child agent asynchronously and return its run ID immediately."
    parameters = schema(
        {
            "task": {
                "type": "string",
                "description": "Self-contained goal, constraints, known facts, evidence "
                "references, and expected output",
            },
            "agent": {
                "type": "string",
                "description": "Optional agent ref returned by agent_search",
            },
            "context": CONTEXT,
        },
        ["task"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        return _json(await self._spawn(args, ctx, _context(args)))


class WaitAgents(_AgentTool):
    name = "wait_agents"
    description = "Wait until all or any of the specified asynchronous agent runs finish."
    parameters = schema(
        {
            "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "mode": {"type": "string", "enum": ["all", "any"]},
        },
        ["ids"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        ids = args.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ToolError("invalid arguments: ids must be a non-empty list of run ids")
        mode: Literal["all", "any"] = "any" if args.get("mode") == "any" else "all"
        return _json(await self._call(self.agents.wait(ctx.session, ids, mode, None)))


class ReadAgentOutput(_AgentTool):
    name = "read_agent_output"
    description = "Read the current status and output of one asynchronous agent run."
    parameters = RUN_ID

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        return _json(await self._call(self.agents.get(ctx.session, _text(args, "id", True))))


class CancelAgent(_AgentTool):
    name = "cancel_agent"
    description = "Cancel one queued or running agent run."
    parameters = RUN_ID

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        run_id = _text(args, "id", True)
        await self._call(self.agents.cancel(ctx.session, run_id))
        return _json(await self._call(self.agents.get(ctx.session, run_id)))


class ListAgents(_AgentTool):
    name = "list_agents"
    description = "List asynchronous child agent runs started by the current session."
    parameters = schema({}, [])

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        return _json(await self._call(self.agents.listing(ctx.session)))


class AgentSearch(_AgentTool):
    name = "agent_search"
    description = (
        "Search available builtin, user, and project agent definitions by name and description."
    )
    parameters = schema(
        {"query": {"type": "string", "description": "Optional agent name or capability query"}}, []
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        query = _text(args, "query").lower()
        found = await asyncio.to_thread(self.agents.definitions.effective, ctx.project_id)
        rows = []
        for item in found:
            if query and query not in f"{item.name}\n{item.description}".lower():
                continue
            row: dict[str, object] = {
                k: v
                for k, v in item.wire().items()
                if k not in ("path", "digest", "max_turns", "timeout")
            }
            rows.append(row)
        return _json(rows)


def agent_tools(agents: Agents) -> dict[str, Tool]:
    """The sub-agent tools, by name."""
    tools: list[Tool] = [
        AgentSearch(agents),
        AgentTool(agents),
        SpawnAgent(agents),
        WaitAgents(agents),
        ReadAgentOutput(agents),
        CancelAgent(agents),
        ListAgents(agents),
    ]
    return {t.name: t for t in tools}
