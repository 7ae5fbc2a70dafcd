"""The errors of the MCP routes, one class per code Foya answers with.

Exception map (status, code):

- `McpUpdateFailed` 400 `mcp_update_failed` (in `app.kernel.mcp.config`): a `PUT /mcp` whose
  configuration breaks a rule
- `McpServerNotFound` 404 `mcp_server_not_found`: no server of that id is configured
- `McpRequestFailed` 502, a code per route, when a server is not connected, fails or does not
  answer in time: `McpResourcesFailed` `mcp_resources_failed`, `McpResourceReadFailed`
  `mcp_resource_read_failed`, `McpPromptsFailed` `mcp_prompts_failed`, `McpPromptGetFailed`
  `mcp_prompt_get_failed`; `McpRegistryFailed` `mcp_registry_failed` when the public registry
  cannot be queried
- `BadRequest` 400 `bad_request`: `server_id` (or `uri`, `name`) is missing
"""

from __future__ import annotations

from app.errors import FoyaError, NotFound


class McpServerNotFound(NotFound):
    """No MCP server of that id is configured."""

    code = "mcp_server_not_found"


class McpRequestFailed(FoyaError):
    """An MCP server (or the registry) gave no answer; each route has its own subclass."""

    abstract = True
    status = 502
    code = "mcp_failed"


class McpResourcesFailed(McpRequestFailed):
    """`GET /mcp/resources`: the server could not list its resources."""

    code = "mcp_resources_failed"


class McpResourceReadFailed(McpRequestFailed):
    """`POST /mcp/resources/read`: the server could not read the resource."""

    code = "mcp_resource_read_failed"


class McpPromptsFailed(McpRequestFailed):
    """`GET /mcp/prompts`: the server could not list its prompts."""

    code = "mcp_prompts_failed"


class McpPromptGetFailed(McpRequestFailed):
    """`POST /mcp/prompts/get`: the server could not render the prompt."""

    code = "mcp_prompt_get_failed"


class McpRegistryFailed(McpRequestFailed):
    """`GET /mcp/registry`: the public MCP registry could not be queried or answered nonsense."""

    code = "mcp_registry_failed"
