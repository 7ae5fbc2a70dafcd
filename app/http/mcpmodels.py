"""Request and response bodies of the `/mcp*` routes (Foya's shapes). The configuration itself is
`app.kernel.mcp.McpConfig`, whose unknown fields are refused too."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.http.models import Strict


class McpStatus(BaseModel):
    """One configured server's state (`disabled`, `disconnected`, `connecting`, `connected`,
    `error`). `restarts` and `retry_at` are ours: how often it was started again after failing,
    and when the next try is due."""

    id: str
    name: str
    state: str
    transport: str
    tool_count: int
    resource_count: int
    prompt_count: int
    error: str | None = None
    restarts: int = 0
    retry_at: str | None = None


class ResourceRead(Strict):
    """`POST /mcp/resources/read`."""

    server_id: str = ""
    uri: str = ""


class PromptGet(Strict):
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
    config: dict[str, Any]
