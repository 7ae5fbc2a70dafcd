"""Request and response models of the wire surface (reference §1).

Every request body derives from `Strict` (unknown fields refused) or `Lenient` (ignored), as the
Go handler of its route decodes it (`app/bodies.py`); they are re-exported here for the HTTP
layer's models.

Every integer a client sends is bounded to SQLite's INTEGER range (`SqlInt`, `NonNegative`): a
larger one would raise OverflowError when bound to a statement, a 500 instead of a 400. String
fields whose values the kernel checks with its own error code (`invalid_approval_mode`, …) are
typed `str` but documented with their enum (`one_of`), so the OpenAPI schema says what is valid
while an invalid value still reaches the kernel and gets that code.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from app.bodies import Lenient as Lenient
from app.bodies import Strict as Strict

# SQLite INTEGER is a signed 64-bit integer. `lt=2**63` rather than `le=2**63 - 1`: FastAPI's
# OpenAPI models hold bounds as floats, and 2**63 survives that round trip exactly.
SQLITE_MIN = -(2**63)
SQLITE_END = 2**63
SqlInt = Annotated[int, Field(ge=SQLITE_MIN, lt=SQLITE_END)]
NonNegative = Annotated[int, Field(ge=0, lt=SQLITE_END)]
"""Event seqs, positions, token counts: 0 to 2**63 - 1."""


def one_of(*values: str) -> WithJsonSchema:
    """Document a `str` field as an enum without making pydantic enforce it."""
    return WithJsonSchema({"type": "string", "enum": list(values)})


ReasoningEffort = Annotated[str, one_of("", "low", "medium", "high")]
ApprovalMode = Annotated[str, one_of("manual", "auto", "full_access")]


class CreateSession(Strict):
    connection_id: str | None = None
    model: str | None = None
    reasoning_effort: ReasoningEffort | None = None
    project_id: str | None = None
    approval_mode: ApprovalMode | None = None


class UpdateSession(CreateSession):
    title: str | None = None
    pinned: bool | None = None


class ForkSession(Strict):
    title: str | None = None
    through_seq: NonNegative | None = None


class CreateProject(Lenient):
    path: str
    name: str | None = None


class UpdateProject(Strict):
    name: str | None = None
    pinned: bool | None = None


class UpdateQueueItem(Lenient):
    message: str | None = None
    position: NonNegative | None = None


class Decision(Lenient):
    request_id: str | None = None
    decision: Annotated[str, one_of("approved", "approved_for_session", "denied")]


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
