"""Running the tool calls of a step: approval first, then the tool, then its recorded result."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app import events as k
from app.kernel.approvals import Approvals, Ask
from app.kernel.ids import iso_now, new_id
from app.kernel.providers import Providers
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import ToolContext, inside

GUARDIAN_PROMPT = (
    "You review tool calls of a coding agent for safety. Answer with exactly one word: ALLOW if "
    "the call is a reasonable, non-destructive step for a developer's task, DENY otherwise."
)

Emit = Callable[..., Awaitable[None]]


class ToolRunner:
    """Executes parsed tool calls for a session and records each result."""

    def __init__(
        self, tools: dict[str, Tool], approvals: Approvals, providers: Providers, trash: Path
    ) -> None:
        self.tools = tools
        self.approvals = approvals
        self.providers = providers
        self.trash = trash

    def schemas(self) -> list[dict[str, Any]]:
        """The tools as Chat Completions function definitions."""
        return [schema(t) for t in self.tools.values()]

    async def run(
        self,
        session: str,
        row: dict[str, Any],
        cwd: Path,
        call: dict[str, Any],
        emit: Emit,
        running: dict[str, asyncio.Task[ToolResult]],
    ) -> None:
        """Execute `call` and emit `tool_end` and the tool's `message_end`."""
        result = await self._execute(session, row, cwd, call, emit, running)
        end: dict[str, Any] = {"id": call["id"], "name": call["name"], "output": result.output}
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": call["name"],
            "content": result.output,
            "created_at": iso_now(),
        }
        for out in (end, message):
            if result.is_error:
                out["is_error"] = True
            if result.diff:
                out["diff"] = result.diff
        if result.file_change:
            message["file_change"] = result.file_change
        await emit(k.TOOL_END, end)
        await emit(k.MESSAGE_END, message, result.blobs)

    async def _execute(
        self,
        session: str,
        row: dict[str, Any],
        cwd: Path,
        call: dict[str, Any],
        emit: Emit,
        running: dict[str, asyncio.Task[ToolResult]],
    ) -> ToolResult:
        tool = self.tools.get(call["name"])
        if tool is None:
            return ToolResult(f"unknown tool {call['name']!r}", is_error=True)
        if call.get("invalid"):
            return ToolResult("the tool arguments are not a JSON object", is_error=True)
        ctx = ToolContext(cwd, self.trash)
        args = call["input"]
        try:
            resource = tool.resource(args, ctx)
            ask = Ask(
                session,
                tool.name,
                tool.action(args),
                json.dumps(args, ensure_ascii=False)[:2000],
                str(resource) if resource else None,
                resource is not None and not inside(resource, cwd),
            )
            decision = await self.approvals.check(
                row["approval_mode"],
                ask,
                emit,
                lambda a: self.providers.guardian(row, GUARDIAN_PROMPT, a),
            )
            if decision == "denied":
                return ToolResult("The user denied this tool call.", is_error=True)
            task = asyncio.create_task(tool.run(args, ctx))
            running[call["id"]] = task
            try:
                return await task
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise  # the whole turn is being cancelled
                return ToolResult("cancelled by the user", is_error=True)
            finally:
                running.pop(call["id"], None)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except OSError as exc:
            return ToolResult(f"{tool.name} failed: {exc.strerror or exc}", is_error=True)


def schema(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def parsed(call: dict[str, Any]) -> dict[str, Any]:
    raw = "".join(call["args"]) or "{}"
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return {"id": call["id"] or new_id(), "name": call["name"] or "", "input": value}
    return {"id": call["id"] or new_id(), "name": call["name"] or "", "input": {}, "invalid": True}
