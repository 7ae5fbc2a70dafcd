"""Plugins and plugin marketplaces (as Foya's capability handlers),
served by `app.kernel.plugins.Plugins` and its `marketplaces`. Statuses and error codes are
Foya's: see `app.kernel.plugins.models`."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.plugins import (
    MarketplaceAddRequest,
    MarketplaceEnabledRequest,
    MarketplacePluginInstallRequest,
    PluginEnabledRequest,
    PluginInstallRequest,
)
from app.kernel.api import (
    Kernel,
    MarketplaceCatalog,
    MarketplacePluginPreview,
    MarketplaceSummary,
    Plugin,
)


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`: the installed plugins, then the marketplaces."""
    api = APIRouter(tags=["plugins"])
    _installed(api, kernel)
    _marketplaces(api, kernel)
    return api


def _installed(api: APIRouter, kernel: Kernel) -> None:
    """`/plugins`: the installed plugins."""
    plugins = kernel.plugins

    @api.get("/plugins", response_model_exclude_none=True)
    async def list_plugins() -> list[Plugin]:
        """Every installed plugin, valid or not, with what it brings and what is wrong."""
        return await plugins.listing()

    @api.post("/plugins/install", status_code=201, response_model_exclude_none=True)
    async def install_plugin(body: PluginInstallRequest) -> Plugin:
        """Install from a local directory or a git URL (`replace` an installed one of the same
        name). Nothing in the package is run."""
        return await plugins.install(body.source, body.replace)

    @api.patch("/plugins/{name}", response_model_exclude_none=True)
    async def set_plugin_enabled(name: str, body: PluginEnabledRequest) -> list[Plugin]:
        """Turn a plugin on or off; answers every plugin."""
        return await plugins.set_enabled(name, body.enabled)

    @api.delete("/plugins/{name}", status_code=204)
    async def remove_plugin(name: str) -> Response:
        await plugins.remove(name)
        return Response(status_code=204)


def _marketplaces(api: APIRouter, kernel: Kernel) -> None:
    """`/plugin-marketplaces`: the registered marketplaces, their catalogs and entries."""
    markets = kernel.plugins.marketplaces

    @api.get("/plugin-marketplaces", response_model_exclude_none=True)
    async def list_marketplaces() -> list[MarketplaceSummary]:
        return markets.listing()

    @api.post("/plugin-marketplaces", status_code=201, response_model_exclude_none=True)
    async def add_marketplace(body: MarketplaceAddRequest) -> MarketplaceSummary:
        """Register a marketplace from a local directory or a git URL (at `ref`)."""
        return await markets.add(body.source, body.ref, body.sparse_paths)

    @api.get("/plugin-marketplaces/{name}", response_model_exclude_none=True)
    async def browse_marketplace(name: str) -> MarketplaceCatalog:
        """The marketplace's catalog, each entry marked installed or not."""
        return await markets.browse(name)

    @api.patch("/plugin-marketplaces/{name}", response_model_exclude_none=True)
    async def set_marketplace_enabled(
        name: str, body: MarketplaceEnabledRequest
    ) -> list[MarketplaceSummary]:
        return await markets.set_enabled(name, body.enabled)

    @api.delete("/plugin-marketplaces/{name}", status_code=204)
    async def remove_marketplace(name: str) -> Response:
        await markets.remove(name)
        return Response(status_code=204)

    @api.post("/plugin-marketplaces/{name}/refresh", response_model_exclude_none=True)
    async def refresh_marketplace(name: str) -> MarketplaceSummary:
        """Fetch the marketplace again from its source."""
        return await markets.refresh(name)

    @api.get("/plugin-marketplaces/{name}/plugins/{plugin}", response_model_exclude_none=True)
    async def preview_marketplace_plugin(name: str, plugin: str) -> MarketplacePluginPreview:
        """What installing the entry would bring (its package is fetched, not installed)."""
        return await markets.preview(name, plugin)

    @api.post(
        "/plugin-marketplaces/{name}/plugins/{plugin}/install",
        status_code=201,
        response_model_exclude_none=True,
    )
    async def install_marketplace_plugin(
        name: str, plugin: str, body: MarketplacePluginInstallRequest | None = None
    ) -> Plugin:
        return await markets.install(name, plugin, body.replace if body else False)
