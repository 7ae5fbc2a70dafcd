"""Web search settings (API keys are write-only) and a provider test."""

from __future__ import annotations

from fastapi import APIRouter

from app.errors import BadRequest
from app.http.models.websearch import SearchResultOut, WebSearchIn, WebSearchOut, WebSearchTestIn
from app.kernel.api import Kernel, SearchResult, WebSearchSettings


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["web-search"])
    web = kernel.web

    @api.get("/web-search", response_model=WebSearchOut, response_model_exclude_none=True)
    async def get_web_search() -> WebSearchSettings:
        """The search providers, with `has_api_key` instead of a key."""
        return web.public()

    @api.put("/web-search", response_model=WebSearchOut, response_model_exclude_none=True)
    async def put_web_search(body: WebSearchIn) -> WebSearchSettings:
        """Replace the settings; an empty `api_key` keeps the provider's stored key."""
        return await web.replace(body.model_dump())

    @api.post(
        "/web-search/test",
        response_model=list[SearchResultOut],
        response_model_exclude_none=True,
    )
    async def test_web_search(body: WebSearchTestIn) -> list[SearchResult]:
        """Up to 3 results of one provider; 502 `web_search_test_failed` when it fails."""
        if not body.query.strip():
            raise BadRequest("query: must not be empty")
        return list(await web.test(body.provider_id, body.query))

    return api
