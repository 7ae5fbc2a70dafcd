"""Request and response bodies of the `/mcp*` routes (Foya's shapes). The configuration itself is
`app.kernel.mcp.McpConfig`. Unknown fields are ignored in all of them, as Foya's handlers do."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.http.models.common import Lenient
from app.jsontypes import JSONObject


class McpStatus(BaseModel):
    """One configured server's state: `connected`; `connecting`; `disconnected` (it was
    connected and the connection was lost: the server exited, closed it or stopped answering;
    noticed at once for a server that exits); `error` (it could not be connected); `disabled`.
    `tools`, `restarts` and `retry_at` are ours: the names of its tools as the server calls
    them, how often it was started again after failing, and when the next try is due."""

    id: str
    name: str
    state: Literal["disabled", "disconnected", "connecting", "connected", "error"]
    transport: str
    tool_count: int
    tools: list[str] = Field(default_factory=list)
    resource_count: int
    prompt_count: int
    error: str | None = None
    restarts: int = 0
    retry_at: str | None = None


class ResourceRead(Lenient):
    """`POST /mcp/resources/read`."""

    server_id: str = ""
    uri: str = ""


class PromptGet(Lenient):
    """`POST /mcp/prompts/get`."""

    server_id: str = ""
    name: str = ""
    args: dict[str, str] = Field(default_factory=dict)


class RegistryServer(BaseModel):
    """A server of the public MCP registry with a configuration ready for `PUT /mcp`."""

    id: str
    name: str
    description: str | None = None
    version: str | None = None
    installable: bool
    reason: str | None = None
    config: JSONObject
