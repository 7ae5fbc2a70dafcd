"""The MCP service: the configuration (`GET|PUT /mcp`), one supervised `Link` per enabled server,
their tools (a source of the turn's tool table), and the resource, prompt and registry look-ups.

The service owns its tools: `tools` is a snapshot of the connected servers' tools, replaced as a
whole when a server connects, changes its listing or goes (`app.kernel.turns.tooltable`).

`start` loads `~/.foya/mcp.json` (a broken file refuses the start, as in Foya) and starts every
enabled server in the background; `stop` closes them all (their processes end). `replace`
stores a new configuration only when all of it is valid, then restarts the servers whose
definition changed (the others keep running) and stops the removed ones.

Resources, prompts and their listings are answered with their text capped at `MAX_OUTPUT`
characters with a mark (`common.capped_value`), for the routes (the client may store what it
gets) and the model's tools alike; a plugin's server over HTTP is address-guarded (`netguard`).

Errors: `app.kernel.mcp.errors` (one class per code of Foya's). A connected server that offers
no resources or prompts lists none (`[]`), not an error.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from app.errors import BadRequest
from app.jsontypes import JSONObject
from app.kernel.lifecycle import cancel_and_wait
from app.kernel.mcp import store
from app.kernel.mcp.common import NotConnected, Timeouts, capped_value
from app.kernel.mcp.config import McpConfig, ServerConfig, merged, public
from app.kernel.mcp.errors import (
    McpPromptGetFailed,
    McpPromptsFailed,
    McpRegistryFailed,
    McpRequestFailed,
    McpResourceReadFailed,
    McpResourcesFailed,
    McpServerNotFound,
)
from app.kernel.mcp.tools import ServerTool, tool_name
from app.tools import Tool

if TYPE_CHECKING:  # the SDK is imported once it is needed (app.kernel.mcp.common)
    from mcp import Client

    from app.kernel.mcp.link import Link
    from app.kernel.mcp.registry import RegistryItem
    from app.kernel.web.fetch import Fetcher

#: Fields of the newer protocol's results that Foya's answers do not have.
_DROPPED = ("resultType", "ttlMs", "cacheScope", "nextCursor")


class FetcherSource(Protocol):
    """Where the guarded fetcher of `web_fetch` is found (`app.kernel.web.WebSearch`)."""

    @property
    def fetcher(self) -> Fetcher: ...


def _dump(model: BaseModel) -> JSONObject:
    out: JSONObject = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    for key in _DROPPED:
        out.pop(key, None)
    return out


class McpService:
    """MCP servers for the kernel; `tools` is what their connected servers offer now."""

    def __init__(
        self,
        root: Path,
        timeouts: Timeouts,
        registry_url: str,
        allow_hosts: str = "",
        *,
        web: FetcherSource,
    ) -> None:
        self.root = root
        self.web = web  # the registry is fetched through web_fetch's guard
        self.allow_hosts = allow_hosts  # FOYA_WEB_FETCH_ALLOW_HOSTS, for plugins' servers
        self.timeouts = timeouts
        self.registry_url = registry_url
        self.tools: Mapping[str, Tool] = {}
        self.config = McpConfig()
        self.plugin_servers: list[ServerConfig] = []  # enabled plugins' (never in mcp.json)
        self.links: dict[str, Link] = {}
        self._lock = asyncio.Lock()
        self._starting: asyncio.Task[None] | None = None

    def start(self, plugin_servers: list[ServerConfig]) -> None:
        """Load the configuration (a broken file refuses the start) and connect every enabled
        server, the user's and the enabled plugins' (`plugin_servers`), in the background."""
        self.plugin_servers = list(plugin_servers)
        self.config = store.load(self.root)
        if any(server.enabled for server in self._servers()):
            self._starting = asyncio.create_task(self._start_enabled())

    async def _start_enabled(self) -> None:
        # The SDK's first import takes ~0.3 s: in a thread, so that serving goes on meanwhile.
        await asyncio.to_thread(importlib.import_module, "app.kernel.mcp.link")
        async with self._lock:
            for server in self._servers():
                if server.enabled and server.id not in self.links:
                    self._start(server)
            self._sync()

    async def set_plugin_servers(self, servers: list[ServerConfig]) -> None:
        """The enabled plugins' servers changed (app.kernel.plugins): stop the ones that went
        or changed, start the new ones. They are kept apart from `mcp.json`."""
        async with self._lock:
            before = {s.id: s for s in self.plugin_servers}
            self.plugin_servers = list(servers)
            await self._reconcile(before, {s.id: s for s in servers if s.enabled})

    async def stop(self) -> None:
        """Close every server; their tools leave the table."""
        await cancel_and_wait(self._starting)
        self._starting = None
        links, self.links = list(self.links.values()), {}
        await asyncio.gather(*(link.stop() for link in links))
        self._sync()

    def public_config(self) -> McpConfig:
        return public(self.config)

    async def replace(self, incoming: McpConfig) -> McpConfig:
        """`PUT /mcp`: validate, store, then bring the running servers in line."""
        async with self._lock:
            config = merged(incoming, self.config)
            await asyncio.to_thread(store.save, self.root, config)
            before = {s.id: s for s in self.config.servers}
            self.config = config
            await self._reconcile(before, {s.id: s for s in config.servers if s.enabled})
            return public(config)

    async def _reconcile(
        self, before: dict[str, ServerConfig], wanted: dict[str, ServerConfig]
    ) -> None:
        """Of the servers in `before`, stop those not `wanted` as they are; start the rest."""
        stale = [
            link
            for server_id, link in self.links.items()
            if server_id in before and wanted.get(server_id) != before[server_id]
        ]
        for link in stale:
            del self.links[link.config.id]
        await asyncio.gather(*(link.stop() for link in stale))
        for server_id, server in wanted.items():
            if server_id not in self.links:
                self._start(server)
        self._sync()

    def _servers(self) -> list[ServerConfig]:
        return [*self.config.servers, *self.plugin_servers]

    def statuses(self) -> list[JSONObject]:
        """`GET /mcp/status`: every configured server, by id."""
        out = []
        for server in sorted(self._servers(), key=lambda s: s.id):
            link = self.links.get(server.id)
            if link is not None:
                out.append(link.status())
                continue
            out.append(
                {
                    "id": server.id,
                    "name": server.name,
                    "state": "disconnected" if server.enabled else "disabled",
                    "transport": server.transport,
                    "tool_count": 0,
                    "tools": [],
                    "resource_count": 0,
                    "prompt_count": 0,
                    "restarts": 0,
                }
            )
        return out

    def link(self, server_id: str) -> Link:
        link = self.links.get(server_id)
        if link is None:
            if all(s.id != server_id for s in self._servers()):
                raise McpServerNotFound(f"no MCP server {server_id!r} is configured")
            raise NotConnected(f"MCP server {server_id!r} is not connected")
        return link

    async def resources(self, server_id: str) -> list[JSONObject]:
        from app.kernel.mcp.listing import resources

        found = await self._ask(server_id, resources, McpResourcesFailed)
        return list(capped_value([_dump(r) for r in found]))

    async def read_resource(self, server_id: str, uri: str) -> JSONObject:
        if not uri:
            raise BadRequest("uri is required")
        read: Callable[[Client], Awaitable[Any]] = lambda c: c.read_resource(uri)  # noqa: E731
        return dict(capped_value(_dump(await self._ask(server_id, read, McpResourceReadFailed))))

    async def prompts(self, server_id: str) -> list[JSONObject]:
        from app.kernel.mcp.listing import prompts

        found = await self._ask(server_id, prompts, McpPromptsFailed)
        return list(capped_value([_dump(p) for p in found]))

    async def get_prompt(self, server_id: str, name: str, args: dict[str, str]) -> JSONObject:
        if not name:
            raise BadRequest("name is required")
        get: Callable[[Client], Awaitable[Any]] = lambda c: c.get_prompt(name, args)  # noqa: E731
        return dict(capped_value(_dump(await self._ask(server_id, get, McpPromptGetFailed))))

    async def registry(self, query: str) -> list[RegistryItem]:
        """`GET /mcp/registry`: servers of the public MCP registry, as installable configs."""
        from app.kernel.mcp.registry import registry_servers
        from app.kernel.web.errors import FetchError

        try:
            return await registry_servers(self.web.fetcher, self.registry_url, query)
        except (FetchError, ValueError) as exc:
            raise McpRegistryFailed(f"query MCP registry: {exc}") from None

    async def _ask(
        self,
        server_id: str,
        work: Callable[[Client], Awaitable[Any]],
        failure: type[McpRequestFailed],
    ) -> Any:
        if not server_id:
            raise BadRequest("server_id is required")
        try:
            return await self.link(server_id).call(work)
        except (NotConnected, TimeoutError, RuntimeError) as exc:
            raise failure(str(exc)) from None

    def _start(self, server: ServerConfig) -> None:
        from app.kernel.mcp.link import Link
        from app.kernel.web.guard import AllowList

        # A plugin's server is not the user's say-so: over HTTP it gets web_fetch's address rule.
        plugin = any(s is server for s in self.plugin_servers)
        guard = AllowList.parse(self.allow_hosts) if plugin else None
        link = Link(server, self.timeouts, self._sync, guard)
        self.links[server.id] = link
        link.start()

    def _sync(self) -> None:
        """Offer the connected servers' tools: a new snapshot replaces the old one whole."""
        offered: dict[str, Tool] = {}
        for link in self.links.values():
            for remote in link.listing.tools:
                name = tool_name(link.config.id, remote.name)
                offered[name] = ServerTool(self, link.config.id, remote, link.config.exposure)
        self.tools = offered
