"""The web search service: settings (`config`), searching (`providers`) and the guarded fetcher.

Routing, as Foya's: with web search disabled, nothing is searched; else the default provider,
if one is set and enabled, answers; with none, DuckDuckGo does. Stricter than Foya: when the
default provider fails its error is reported, not answered by DuckDuckGo instead (that would
send the query to a third party the user did not choose). Foya's model-native search (a
provider's own web search tool) is not offered.

Errors (HTTP status, code), for the routes:
- `SearchTestFailed` 502 `web_search_test_failed`: the provider failed; 404 with that code for
  a `provider_id` that names none
- `config.UpdateFailed` 400 `web_search_update_failed`
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.jsontypes import JSONObject
from app.kernel.web.config import FALLBACK, ProviderConfig, PublicSettings, SearchSettings
from app.kernel.web.errors import SearchFailed, SearchProviderNotFound, SearchTestFailed
from app.kernel.web.guard import AllowList
from app.kernel.web.results import SearchResult, limit_of, normalized

if TYPE_CHECKING:
    import aiohttp

    from app.kernel.web.fetch import Fetcher

TIMEOUT = 20.0
TEST_LIMIT = 3


class WebSearch:
    """Web search settings, searches, and the fetcher of `web_fetch`."""

    def __init__(self, data_dir: Path, allow_hosts: str = "") -> None:
        self.settings = SearchSettings(data_dir)
        self.allow = AllowList.parse(allow_hosts)
        self._fetcher: Fetcher | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def fetcher(self) -> Fetcher:
        """The fetcher of `web_fetch` (aiohttp is loaded on first use, not with the kernel)."""
        if self._fetcher is None:
            from app.kernel.web.fetch import Fetcher

            self._fetcher = Fetcher(self.allow)
        return self._fetcher

    def load(self) -> None:
        self.settings.load()

    def public(self) -> PublicSettings:
        """`GET /web-search`."""
        return self.settings.public()

    async def replace(self, given: JSONObject) -> PublicSettings:
        """`PUT /web-search`."""
        return await self.settings.replace(given)

    async def test(self, provider_id: str, query: str) -> list[SearchResult]:
        """`POST /web-search/test`: up to 3 results of one provider (or `duckduckgo`)."""
        if provider_id == "duckduckgo":
            config = FALLBACK
        else:
            found = [p for p in self.settings.current()["providers"] if p["id"] == provider_id]
            if not found:
                raise SearchProviderNotFound(f"search provider {provider_id!r} not found")
            config = found[0]
        try:
            return await self._search(config, query, TEST_LIMIT)
        except SearchFailed as exc:
            raise SearchTestFailed(str(exc)) from None

    async def search(self, query: str, limit: int | None) -> tuple[list[SearchResult], str]:
        """Results for the `web_search` tool and the provider that gave them; `SearchFailed`
        if none could."""
        query = query.strip()
        if not query:
            raise SearchFailed("search query is required")
        settings = self.settings.current()
        if not settings["enabled"]:
            raise SearchFailed("web search is disabled")
        count = limit_of(limit)
        default = settings["default_provider"]
        if default:
            for config in settings["providers"]:
                if config["id"] == default and config["enabled"]:
                    return normalized(await self._search(config, query, count), count), default
        found = await self._search(FALLBACK, query, count)
        return normalized(found, count), "duckduckgo"

    async def close(self) -> None:
        if self._fetcher is not None:
            await self._fetcher.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _search(self, config: ProviderConfig, query: str, limit: int) -> list[SearchResult]:
        import aiohttp

        from app.kernel.web.providers import PROVIDERS

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        return await PROVIDERS[config["kind"]](self._session, config, query, limit)
