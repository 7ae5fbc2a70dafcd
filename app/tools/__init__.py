"""Agent tools: bash, read, write, edit, delete. Each knows its name, schema, action and effect."""

from app.tools.base import Tool, ToolError, ToolResult
from app.tools.bash import Bash
from app.tools.files import Delete, Edit, Read, Write

__all__ = ["Tool", "ToolError", "ToolResult", "registry"]


def registry() -> dict[str, Tool]:
    """The tools offered to the model, by name."""
    tools: list[Tool] = [Bash(), Read(), Write(), Edit(), Delete()]
    return {t.name: t for t in tools}
