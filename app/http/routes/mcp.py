"""MCP servers (Foya's `/mcp*`, `app.kernel.mcp`): the configuration, read and replaced whole
(secrets write-only), the servers' state, their resources and prompts, and the public registry.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.http.models.mcp import McpStatus, PromptGet, RegistryServer, ResourceRead
from app.jsontypes import JSONObject
from app.kernel.api import Kernel, McpConfig, mcp_config_wire


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["mcp"])
    mcp = kernel.mcp

    @api.get("/mcp", response_model_exclude_unset=True)
    async def get_mcp() -> McpConfig:
        """The configured servers; secrets show as `has_token` and `********`."""
        return McpConfig.model_validate(mcp_config_wire(mcp.public_config()))

    @api.put("/mcp", response_model_exclude_unset=True)
    async def put_mcp(body: McpConfig) -> McpConfig:
        """Replace the configuration; answers it as stored. Nothing changes unless all of it
        is valid (400 `mcp_update_failed`). A placeholder or an empty `bearer_token` keeps
        the stored secret."""
        return McpConfig.model_validate(mcp_config_wire(await mcp.replace(body)))

    @api.get("/mcp/status", response_model_exclude_none=True)
    async def mcp_status() -> list[McpStatus]:
        """Every configured server's state and tool names, by id."""
        return [McpStatus.model_validate(s) for s in mcp.statuses()]

    @api.get("/mcp/registry", response_model_exclude_none=True)
    async def mcp_registry(search: str = "") -> list[RegistryServer]:
        """Servers of the public MCP registry matching `search` (502 `mcp_registry_failed`)."""
        return [RegistryServer.model_validate(s) for s in await mcp.registry(search)]

    @api.get("/mcp/resources")
    async def mcp_resources(server_id: str = "") -> list[JSONObject]:
        """A connected server's resources, `[]` when it offers none (502 `mcp_resources_failed`)."""
        return await mcp.resources(server_id.strip())

    @api.post("/mcp/resources/read")
    async def mcp_read_resource(body: ResourceRead) -> JSONObject:
        """One resource's contents (502 `mcp_resource_read_failed`)."""
        return await mcp.read_resource(body.server_id.strip(), body.uri)

    @api.get("/mcp/prompts")
    async def mcp_prompts(server_id: str = "") -> list[JSONObject]:
        """A connected server's prompts, `[]` when it offers none (502 `mcp_prompts_failed`)."""
        return await mcp.prompts(server_id.strip())

    @api.post("/mcp/prompts/get")
    async def mcp_get_prompt(body: PromptGet) -> JSONObject:
        """One prompt rendered with `args` (502 `mcp_prompt_get_failed`)."""
        return await mcp.get_prompt(body.server_id.strip(), body.name.strip(), body.args)

    return api
