"""Running the tool calls of a step: approval first, then the tool, then its recorded result.

A file tool's change is journaled before it reaches the disk (`ToolContext.intend` →
`Store.begin_restore`, one file, action `tool_change`), and the tool's `message_end` forgets
that journal in the same transaction that records the change. So the rule after a crash is
simply: a journal still stored means no committed event records the change, and startup
recovery puts the file back if it is exactly the after-image (kernel.recovery). While the
kernel runs, a change whose `message_end` is not committed (tool failed or cancelled, the
append failed) is rolled back the same way, at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app import events as k
from app.errors import FoyaError
from app.events import Message
from app.kernel.approvals import Approvals, Ask
from app.kernel.filestate import roll_back
from app.kernel.ids import iso_now, new_id
from app.kernel.providers import Providers
from app.logs import get_logger
from app.store import Store
from app.store.journals import TOOL_CHANGE, FileImage, JournalFile
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import FileIntent, ToolContext, inside, settled

GUARDIAN_PROMPT = (
    "You review tool calls of a coding agent for safety. Answer with exactly one word: ALLOW if "
    "the call is a reasonable, non-destructive step for a developer's task, DENY otherwise."
)

Emit = Callable[..., Awaitable[None]]


@dataclass
class _Intent:
    """The journaled change of one tool call, until its `message_end` commits."""

    journal: int | None = None
    file: JournalFile | None = None
    recorded: bool = False


def _image(content: bytes | None, mode: int | None) -> FileImage:
    return FileImage(content is not None, mode, content)


class ToolRunner:
    """Executes parsed tool calls for a session and records each result."""

    def __init__(
        self,
        tools: dict[str, Tool],
        approvals: Approvals,
        providers: Providers,
        trash: Path,
        store: Store,
    ) -> None:
        self.tools = tools
        self.approvals = approvals
        self.providers = providers
        self.trash = trash
        self.store = store
        self.log = get_logger("foya.tools")

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
        intent = _Intent()
        try:
            result = await self._execute(session, row, cwd, call, emit, running, intent)
            await self._record(call, result, emit, intent)
        finally:
            if intent.journal is not None and not intent.recorded:
                try:
                    await settled(self._undo(intent))
                except Exception as exc:  # the journal stays: the next start rolls it back
                    self.log.error("could not take back an unrecorded file change", error=str(exc))

    @staticmethod
    async def _record(
        call: dict[str, Any], result: ToolResult, emit: Emit, intent: _Intent
    ) -> None:
        """`tool_end`, then the tool's `message_end`, which forgets the change's journal."""
        end: dict[str, Any] = {"id": call["id"], "name": call["name"], "output": result.output}
        message: Message = {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": call["name"],
            "content": result.output,
            "created_at": iso_now(),
        }
        if result.is_error:
            end["is_error"] = message["is_error"] = True
        if result.diff:
            end["diff"] = message["diff"] = result.diff
        if result.file_change:
            message["file_change"] = result.file_change
        await emit(k.TOOL_END, end)
        journal = intent.journal if result.file_change else None
        # Not cancellable half-way: whether the change got recorded must be known here.
        await settled(emit(k.MESSAGE_END, message, result.blobs, journal=journal))
        intent.recorded = journal is not None

    def _intend(self, session: str, intent: _Intent) -> Callable[[FileIntent], Awaitable[None]]:
        """The tools' `intend`: journal the change durably before it is made."""

        async def intend(change: FileIntent) -> None:
            file = JournalFile(
                str(change.path),
                _image(change.before, change.before_mode),
                _image(change.after, change.after_mode),
                TOOL_CHANGE,
            )
            pending = asyncio.ensure_future(self.store.begin_restore(session, 0, [file]))
            try:
                await settled(pending)
            except FoyaError as exc:
                raise ToolError(
                    f"the change could not be recorded, so it was not made: {exc}"
                ) from None
            finally:
                if pending.done() and not pending.cancelled() and pending.exception() is None:
                    intent.journal, intent.file = pending.result(), file

        return intend

    async def _undo(self, intent: _Intent) -> None:
        """Take back a change no committed event records, then forget its journal."""
        assert intent.journal is not None and intent.file is not None
        for path in await asyncio.to_thread(roll_back, [intent.file]):
            self.log.error("left a file alone: it changed again after the tool", path=path)
        await self.store.finish_journal(intent.journal)

    async def _execute(
        self,
        session: str,
        row: dict[str, Any],
        cwd: Path,
        call: dict[str, Any],
        emit: Emit,
        running: dict[str, asyncio.Task[ToolResult]],
        intent: _Intent,
    ) -> ToolResult:
        tool = self.tools.get(call["name"])
        if tool is None:
            return ToolResult(f"unknown tool {call['name']!r}", is_error=True)
        if call.get("invalid"):
            return ToolResult("the tool arguments are not a JSON object", is_error=True)
        ctx = ToolContext(cwd, self.trash, self._intend(session, intent), row.get("project_id"))
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
