"""File tools: `read`, `write`, `edit` and `delete`. Changes are recorded as FileChanges.

Every change goes through `_apply` (see app.tools.base): announced to the kernel first, then
made atomically (write, edit: temp file + fsync + rename, the mode and owner of an existing file
kept, a new file's mode from the umask; delete: a move to the trash). A write that fails
half-way (disk full, file-size limit, kill -9) leaves the old file whole.

Foya's own data and secrets (`ProtectedPaths`) are refused by every file tool, before any
approval is asked. `bash` cannot be policed that way: a command can read anything the
kernel's user can.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from app.events import FileChange
from app.failpoints import failpoint
from app.files import NEVER_DELETED, ProtectedPaths, new_file_mode, owner_of, replace_atomic
from app.jsontypes import JSONObject
from app.tools.base import (
    Action,
    FileIntent,
    ToolContext,
    ToolError,
    ToolResult,
    change,
    read_image,
    refuse_protected,
    resolve,
    schema,
    settled,
)

MAX_READ = 256 * 1024
PROTECTED = NEVER_DELETED


def _path(args: JSONObject, ctx: ToolContext) -> Path:
    return resolve(ctx, args.get("path", ""))


def _entry(args: JSONObject, ctx: ToolContext) -> Path:
    """The directory entry itself: the parent resolved, a final symlink left as it is."""
    raw = args.get("path")
    if not isinstance(raw, str) or not raw:
        raise ToolError("path: a non-empty string is required")
    joined = ctx.cwd / raw
    return joined.parent.resolve() / joined.name


def _text(data: bytes, path: Path) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not a UTF-8 text file") from None


def _put(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomic(path, data, mode=mode, owner=owner_of(path), point="tool_write_staged")


def _to_trash(path: Path, trash: Path) -> None:
    trash.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.move(path, trash / f"{time.time_ns()}-{path.name}")


async def _apply(
    ctx: ToolContext,
    path: Path,
    before: tuple[bytes | None, int | None],
    after: tuple[bytes | None, int | None],
    effect: Callable[[], None],
) -> tuple[FileChange, dict[str, bytes], str]:
    """Announce the change (durably), make it, and return its record, blobs and diff."""
    record = change(path, *before, *after)
    await ctx.intend(FileIntent(path, *before, *after))

    def run() -> None:
        effect()
        failpoint("tool_file_changed")  # changed on disk, not yet recorded

    await settled(asyncio.to_thread(run))
    return record


class _FileTool:
    """What file tools share: the action they need approval for, the path they touch, and
    the paths they must never touch."""

    kind: Action = "read"

    def __init__(self, protected: ProtectedPaths | None = None) -> None:
        self.protected = protected or ProtectedPaths()

    def action(self, args: JSONObject) -> Action:
        return self.kind

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        path = _path(args, ctx)
        refuse_protected(path, self.protected)
        return path

    def _target(self, args: JSONObject, ctx: ToolContext) -> Path:
        path = self.resource(args, ctx)
        assert path is not None
        return path


class Read(_FileTool):
    name = "read"
    parallel = True
    description = "Read a text file. `offset` is the first line (1-based), `limit` a line count."
    parameters = schema(
        {
            "path": {"type": "string"},
            "offset": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1},
        },
        ["path"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        path = self._target(args, ctx)
        data, _ = read_image(path)
        if data is None:
            raise ToolError(f"{path} does not exist")
        lines = _text(data, path).splitlines(keepends=True)
        offset = int(args.get("offset") or 1)
        limit = int(args.get("limit") or len(lines))
        text = "".join(lines[offset - 1 : offset - 1 + limit])
        if len(text) > MAX_READ:
            text = text[:MAX_READ] + f"\n[truncated at {MAX_READ} characters]"
        return ToolResult(text)


class Write(_FileTool):
    name = "write"
    kind: Action = "write"
    description = "Create or overwrite a file with `content`."
    parameters = schema(
        {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        path = self._target(args, ctx)
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("content: a string is required")
        before, mode = read_image(path)
        after = content.encode()
        after_mode = mode if mode is not None else new_file_mode()
        record, blobs, diff = await _apply(
            ctx, path, (before, mode), (after, after_mode), lambda: _put(path, after, after_mode)
        )
        verb = "updated" if before is not None else "created"
        return ToolResult(f"{verb} {path} ({len(after)} bytes)", False, record, blobs, diff)


class Edit(_FileTool):
    name = "edit"
    kind: Action = "write"
    description = (
        "Replace `old_string` with `new_string` in a file. `old_string` must occur exactly once "
        "unless `replace_all` is true."
    )
    parameters = schema(
        {
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        ["path", "old_string", "new_string"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        path = self._target(args, ctx)
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolError("old_string (non-empty) and new_string must be strings")
        before, mode = read_image(path)
        if before is None:
            raise ToolError(f"{path} does not exist")
        text = _text(before, path)
        count = text.count(old)
        if count == 0:
            raise ToolError("old_string was not found in the file")
        if count > 1 and not args.get("replace_all"):
            raise ToolError(f"old_string occurs {count} times; pass replace_all or add context")
        after = text.replace(old, new).encode()
        assert mode is not None
        record, blobs, diff = await _apply(
            ctx, path, (before, mode), (after, mode), lambda: _put(path, after, mode)
        )
        return ToolResult(f"edited {path} ({count} replacement(s))", False, record, blobs, diff)


class Delete(_FileTool):
    name = "delete"
    description = (
        "Delete a file by moving it to Foya's trash (.git, .foya and .agents are protected)."
    )
    parameters = schema({"path": {"type": "string"}}, ["path"])

    kind: Action = "delete"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        path = _entry(args, ctx)
        refuse_protected(path, self.protected)
        return path

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        path = self._target(args, ctx)
        root = ctx.cwd.resolve()
        parts = path.relative_to(root).parts if path.is_relative_to(root) else path.parts
        if any(part in PROTECTED for part in parts):
            raise ToolError(f"{path} is protected ({', '.join(PROTECTED)} are never deleted)")
        if path.is_symlink():  # the link goes to the trash, never its target
            _to_trash(path, ctx.trash)
            return ToolResult(f"moved the symbolic link {path} to the trash")
        before, mode = read_image(path)
        if before is None:
            raise ToolError(f"{path} does not exist")
        record, blobs, diff = await _apply(
            ctx, path, (before, mode), (None, None), lambda: _to_trash(path, ctx.trash)
        )
        return ToolResult(f"moved {path} to the trash", False, record, blobs, diff)
