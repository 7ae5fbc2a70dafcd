"""OpenAI-compatible Chat Completions through the `openai` SDK's async client.

The SDK parses the SSE stream and retries nothing (`max_retries=0`): rate limits are retried here
with a bounded backoff, and every SDK exception is mapped at this one boundary to a
`ProviderError` whose message names the failure but never the key.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import openai

from app.providers.base import (
    ChatRequest,
    Completion,
    Done,
    ProviderError,
    ReasoningDelta,
    StreamItem,
    TextDelta,
    ToolCallDelta,
    Usage,
)

RATE_LIMIT_RETRIES = 3
BACKOFF_SECONDS = (1.0, 2.0, 4.0)
MAX_RETRY_AFTER = 10.0
TIMEOUT = 600.0


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    inp = raw.prompt_tokens or 0
    out = raw.completion_tokens or 0
    return Usage(inp, out, raw.total_tokens or inp + out, cached)


def _classify(exc: Exception) -> ProviderError:
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ProviderError("auth", "the provider rejected the API key")
    if isinstance(exc, openai.RateLimitError):
        return ProviderError("rate_limit", "the provider is rate limiting requests")
    if isinstance(exc, openai.APIStatusError):
        text = str(getattr(exc, "body", "") or exc.message).lower()
        if "context" in text and ("length" in text or "window" in text or "too long" in text):
            return ProviderError("context_overflow", "the request exceeds the model's context")
        return ProviderError("bad_response", f"the provider answered HTTP {exc.status_code}")
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return ProviderError("network", "cannot reach the provider")
    return ProviderError("bad_response", f"unexpected provider response ({type(exc).__name__})")


def _retry_after(exc: Exception, attempt: int) -> float:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(header), MAX_RETRY_AFTER) if header else BACKOFF_SECONDS[attempt]
    except ValueError:
        return BACKOFF_SECONDS[attempt]


class OpenAIProvider:
    """A connection's base URL and key, as a `Provider`."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=base_url or None, api_key=api_key or "none", max_retries=0, timeout=TIMEOUT
        )

    def _args(self, request: ChatRequest) -> dict[str, Any]:
        args: dict[str, Any] = {"model": request.model, "messages": request.messages}
        if request.tools:
            args["tools"] = request.tools
        if request.reasoning_effort:
            args["reasoning_effort"] = request.reasoning_effort
        if request.max_tokens:
            args["max_tokens"] = request.max_tokens
        return args

    async def _call(self, **args: Any) -> Any:
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                return await self.client.chat.completions.create(**args)
            except openai.RateLimitError as exc:
                if attempt == RATE_LIMIT_RETRIES:
                    raise _classify(exc) from None
                await asyncio.sleep(_retry_after(exc, attempt))
            except openai.OpenAIError as exc:
                raise _classify(exc) from None
        raise AssertionError("unreachable")

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamItem]:
        stream = await self._call(
            **self._args(request), stream=True, stream_options={"include_usage": True}
        )
        finish = "stop"
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    yield _usage(chunk.usage)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None:
                        for item in _delta_items(delta):
                            yield item
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except openai.OpenAIError as exc:
            raise _classify(exc) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderError(
                "bad_response", f"malformed stream ({type(exc).__name__})"
            ) from None
        finally:
            await stream.close()
        yield Done(finish)

    async def complete(self, request: ChatRequest) -> Completion:
        response = await self._call(**self._args(request))
        try:
            text = response.choices[0].message.content or ""
        except (IndexError, AttributeError):
            raise ProviderError("bad_response", "the provider returned no choices") from None
        return Completion(text, _usage(response.usage))

    async def models(self) -> list[str]:
        try:
            page = await self.client.models.list()
            return sorted(m.id for m in page.data)
        except openai.OpenAIError as exc:
            raise _classify(exc) from None


def _delta_items(delta: Any) -> list[StreamItem]:
    items: list[StreamItem] = []
    extra = getattr(delta, "model_extra", None) or {}
    reasoning = getattr(delta, "reasoning_content", None) or extra.get("reasoning_content")
    if reasoning:
        items.append(ReasoningDelta(str(reasoning)))
    if delta.content:
        items.append(TextDelta(delta.content))
    for call in delta.tool_calls or ():
        function = call.function
        items.append(
            ToolCallDelta(
                index=call.index,
                id=call.id,
                name=function.name if function else None,
                arguments=(function.arguments or "") if function else "",
            )
        )
    return items
