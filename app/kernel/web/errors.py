"""The errors of web search and fetch, apart from the modules that import aiohttp, so the
kernel can name them without loading it (the HTTP client is loaded on first use).

- `FetchError`: `web_fetch` failed; the message is what the model is told
- `SearchFailed`: a search provider gave no usable answer; the message says why
- `SearchTestFailed` 502 `web_search_test_failed`: the provider tested gave no usable answer
- `SearchProviderNotFound` 404 `web_search_test_failed`: the provider tested does not exist
"""

from __future__ import annotations

from app.errors import FoyaError, NotFound


class FetchError(Exception):
    """The fetch failed; the message is the tool's answer to the model."""


class SearchFailed(Exception):
    """The provider gave no usable answer; the message says why."""


class SearchTestFailed(FoyaError):
    """`POST /web-search/test`: the provider gave no usable answer."""

    status = 502
    code = "web_search_test_failed"


class SearchProviderNotFound(SearchTestFailed, NotFound):
    """`POST /web-search/test` of a provider that is not configured."""

    status = 404
