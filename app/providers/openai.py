"""OpenAI-compatible Chat Completions through the `openai` SDK's async client.

The SDK builds and sends requests, authenticates and raises typed errors; it retries nothing
(`max_retries=0`): rate limits are retried here with a bounded backoff, and every SDK exception
is mapped at this one boundary to a `ProviderError` whose message names the failure but never
the key. For streams we take the SDK's raw response and decode each `data:` line with
`json.loads`: the SDK's own iterator builds a pydantic model per chunk, measured at ~300 µs per
chunk here (20x the JSON decode), which capped a turn at ~3k deltas/s (bench/turns.py).

A failure's message names the provider's host, the HTTP status when there is one and the cause
("cannot reach the provider at api.example.com: connection refused", "the provider at
api.example.com answered HTTP 404: …"); text the provider sent is cut short and stripped of the
key. Each failed call is also logged as a warning (logger `foya.providers`) with the same facts.

HTTP goes through aiohttp (the SDK's `DefaultAioHttpClient`), not httpx's own transport: its C
parser hands over whatever body bytes have arrived in one piece, where httpx's pure-Python h11
costs ~6 µs per chunk, and providers send one chunk per token (bench/turns.py: 9.7 -> 3.8 µs
per delta to consume a stream). httpx stays the SDK's interface: proxies from the environment,
TLS settings and timeouts are configured as before, and aiohttp's errors arrive as httpx's.
The stream's bytes are decoded by app.providers.chatstream (no SDK, no network: it is handed
the bytes). A stream's request itself skips the SDK and httpx when no proxy is configured
(app.providers.rawstream: ~1 ms of CPU less before the request leaves), with the SDK's URL,
body, headers and error types.

Images (`generate_image`) go through the SDK's images API (`images.generate`, or `images.edit`
with reference images); no `response_format` is sent (gpt-image models refuse it and always
answer `b64_json`), and an answer given as a `url` is handed back as an `ImageLink`: it is the
provider's to give and may point anywhere, so the kernel downloads it through its guarded
fetcher (no private or reserved address, every redirect checked, size and time caps), without
the key. No HTTP client of this module's own fetches anything.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai

from app.jsontypes import JSONObject
from app.logs import get_logger
from app.providers import rawstream
from app.providers.base import (
    ChatRequest,
    Completion,
    Done,
    ImageLink,
    ImageRequest,
    ProviderError,
    StreamItem,
)
from app.providers.chatstream import MidStreamError, StreamDecoder, usage_of
from app.providers.failures import MAPPED, Failure, classify, detail_of, host_of
from app.providers.rawstream import RawStreams

RATE_LIMIT_RETRIES = 3
BACKOFF_SECONDS = (1.0, 2.0, 4.0)
MAX_RETRY_AFTER = 10.0
TIMEOUT = 600.0

__all__ = ["MidStreamError", "OpenAIProvider", "StreamDecoder"]


def _retry_after(exc: Exception, attempt: int) -> float:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(header), MAX_RETRY_AFTER) if header else BACKOFF_SECONDS[attempt]
    except ValueError:
        return BACKOFF_SECONDS[attempt]


class OpenAIProvider:
    """A connection's base URL and key, as a `Provider`, with one pool of connections."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=base_url or None,
            api_key=api_key or "none",
            max_retries=0,
            timeout=TIMEOUT,
            http_client=openai.DefaultAioHttpClient(timeout=TIMEOUT),
        )
        self.host = host_of(str(self.client.base_url))  # the SDK's default when base_url is ""
        self.raw = RawStreams(self.client, TIMEOUT) if rawstream.direct() else None
        self._key = api_key
        self._log = get_logger("foya.providers")

    def _failed(self, exc: Exception) -> ProviderError:
        """`exc` as the error the user reads, logged once as a warning."""
        return self._report(classify(exc, self.host, self._key))

    def _report(self, failure: Failure) -> ProviderError:
        self._log.warning(
            "provider call failed",
            host=self.host,
            status=failure.status,
            cause=failure.cause,
            kind=failure.kind,
            error=failure.message,
        )
        return ProviderError(failure.kind, failure.message)

    async def aclose(self) -> None:
        if self.raw is not None:
            await self.raw.aclose()
        await self.client.close()

    def _args(self, request: ChatRequest) -> JSONObject:
        # Messages and tools are already plain JSON: handing them over as `extra_body` skips the
        # SDK's per-message request transform (~0.4 ms a message: 4 s for a 10k-message history).
        body: JSONObject = {"messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        args: JSONObject = {"model": request.model, "messages": [], "extra_body": body}
        if request.reasoning_effort:
            args["reasoning_effort"] = request.reasoning_effort
        if request.max_tokens:
            args["max_tokens"] = request.max_tokens
        return args

    async def _call(self, **args: Any) -> Any:
        return await self._retrying(self.client.chat.completions.create, args)

    async def _open_stream(self, **args: Any) -> tuple[Callable[[], Awaitable[Any]], Any]:
        """(close, body chunks) of a streaming call whose body is still unread: sent straight
        through aiohttp when it can be (`app.providers.rawstream`), else through the SDK."""
        if self.raw is not None:
            opened = await self.raw.open(self._body(args))
            if opened is not None:
                return opened
        manager = self.client.chat.completions.with_streaming_response.create(**args)
        response = await manager.__aenter__()
        close = functools.partial(manager.__aexit__, None, None, None)
        return close, response.http_response.aiter_bytes()

    @staticmethod
    def _body(args: JSONObject) -> JSONObject:
        """The JSON body the SDK sends for `args` (its `extra_body` merged last)."""
        body: JSONObject = {
            k: v for k, v in args.items() if k not in ("extra_body", "extra_headers")
        }
        body.update(args.get("extra_body") or {})
        return body

    async def _retrying(self, create: Any, args: JSONObject) -> Any:
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                return await create(**args)
            except openai.RateLimitError as exc:
                if attempt == RATE_LIMIT_RETRIES:
                    raise self._failed(exc) from None
                await asyncio.sleep(_retry_after(exc, attempt))
            except MAPPED as exc:
                raise self._failed(exc) from None
        raise AssertionError("unreachable")

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamItem]:
        args = {
            **self._args(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            # An event stream gains nothing from compression; uncompressed, it is split into
            # lines as it arrives with no decoder in between.
            "extra_headers": {"Accept-Encoding": "identity"},
        }
        close, chunks = await self._retrying(self._open_stream, args)
        decoder = StreamDecoder()
        try:
            async for chunk in chunks:
                for item in decoder.feed(chunk):
                    yield item
                if decoder.done:
                    break
            for item in decoder.flush():
                yield item
        except MAPPED as exc:
            raise self._failed(exc) from None
        except MidStreamError as exc:
            detail = detail_of(exc.detail, self._key)
            message = f"the provider at {self.host} reported an error mid-stream"
            raise self._report(
                Failure("bad_response", f"{message}: {detail}" if detail else message, None, detail)
            ) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            cause = f"malformed stream ({type(exc).__name__})"
            raise self._report(
                Failure("bad_response", f"the provider at {self.host} sent a {cause}", None, cause)
            ) from None
        finally:
            await close()
        yield Done(decoder.finish)

    async def complete(self, request: ChatRequest) -> Completion:
        response = await self._call(**self._args(request))
        try:
            text = response.choices[0].message.content or ""
        except (IndexError, AttributeError):
            message = f"the provider at {self.host} returned no choices"
            raise self._report(Failure("bad_response", message)) from None
        return Completion(text, usage_of(response.usage.model_dump() if response.usage else None))

    async def models(self) -> list[str]:
        try:
            page = await self.client.models.list()
            return sorted(m.id for m in page.data)
        except MAPPED as exc:
            raise self._failed(exc) from None

    async def generate_image(self, request: ImageRequest, max_bytes: int) -> bytes | ImageLink:
        """One image through the images API: `images.generate`, or `images.edit` of the
        reference images. The answer's `b64_json` is decoded; a `url` is answered as an
        `ImageLink` for the kernel's guarded fetcher (never downloaded here)."""
        args: JSONObject = {"model": request.model, "prompt": request.prompt, "n": 1}
        args["size"] = request.size
        if request.quality:
            args["quality"] = request.quality
        create: Any = self.client.images.generate
        if request.references:
            files = [(f"reference-{n}.png", data) for n, data in enumerate(request.references)]
            args["image"] = files if len(files) > 1 else files[0]
            create = self.client.images.edit
        response = await self._retrying(create, args)
        images = getattr(response, "data", None) or [None]  # None: not an images answer
        b64, url = getattr(images[0], "b64_json", None), getattr(images[0], "url", None)
        if b64:
            return self._decoded(b64, max_bytes)
        if url:
            return self._link(str(url))
        raise self._report(Failure("bad_response", f"the provider at {self.host} sent no image"))

    def _decoded(self, b64: str, max_bytes: int) -> bytes:
        if len(b64) // 4 * 3 > max_bytes + 2:
            raise self._too_large(max_bytes)
        try:
            return base64.b64decode(b64)  # characters outside the alphabet are skipped
        except (binascii.Error, ValueError):
            message = f"the provider at {self.host} sent an image that is not valid base64"
            raise self._report(Failure("bad_response", message)) from None

    def _too_large(self, max_bytes: int) -> ProviderError:
        message = f"the provider at {self.host} sent an image larger than {max_bytes >> 20} MiB"
        return self._report(Failure("bad_response", message))

    def _link(self, url: str) -> ImageLink:
        if not url.startswith(("https://", "http://")):
            message = f"the provider at {self.host} sent an image link that is not http(s)"
            raise self._report(Failure("bad_response", message))
        return ImageLink(url)
