"""Plugins and marketplaces as served (Foya's `plugin.Plugin`, `MarketplaceSummary`, …), the
MCP server definitions a plugin brings, and the errors of this package.

Fields Foya omits when empty are None here, and the routes leave None out.

Errors (rendered by `app.http.errors`): every refusal is a `PluginFailure` carrying the code of
the operation that failed, as Foya's handlers write them — 400 `plugin_install_failed`,
`plugin_update_failed`, `plugin_remove_failed`, `plugin_marketplace_add_failed`,
`plugin_marketplace_update_failed`, `plugin_marketplace_remove_failed`,
`plugin_marketplace_refresh_failed`; 404 (unknown marketplace or entry) or 502 (anything else)
`plugin_marketplace_failed` and `plugin_preview_failed`; 404 `plugin_install_failed` for an
unknown marketplace or entry. Inside the package a `Problem` says what is wrong; `reported`
turns it into the failure of the operation at hand.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.errors import FoyaError


class Problem(Exception):
    """Why a plugin operation cannot be done (`missing`: what it names does not exist)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


class PluginFailure(FoyaError):
    """A refused plugin or marketplace operation (its code names the operation)."""

    status = 400


@contextlib.contextmanager
def reported(code: str, *, missing: int = 400, other: int = 400) -> Iterator[None]:
    """Turn a `Problem` raised inside into a `PluginFailure` with `code`, status `missing`
    when it names something that does not exist, else `other`."""
    try:
        yield
    except Problem as exc:
        status = missing if exc.missing else other
        raise PluginFailure(exc.message, code=code, status=status) from None


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
