"""A tool call's file change and its record: journaled before it reaches the disk, forgotten in
the very transaction that records it, taken back at once when nothing records it.

A file tool's change is journaled first (`ToolContext.intend` → `Store.begin_restore`, one file,
action `tool_change`), and the tool's `message_end` forgets that journal in the same transaction
that records the change. So the rule after a crash is simply: a journal still stored means no
committed event records the change, and startup recovery puts the file back if it is exactly
the after-image (kernel.recovery). While the kernel runs, a change whose `message_end` is not
committed (tool failed or cancelled, the append failed) is rolled back the same way, at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app import events as k
from app.errors import FoyaError
from app.events import Message, ToolEnd
from app.kernel.filestate import roll_back
from app.kernel.ids import iso_now
from app.kernel.turns.toolcalls import Emit, ParsedCall
from app.logs import get_logger
from app.store import Store
from app.store.journals import TOOL_CHANGE, FileImage, JournalFile
from app.tools import ToolError, ToolResult
from app.tools.base import FileIntent, settled


@dataclass
class Intent:
    """The journaled change of one tool call, until its `message_end` commits."""

    journal: int | None = None
    file: JournalFile | None = None
    recorded: bool = False


def _image(content: bytes | None, mode: int | None) -> FileImage:
    return FileImage(content is not None, mode, content)


def intender(store: Store, session: str, intent: Intent) -> Callable[[FileIntent], Awaitable[None]]:
    """The tools' `intend`: journal the change durably before it is made."""

    async def intend(change: FileIntent) -> None:
        file = JournalFile(
            str(change.path),
            _image(change.before, change.before_mode),
            _image(change.after, change.after_mode),
            TOOL_CHANGE,
        )
        pending = asyncio.ensure_future(store.begin_restore(session, 0, [file]))
        try:
            await settled(pending)
        except FoyaError as exc:
            refused = f"the change could not be recorded, so it was not made: {exc}"
            raise ToolError(refused) from None
        finally:
            if pending.done() and not pending.cancelled() and pending.exception() is None:
                intent.journal, intent.file = pending.result(), file

    return intend


async def undo(store: Store, intent: Intent) -> None:
    """Take back a change no committed event records, then forget its journal."""
    assert intent.journal is not None and intent.file is not None
    log = get_logger("foya.tools")
    for path in await asyncio.to_thread(roll_back, [intent.file]):
        log.error("left a file alone: it changed again after the tool", path=path)
    await store.finish_journal(intent.journal)


async def record(call: ParsedCall, result: ToolResult, emit: Emit, intent: Intent) -> None:
    """`tool_end`, then the tool's `message_end`, which forgets the change's journal."""
    end: ToolEnd = {"id": call["id"], "name": call["name"], "output": result.output}
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
