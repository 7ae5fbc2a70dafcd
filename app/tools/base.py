"""The tool protocol and what file tools share: path resolution and change records."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from app.textdiff import unified

Action = Literal["read", "write", "delete", "execute"]


class ToolError(Exception):
    """The tool could not do what was asked; its message goes back to the model."""


@dataclass
class ToolResult:
    """What a tool run produced. `file_change` carries blob hashes; `blobs` their contents."""

    output: str
    is_error: bool = False
    file_change: dict[str, Any] | None = None
    blobs: dict[str, bytes] = field(default_factory=dict)
    diff: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """Where a tool runs: the session's working directory and the kernel's trash."""

    cwd: Path
    trash: Path


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]

    def action(self, args: dict[str, Any]) -> Action: ...

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        """The path the call touches (None for commands)."""
        ...

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
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
) -> tuple[dict[str, Any], dict[str, bytes], str]:
    """A FileChange (hashes only), the blobs it references, and a unified diff."""
    blobs: dict[str, bytes] = {}

    def key(data: bytes | None) -> str | None:
        if data is None:
            return None
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    record = {
        "path": str(path),
        "before_exists": before is not None,
        "before_mode": before_mode,
        "after_mode": after_mode,
        "before_blob": key(before),
        "after_blob": key(after),
    }
    return record, blobs, unified(str(path), before, after).text


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` (creating parents), then set its permission bits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
