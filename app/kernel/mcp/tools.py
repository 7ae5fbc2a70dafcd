"""What the model sees of MCP: each server tool as `mcp__<server>__<tool>` (Foya's naming), and the
`mcp_list_resources`, `mcp_read_resource`, `mcp_list_prompts` and `mcp_get_prompt` tools
(`tool_search`, which activates deferred tools of any origin, is the turn core's:
`app.kernel.turns.toolsearch`).

The tools reach the service through the small ports below (`Links`, `Lookups`), which the
service fits by its shape: this module never imports the service, so the service may build
these tools.

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
from typing import TYPE_CHECKING, Any, Protocol

from app.jsontypes import JSONObject
from app.kernel.approvals import Ask
from app.kernel.mcp.common import NotConnected, capped
from app.kernel.mcp.config import name_prefix
from app.tools import ToolError, ToolResult
from app.tools.base import Action, ToolContext

if TYPE_CHECKING:
    import mcp_types as types

    from app.kernel.mcp.link import Link

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
MAX_NAME = 64


class Links(Protocol):
    """The connected servers (`McpService.link`): raises `NotConnected` for one that is not."""

    def link(self, server_id: str) -> Link: ...


class Lookups(Protocol):
    """The service's resource and prompt look-ups, answered as JSON (`McpService`)."""

    async def resources(self, server_id: str) -> list[JSONObject]: ...

    async def read_resource(self, server_id: str, uri: str) -> JSONObject: ...

    async def prompts(self, server_id: str) -> list[JSONObject]: ...

    async def get_prompt(self, server_id: str, name: str, args: dict[str, str]) -> JSONObject: ...


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

    def __init__(self, service: Links, server_id: str, remote: types.Tool, exposure: str) -> None:
        self.service = service
        self.server_id = server_id
        self.remote = remote.name
        self.name = tool_name(server_id, remote.name)
        self.description = capped(remote.description or "")  # sent with every request
        schema = dict(remote.input_schema or {})
        self.parameters = schema if schema.get("type") == "object" else {"type": "object"}
        self.exposure = exposure

    def action(self, args: JSONObject) -> Action:
        return "read"  # the approval is asked in `run`, with the server's own action

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
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
        properties: JSONObject,
        run: Callable[[JSONObject], Awaitable[Any]],
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

    def action(self, args: JSONObject) -> Action:
        return "read"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        try:
            value = await self._run(args)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(str(exc)) from None
        # The service caps the answer's strings (`capped_value`); escaping can still make the
        # JSON longer, so the text the model gets is capped as well.
        return ToolResult(capped(json.dumps(value, ensure_ascii=False)))


def control_tools(service: Lookups) -> list[_Control]:
    """`mcp_list_resources`, `mcp_read_resource`, `mcp_list_prompts`, `mcp_get_prompt`."""

    def text(args: JSONObject, key: str) -> str:
        value = args.get(key)
        return value.strip() if isinstance(value, str) else ""

    async def get_prompt(args: JSONObject) -> Any:
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
