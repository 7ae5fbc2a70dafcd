"""Request and response models of `/web-search`.

Unknown fields are ignored, as Foya's handlers do. The fields a client read back are declared:
`has_api_key` on a search provider.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from app.http.models.common import ApiKey, Lenient, one_of
from app.kernel.api import SEARCH_PROVIDER_KINDS


class SearchProviderIn(Lenient):
    id: Annotated[str, Field(description="Default: `search-<n>` by position.")] | None = None
    kind: Annotated[str, one_of(*SEARCH_PROVIDER_KINDS)] = ""
    name: str | None = None
    enabled: bool = False
    api_key: Annotated[ApiKey, Field(description="Empty keeps the stored key.")] | None = None
    has_api_key: Annotated[bool, Field(description="Read-only; ignored.")] | None = None
    search_engine_id: Annotated[str, Field(description="Google's `cx`.")] | None = None
    endpoint: Annotated[str, Field(description="An http(s) URL (SearXNG: required).")] | None = None


class WebSearchIn(Lenient):
    """The whole settings: they replace the stored ones."""

    enabled: bool = False
    default_provider: str | None = None
    providers: list[SearchProviderIn] | None = None


class SearchProviderOut(BaseModel):
    id: str
    kind: str
    name: str
    enabled: bool
    has_api_key: bool | None = None
    search_engine_id: str | None = None
    endpoint: str | None = None


class WebSearchOut(BaseModel):
    enabled: bool
    default_provider: str | None = None
    providers: list[SearchProviderOut]


class WebSearchTestIn(Lenient):
    provider_id: Annotated[str, Field(description="A provider's id, or `duckduckgo`.")] = ""
    query: str = ""


class SearchResultOut(BaseModel):
    title: str
    url: str
    snippet: str | None = None
    source: str | None = None
    rank: int
