"""File tools: `read`, `write`, `edit` and `delete`. Changes are recorded as FileChanges."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from app.tools.base import (
    Action,
    ToolContext,
    ToolError,
    ToolResult,
    change,
    read_image,
    resolve,
    schema,
    write_file,
)

MAX_READ = 256 * 1024
PROTECTED = (".git", ".foya", ".agents")
DEFAULT_MODE = 0o644


def _path(args: dict[str, Any], ctx: ToolContext) -> Path:
    return resolve(ctx, args.get("path", ""))


def _entry(args: dict[str, Any], ctx: ToolContext) -> Path:
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


class _FileTool:
    """What file tools share: the action they need approval for, and the path they touch."""

    kind: Action = "read"

    def action(self, args: dict[str, Any]) -> Action:
        return self.kind

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return _path(args, ctx)


class Read(_FileTool):
    name = "read"
    description = "Read a text file. `offset` is the first line (1-based), `limit` a line count."
    parameters = schema(
        {
            "path": {"type": "string"},
            "offset": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1},
        },
        ["path"],
    )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _path(args, ctx)
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

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _path(args, ctx)
        content = args.get("content")
        if not isinstance(content, str):
            raise ToolError("content: a string is required")
        before, mode = read_image(path)
        after = content.encode()
        write_file(path, after, mode or DEFAULT_MODE)
        record, blobs, diff = change(path, before, mode, after, mode or DEFAULT_MODE)
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

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _path(args, ctx)
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
        write_file(path, after, mode)
        record, blobs, diff = change(path, before, mode, after, mode)
        return ToolResult(f"edited {path} ({count} replacement(s))", False, record, blobs, diff)


class Delete(_FileTool):
    name = "delete"
    description = (
        "Delete a file by moving it to Foya's trash (.git, .foya and .agents are protected)."
    )
    parameters = schema({"path": {"type": "string"}}, ["path"])

    kind: Action = "delete"

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return _entry(args, ctx)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _entry(args, ctx)
        root = ctx.cwd.resolve()
        parts = path.relative_to(root).parts if path.is_relative_to(root) else path.parts
        if any(part in PROTECTED for part in parts):
            raise ToolError(f"{path} is protected ({', '.join(PROTECTED)} are never deleted)")
        ctx.trash.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.is_symlink():  # the link goes to the trash, never its target
            shutil.move(path, ctx.trash / f"{time.time_ns()}-{path.name}")
            return ToolResult(f"moved the symbolic link {path} to the trash")
        before, mode = read_image(path)
        if before is None:
            raise ToolError(f"{path} does not exist")
        shutil.move(path, ctx.trash / f"{time.time_ns()}-{path.name}")
        record, blobs, diff = change(path, before, mode, None, None)
        return ToolResult(f"moved {path} to the trash", False, record, blobs, diff)
