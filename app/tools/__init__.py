"""Agent tools: bash, read, write, edit, delete. Each knows its name, schema, action and effect."""

from app.files import ProtectedPaths
from app.tools.base import Tool, ToolError, ToolResult

__all__ = ["Tool", "ToolError", "ToolResult", "registry"]


def registry(protected: ProtectedPaths | None = None) -> dict[str, Tool]:
    """The tools offered to the model, by name. File tools refuse the `protected` paths."""
    # Imported here, with the turn core that asks for them: a start imports `app.tools` (for
    # its types) but runs no tool.
    from app.tools.bash import Bash
    from app.tools.files import Delete, Edit, Read, Write

    tools: list[Tool] = [
        Bash(),
        Read(protected),
        Write(protected),
        Edit(protected),
        Delete(protected),
    ]
    return {t.name: t for t in tools}
