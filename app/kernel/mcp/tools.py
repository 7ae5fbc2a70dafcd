"""What the model sees of MCP: each server tool as `mcp__<server>__<tool>` (Foya's naming), the
`mcp_list_resources`, `mcp_read_resource`, `mcp_list_prompts` and `mcp_get_prompt` tools, and
`tool_search`, which activates deferred tools (of any origin) for the session.

Approval of a server tool is the tool's own, as in Foya (and as our browser tools do): action
`execute` for a stdio server, `network` for a remote one, detail `Call MCP tool <server>/<tool>
with <arguments>`, resource the tool's name on its server. A denial is the error `user denied
MCP tool execution`; a failure or a timeout is an error result, and the turn goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.kernel.approvals import Ask
from app.kernel.mcp.common import NotConnected, capped
from app.kernel.mcp.config import name_prefix
from app.kernel.turns.tooling import ToolRunner, exposure
from app.tools import ToolError, ToolResult
from app.tools.base import Action, ToolContext

if TYPE_CHECKING:
    import mcp_types as types

    from app.kernel.mcp.service import McpService

#: Decide an `Ask` in the session's approval mode (emitting through the call's context).


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
MAX_NAME = 64
SEARCH_LIMIT, SEARCH_MAX = 8, 20


def tool_name(server_id: str, remote: str) -> str:
    """`mcp__<server>__<tool>`, unsafe characters replaced, at most 64 characters (a longer
    name is cut and ends with a hash of the whole)."""
    server = name_prefix(server_id)
    tool = _UNSAFE.sub("_", remote).strip("_")
    name = f"mcp__{server}__{tool}"
    if len(name) > MAX_NAME:
        name = name[:51] + "__" + hashlib.sha256(name.encode()).hexdigest()[:10]
    return name


class ServerTool:
    """One tool of one MCP server."""

    def __init__(
        self, service: McpService, server_id: str, remote: types.Tool, exposure: str
    ) -> None:
        self.service = service
        self.server_id = server_id
        self.remote = remote.name
        self.name = tool_name(server_id, remote.name)
        self.description = capped(remote.description or "")  # sent with every request
        schema = dict(remote.input_schema or {})
        self.parameters = schema if schema.get("type") == "object" else {"type": "object"}
        self.exposure = exposure

    def action(self, args: dict[str, Any]) -> Action:
        return "read"  # the approval is asked in `run`, with the server's own action

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            link = self.service.link(self.server_id)
        except NotConnected as exc:
            raise ToolError(f"MCP tool failed: {exc}") from None
        action = "execute" if link.config.transport == "stdio" else "network"
        shown = json.dumps(args, ensure_ascii=False)
        detail = f"Call MCP tool {self.server_id}/{self.remote} with {shown}"[:2000]
        ask = Ask(ctx.session, self.name, action, detail, self.remote, False)
        if await ctx.approve(ask) == "denied":
            raise ToolError("user denied MCP tool execution")
        try:
            result: types.CallToolResult = await link.call(
                lambda client: client.call_tool(self.remote, args)
            )
        except Exception as exc:
            raise ToolError(f"MCP tool failed: {exc}") from None
        return ToolResult(_text(result), is_error=result.is_error)


def _text(result: types.CallToolResult) -> str:
    """The result as text for the model: text parts as they are, media as a note."""
    import mcp_types as types

    parts: list[str] = []
    for content in result.content:
        if isinstance(content, types.TextContent):
            parts.append(content.text)
        elif isinstance(content, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(content, types.ImageContent) else "audio"
            parts.append(
                f"[MCP {kind} omitted from model context: {content.mime_type}, "
                f"{len(content.data)} bytes]"
            )
        else:
            parts.append(content.model_dump_json(by_alias=True, exclude_none=True))
    if result.structured_content is not None and not parts:
        # Servers also send it as text (the spec asks them to): only then is it needed here.
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return capped("\n".join(parts) or "(no output)")


SERVER_ID = {"type": "string", "description": "Configured MCP server id"}


class _Control:
    """A read-only MCP tool answering JSON (Foya's control tools); no approval needed."""

    parallel = True
    exposure = "direct"

    def __init__(
        self,
        name: str,
        description: str,
        properties: dict[str, Any],
        run: Callable[[dict[str, Any]], Awaitable[Any]],
    ) -> None:
        self.name = name
        self.description = description
        required = [k for k in properties if k != "args"]
        self.parameters = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        self._run = run

    def action(self, args: dict[str, Any]) -> Action:
        return "read"

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            value = await self._run(args)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(str(exc)) from None
        # The service caps the answer's strings (`capped_value`); escaping can still make the
        # JSON longer, so the text the model gets is capped as well.
        return ToolResult(capped(json.dumps(value, ensure_ascii=False)))


def control_tools(service: McpService) -> list[_Control]:
    """`mcp_list_resources`, `mcp_read_resource`, `mcp_list_prompts`, `mcp_get_prompt`."""

    def text(args: dict[str, Any], key: str) -> str:
        value = args.get(key)
        return value.strip() if isinstance(value, str) else ""

    async def get_prompt(args: dict[str, Any]) -> Any:
        raw = args.get("args")
        given = (
            {k: v for k, v in raw.items() if isinstance(v, str)} if isinstance(raw, dict) else {}
        )
        return await service.get_prompt(text(args, "server_id"), text(args, "name"), given)

    string = {"type": "string"}
    return [
        _Control(
            "mcp_list_resources",
            "List resources exposed by a connected MCP server.",
            {"server_id": SERVER_ID},
            lambda a: service.resources(text(a, "server_id")),
        ),
        _Control(
            "mcp_read_resource",
            "Read one resource from a connected MCP server.",
            {"server_id": SERVER_ID, "uri": string},
            lambda a: service.read_resource(text(a, "server_id"), text(a, "uri")),
        ),
        _Control(
            "mcp_list_prompts",
            "List prompts exposed by a connected MCP server.",
            {"server_id": SERVER_ID},
            lambda a: service.prompts(text(a, "server_id")),
        ),
        _Control(
            "mcp_get_prompt",
            "Render one prompt exposed by a connected MCP server.",
            {
                "server_id": SERVER_ID,
                "name": string,
                "args": {"type": "object", "additionalProperties": string},
            },
            get_prompt,
        ),
    ]


SEARCH_SCHEMA: dict[str, Any] = {
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
    """`tool_search` (Foya's): find deferred tools by what they do and activate them for the
    session; they are offered from the next model step on."""

    name = "tool_search"
    description = (
        "Search and activate deferred tool capabilities by task description. Activated tools "
        "become available on the next model step."
    )
    exposure = "direct"

    def __init__(self, runner: ToolRunner) -> None:
        self.runner = runner
        self.parameters = SEARCH_SCHEMA

    def action(self, args: dict[str, Any]) -> Action:
        return "read"

    def resource(self, args: dict[str, Any], ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query is required")
        limit = args.get("limit")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            limit = SEARCH_LIMIT
        found = search(self.runner, query, min(limit, SEARCH_MAX))
        self.runner.activate(ctx.session, [t.name for t in found])
        rows = [{"name": t.name, "description": t.description} for t in found]
        return ToolResult(json.dumps({"activated": rows}, ensure_ascii=False))


def search(runner: ToolRunner, query: str, limit: int) -> list[Any]:
    """The deferred tools matching `query`, best first (Foya's scoring: the whole query in the
    name or description counts 100, else one per word of 3+ characters found), then by name."""
    query = query.strip().lower()
    terms = sorted({t for t in re.split(r"[\s_\-/:,.;()\[\]{}]+", query) if len(t) >= 3})
    scored = []
    for tool in runner.tools.values():
        if exposure(tool) != "deferred":
            continue
        haystack = f"{tool.name}\n{tool.description}".lower()
        score = 100 if query in haystack else sum(t in haystack for t in terms)
        if score:
            scored.append((-score, tool.name, tool))
    return [tool for _, _, tool in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]]
