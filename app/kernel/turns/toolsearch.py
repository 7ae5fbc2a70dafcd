"""`tool_search` (Foya's): find deferred tools (of any origin) by what they do and activate them
for the session; they are offered from the next model step on. It reads the same tool table the
turn does, so an MCP server's deferred tools are found as soon as the server lists them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.jsontypes import JSONObject
from app.kernel.turns.toolcalls import exposure
from app.kernel.turns.tooltable import ToolTable
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import Action, ToolContext

SEARCH_LIMIT, SEARCH_MAX = 8, 20

SEARCH_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "Short description of the needed capability, such as browser "
            "navigation or browser click.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_MAX,
            "description": "Maximum tools to activate. Defaults to 8.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}


class ToolSearch:
    """`tool_search`: activates the deferred tools that match a query for the session."""

    name = "tool_search"
    description = (
        "Search and activate deferred tool capabilities by task description. Activated tools "
        "become available on the next model step."
    )
    exposure = "direct"

    def __init__(self, table: ToolTable) -> None:
        self.table = table
        self.parameters = SEARCH_SCHEMA

    def action(self, args: JSONObject) -> Action:
        return "read"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query is required")
        limit = args.get("limit")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            limit = SEARCH_LIMIT
        found = search(self.table, query, min(limit, SEARCH_MAX))
        self.table.activate(ctx.session, [t.name for t in found])
        rows = [{"name": t.name, "description": t.description} for t in found]
        return ToolResult(json.dumps({"activated": rows}, ensure_ascii=False))


def search(table: ToolTable, query: str, limit: int) -> list[Tool]:
    """The deferred tools matching `query`, best first (Foya's scoring: the whole query in the
    name or description counts 100, else one per word of 3+ characters found), then by name."""
    query = query.strip().lower()
    terms = sorted({t for t in re.split(r"[\s_\-/:,.;()\[\]{}]+", query) if len(t) >= 3})
    scored = []
    for tool in table.values():
        if exposure(tool) != "deferred":
            continue
        haystack = f"{tool.name}\n{tool.description}".lower()
        score = 100 if query in haystack else sum(t in haystack for t in terms)
        if score:
            scored.append((-score, tool.name, tool))
    return [tool for _, _, tool in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]]
