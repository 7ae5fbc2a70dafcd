"""Request models of the connection routes: a connection, its models' settings, the default
models, and `POST /connections/discover-models`.

Unknown fields are ignored on connections, as Foya's handlers do (discovery has no Foya handler:
its body is the client's connection, so it takes the connection routes' policy). Discovery
declares every field of a connection a client read back (only those that say where and how to
ask are used).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.http.models.common import (
    ApiKey,
    Lenient,
    NonNegative,
    ReasoningEffort,
    SqlInt,
    Strict,
    one_of,
)


class ModelSettings(Lenient):
    """A model's settings on a connection (Foya's set); the ones given are stored as sent."""

    context_window: NonNegative | None = None
    max_input_tokens: NonNegative | None = None
    max_output_tokens: NonNegative | None = None
    image_input: bool | None = None
    image_generation: bool | None = None
    video_generation: bool | None = None
    audio_generation: bool | None = None
    tool_calling: bool | None = None
    web_search: bool | None = None
    reasoning_efforts: list[ReasoningEffort] | None = None


class ConnectionIn(Lenient):
    """A connection to create, or the fields to change (`null` means "not given"). The desktop
    sends the whole connection it read: `id` and `has_api_key` are read-only and ignored."""

    name: str | None = None
    type: Literal["language", "image", "video"] | None = None
    video_protocol: Annotated[str, one_of("seedance", "minimax_h3")] | None = Field(
        None, description="Video connections only, and required there."
    )
    kind: Annotated[str, one_of("openai")] | None = None
    auth_kind: Annotated[str, one_of("api_key")] | None = None
    base_url: Annotated[str, Field(description="An http(s) URL; empty for the default.")] | None = (
        None
    )
    api_key: Annotated[str, Field(description="Printable ASCII; write-only.")] | None = None
    models: list[str] | None = None
    sort_order: (
        Annotated[
            SqlInt, Field(description="Position among all connections (moved there, renumbered).")
        ]
        | None
    ) = None
    model_settings: dict[str, ModelSettings] | None = None
    models_cached: (
        Annotated[bool, Field(description="The client's flag that `models` is its catalog.")] | None
    ) = None


class ModelChoice(Strict):
    connection_id: str = ""
    model: str = ""


class DefaultModels(Strict):
    language: ModelChoice = ModelChoice()
    fast: ModelChoice = ModelChoice()
    image: ModelChoice = ModelChoice()
    video: ModelChoice = ModelChoice()


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
