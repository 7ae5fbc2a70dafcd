"""Provider connections (the API key is write-only) and default models."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.connections import ConnectionIn, DefaultModels, DiscoverModelsIn
from app.kernel.api import Connection, Kernel, Models


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["connections"])
    connections = kernel.connections

    @api.get("/connections")
    async def list_connections() -> list[Connection]:
        """Every connection, with `has_api_key` instead of the key."""
        return connections.listing()

    @api.post("/connections", status_code=201)
    async def create_connection(body: ConnectionIn) -> Connection:
        return await connections.create(body.given())

    @api.patch("/connections/{connection_id}")
    async def update_connection(connection_id: str, body: ConnectionIn) -> Connection:
        return await connections.update(connection_id, body.given())

    @api.delete("/connections/{connection_id}", status_code=204)
    async def delete_connection(connection_id: str) -> Response:
        """Sessions using it keep their model but lose the connection."""
        await kernel.delete_connection(connection_id)
        return Response(status_code=204)

    @api.get("/connections/{connection_id}/models", response_model_exclude_none=True)
    async def models(connection_id: str, refresh: bool = False) -> Models:
        """The connection's models; `refresh=true` asks the provider again."""
        return await kernel.list_models(connection_id, refresh)

    @api.post("/connections/discover-models", response_model_exclude_none=True)
    async def discover_models(body: DiscoverModelsIn) -> Models:
        """The models a provider lists, without saving a connection: `base_url` and `api_key`,
        or a saved connection's `id` (its key is used when none is given)."""
        return await connections.discover_models(body.given())

    @api.get("/settings/default-models")
    async def default_models() -> DefaultModels:
        return DefaultModels(**connections.defaults())

    @api.put("/settings/default-models")
    async def set_default_models(body: DefaultModels) -> DefaultModels:
        return DefaultModels(**await connections.set_defaults(body.model_dump()))

    return api
