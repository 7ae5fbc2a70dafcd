"""The tool protocol and what file tools share: path resolution, change records, and the
crash-safe way a change reaches the disk.

A file tool never changes a file in place. It computes the new image, tells the kernel through
`ToolContext.intend` (which stores the before- and after-image durably and returns only then),
and only then replaces the file: temp file in the same directory, fsync, rename. The kernel
forgets the intent in the very transaction that records the change, so an intent still stored
at the next start means the change was never recorded and is rolled back (kernel.recovery).
"""

from __future__ import annotations

import asyncio
import hashlib
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from app.events import FileChange, Kind
from app.files import ProtectedPaths
from app.jsontypes import JSONObject
from app.text.diff import unified

Action = Literal["read", "write", "delete", "execute"]
T = TypeVar("T")
P = TypeVar("P")  # an event kind's payload type


class ToolError(Exception):
    """The tool could not do what was asked; its message goes back to the model."""


@dataclass
class ToolResult:
    """What a tool run produced. `file_change` carries blob hashes; `blobs` their contents."""

    output: str
    is_error: bool = False
    file_change: FileChange | None = None
    blobs: dict[str, bytes] = field(default_factory=dict)
    diff: str | None = None


@dataclass(frozen=True)
class FileIntent:
    """A change a tool is about to make to `path` (absent images are None)."""

    path: Path
    before: bytes | None
    before_mode: int | None
    after: bytes | None
    after_mode: int | None


async def _no_intent(intent: FileIntent) -> None:
    return None


class Emit(Protocol):
    """Store and publish one event of the running turn on its session's stream: a kind and a
    payload of the type it names."""

    def __call__(self, kind: Kind[P], payload: P, /) -> Awaitable[None]: ...


async def _no_emit(kind: Kind[P], payload: P) -> None:
    return None


async def _no_approval(ask: Any) -> str:
    return "denied"  # only the kernel's tool runner grants anything


#: Ask for approval of a call (an `app.kernel.approvals.Ask`); answers the decision.
Approve = Callable[[Any], Awaitable[str]]


@dataclass(frozen=True)
class ToolContext:
    """Where a tool runs: the session's working directory, the kernel's trash, where a file
    tool announces a change before making it (awaited: durable when it returns), the
    session's project (None for a managed workspace), and which call of which turn of which
    session this is, with `emit` for the events a kernel tool records (questions, sub-agents)
    and `approve` for a tool that asks for approval itself, once it knows what it will reach
    (browser, web, MCP): through the session's mode, hooks and guardian, like every call."""

    cwd: Path
    trash: Path
    intend: Callable[[FileIntent], Awaitable[None]] = _no_intent
    project_id: str | None = None
    session: str = ""
    run_id: str = ""
    call_id: str = ""
    emit: Emit = _no_emit
    approve: Approve = _no_approval


class Tool(Protocol):
    """A tool the model can call. A tool class may also set `parallel = True` when calls of it
    never change anything (they may then run side by side: `app.kernel.turns.tooling`)."""

    name: str
    description: str
    parameters: JSONObject

    def action(self, args: JSONObject) -> Action: ...

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        """The path the call touches (None for commands)."""
        ...

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult: ...


def schema(properties: JSONObject, required: list[str]) -> JSONObject:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def resolve(ctx: ToolContext, path: str) -> Path:
    """`path` against the working directory, with `..` and symlinks resolved."""
    if not isinstance(path, str) or not path:
        raise ToolError("path: a non-empty string is required")
    return (ctx.cwd / path).resolve()


def inside(path: Path, root: Path) -> bool:
    """Whether resolved `path` lies within `root` (also resolved)."""
    return path.is_relative_to(root.resolve())


def read_image(path: Path) -> tuple[bytes | None, int | None]:
    """(content, permission bits) of a regular file, or (None, None) if absent."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path} is not a regular file")
    return path.read_bytes(), stat.S_IMODE(st.st_mode)


def change(
    path: Path,
    before: bytes | None,
    before_mode: int | None,
    after: bytes | None,
    after_mode: int | None,
) -> tuple[FileChange, dict[str, bytes], str]:
    """A FileChange (hashes only), the blobs it references, and a unified diff."""
    blobs: dict[str, bytes] = {}

    def key(data: bytes | None) -> str | None:
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    record: FileChange = {
        "path": str(path),
        "before_exists": before is not None,
        "before_mode": before_mode,
        "after_mode": after_mode,
        "before_blob": key(before),
        "after_blob": key(after),
    }
    return record, blobs, unified(str(path), before, after).text


def refuse_protected(path: Path, protected: ProtectedPaths) -> None:
    """`ToolError` if resolved `path` is one of Foya's own files (data dir, secrets)."""
    if protected.covers(path):
        raise ToolError(
            f"{path} is protected: Foya's data directory and secrets are never read or changed "
            "by tools"
        )


async def settled(work: Awaitable[T]) -> T:
    """Await `work` to its end even if cancelled meanwhile, then let the cancellation through.

    A thread or a store write cannot be interrupted: returning early would let a caller's
    cleanup run while the file or the row is still being written."""
    task = asyncio.ensure_future(work)
    interrupted = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            interrupted = True
    if interrupted:
        raise asyncio.CancelledError
    return task.result()
