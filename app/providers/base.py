"""The provider protocol: streaming chat with tools, a non-streaming completion, model lists,
image generation.

Requests and stream items are plain data, independent of any SDK; `ProviderError.kind` tells the
kernel what went wrong without it knowing the SDK's exception types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from app.jsontypes import JSONObject

ErrorKind = Literal["auth", "rate_limit", "context_overflow", "network", "bad_response"]


class ProviderError(Exception):
    """A failed provider call, classified. The message never contains the API key."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class ChatRequest:
    """One model request: OpenAI-format messages and tool schemas."""

    model: str
    messages: list[JSONObject]
    tools: list[JSONObject] = field(default_factory=list)
    reasoning_effort: str | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of tool call `index`: id and name arrive once, arguments in pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True)
class Done:
    finish_reason: str


StreamItem = TextDelta | ReasoningDelta | ToolCallDelta | Usage | Done


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage


@dataclass(frozen=True)
class ImageRequest:
    """One image to generate: `references` (image bytes) turn it into an edit of those."""

    model: str
    prompt: str
    size: str = "1024x1024"
    quality: str | None = None
    references: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class ImageLink:
    """A generated image the provider answered with as a link (`url`, http or https), not as
    bytes. It is someone else's URL: the kernel downloads it through its guarded fetcher
    (`app.kernel.web.fetch`), never a provider (no address guard lives here)."""

    url: str


class Provider(Protocol):
    """What the kernel needs from a model API."""

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamItem]: ...

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def models(self) -> list[str]: ...

    async def generate_image(self, request: ImageRequest, max_bytes: int) -> bytes | ImageLink:
        """The generated image through the images API: its bytes (at most `max_bytes`), or the
        link it was answered with (for the caller to fetch through the guard)."""
        ...

    async def aclose(self) -> None:
        """Close the client's pooled connections."""
        ...


#: The video task APIs a `video` connection can speak (its `video_protocol`).
VideoProtocol = Literal["seedance", "minimax_h3"]
PROTOCOLS: tuple[VideoProtocol, ...] = ("seedance", "minimax_h3")
State = Literal["queued", "running", "succeeded", "failed"]


@dataclass(frozen=True)
class VideoRequest:
    """One video to generate; `reference` is an image's bytes (the first frame's model)."""

    model: str
    prompt: str
    aspect_ratio: str = ""
    duration: int = 0
    reference: bytes = b""
    reference_media_type: str = ""


@dataclass(frozen=True)
class VideoTask:
    """A task as the provider last described it; `video_url` is set once it `succeeded`."""

    id: str
    state: State
    video_url: str = ""
    error: str = ""
