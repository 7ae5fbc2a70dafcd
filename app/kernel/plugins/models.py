"""Plugins and marketplaces as served (Foya's `plugin.Plugin`, `MarketplaceSummary`, …), the
MCP server definitions a plugin brings, and the errors of this package.

Fields Foya omits when empty are None here, and the routes leave None out.

The errors (`Problem`, `PluginFailure` and its subclasses, `reported`) are in
`app.kernel.plugins.errors`, re-exported here for the package's modules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.kernel.plugins.errors import PluginFailure as PluginFailure
from app.kernel.plugins.errors import Problem as Problem
from app.kernel.plugins.errors import reported as reported


class Author(BaseModel):
    name: str | None = None
    email: str | None = None
    url: str | None = None


class Diagnostic(BaseModel):
    """Something wrong with a plugin: `severity` `warning` (it loads) or `error` (it does not)."""

    component: str | None = None
    path: str | None = None
    code: str
    severity: Literal["warning", "error"]
    message: str


class Manifest(BaseModel):
    """`plugin.json` (Agent Plugins 1.0.0)."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field("", alias="$schema")
    name: str
    version: str | None = None
    description: str | None = None
    author: Author | None = None
    homepage: str | None = None
    repository: str | None = None
    license: str | None = None
    keywords: list[str] | None = None


class Plugin(Manifest):
    """An installed plugin: its manifest, where it lives and what it brings.

    `command_count` and `agent_count` are ours (Foya's plugins bring skills and MCP servers)."""

    path: str
    data_path: str
    source: str | None = None
    enabled: bool
    valid: bool
    skill_count: int
    mcp_server_count: int
    command_count: int = 0
    agent_count: int = 0
    diagnostics: list[Diagnostic] | None = None


class PluginMCPServer(BaseModel):
    """An MCP server an enabled plugin defines (the shape of Foya's `mcpclient.ServerConfig`
    for a plugin's server): `id` is `plugin:<plugin>:<server>`, `name` `<plugin>/<server>`.
    Values are literal (no `${…}` left but the two expanded below); stdio servers get
    `PLUGIN_ROOT` (the plugin's directory) and `PLUGIN_DATA` (its data directory) in `env`."""

    id: str
    name: str
    enabled: bool = True
    plugin_id: str
    transport: Literal["stdio", "streamable_http", "sse"]
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] | None = None


class MarketplaceSummary(BaseModel):
    id: str
    name: str
    description: str | None = None
    repository: str
    owner: Author
    source: str
    ref: str | None = None
    sparse_paths: list[str] | None = None
    resolved_sha: str | None = None
    format: Literal["codex", "claude", "copilot"]
    enabled: bool


class EntryInfo(BaseModel):
    """What a marketplace catalog says of a plugin, as read (catalog._Entry) and as served."""

    name: str | None = None
    description: str | None = None
    version: str | None = None
    author: Author | None = None
    homepage: str | None = None
    repository: str | None = None
    license: str | None = None
    keywords: list[str] | None = None
    category: str | None = None
    tags: list[str] | None = None


class MarketplacePlugin(EntryInfo):
    """One entry of a marketplace catalog, and whether it is installed."""

    name: str
    source: str = ""
    installable: bool = False
    reason: str | None = None
    installed: bool = False
    enabled: bool | None = None
    installed_version: str | None = None


class MarketplaceCatalog(MarketplaceSummary):
    plugins: list[MarketplacePlugin]


class MarketplacePluginPreview(BaseModel):
    name: str
    valid: bool
    compatibility: Literal["compatible", "partial", "unsupported"]
    skill_count: int
    mcp_server_count: int
    command_count: int = 0
    agent_count: int = 0
    unsupported_components: list[str] | None = None
    diagnostics: list[Diagnostic] | None = None
