"""Request and response models of `/web-search` and `POST /connections/discover-models`.

Unknown fields are ignored, as Foya's handlers do (discovery has no Foya handler: its body is
the client's connection, so it takes the connection routes' policy). The fields a client read
back are declared: `has_api_key` on a search provider, and every field of a connection on
discovery (only those that say where and how to ask are used).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from app.http.models import Lenient, ModelSettings, SqlInt, one_of
from app.kernel.web.config import KINDS

ApiKey = Annotated[str, Field(description="Write-only: reads say `has_api_key` instead.")]


class SearchProviderIn(Lenient):
    id: Annotated[str, Field(description="Default: `search-<n>` by position.")] | None = None
    kind: Annotated[str, one_of(*KINDS)] = ""
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


class DiscoverModelsIn(Lenient):
    """A connection, saved or not: `base_url` and `api_key` say where to ask; `id` names a
    saved one whose key is used when none is given (for the same `base_url`)."""

    id: str | None = None
    name: str | None = None
    type: Annotated[str, one_of("language", "image", "video")] | None = None
    video_protocol: str | None = None
    kind: Annotated[str, one_of("openai")] | None = None
    auth_kind: Annotated[str, one_of("api_key")] | None = None
    base_url: str | None = None
    api_key: ApiKey | None = None
    has_api_key: bool | None = None
    models: list[str] | None = None
    models_cached: bool | None = None
    sort_order: SqlInt | None = None
    model_settings: dict[str, ModelSettings] | None = None
