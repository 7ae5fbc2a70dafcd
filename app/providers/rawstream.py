"""A streaming Chat Completions request straight through aiohttp, for the turn's first delta.

The SDK's own path to a stream (its request options, httpx's request, auth and cookie handling,
the httpx-to-aiohttp transport, httpx's response around aiohttp's) took 1.2 ms from the call to
the server's receipt and 1.7 ms to the first decoded item, against 0.4 and 0.6 ms through this
module (a local server answering at once, on the 2-core development machine): a large part of
the kernel's own time to a turn's first delta. So a stream is sent here: the same URL, body and
headers as the SDK's (its default headers, key included, computed once), the same timeouts and
TLS trust (httpx's SSL context, as the SDK's transport builds it), the same error types (a
failed status is turned into the SDK's exception by the SDK itself, connection failures into
`APIConnectionError`), so `app.providers.failures` classifies them as before.

A request's body is encoded here too, with the tool definitions it carries (18 KB of a 38-tool
table, 236 of the 314 µs `json.dumps` took for the whole body) encoded once and kept: the same
definitions go with every request of every step (`ToolsJSON`).

Proxies are httpx's business in the SDK's path; when the environment names one, streams keep
going through the SDK (`direct` is False) rather than guess how another library reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import openai

from app.jsontypes import JSONObject

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")

#: How a stream is read and then given up: (close, the body's chunks as they arrive).
Opened = tuple[Callable[[], Awaitable[None]], AsyncIterator[bytes]]


def direct() -> bool:
    """No proxy is configured in the environment: a stream may bypass the SDK's client."""
    names = {name.lower() for name, value in os.environ.items() if value}
    return not names.intersection(PROXY_VARIABLES)


class RawStreams:
    """Streaming requests of one `openai.AsyncOpenAI` client, on a pool of their own."""

    def __init__(self, client: openai.AsyncOpenAI, timeout: float) -> None:
        self.client = client
        self.url = str(client.base_url).rstrip("/") + "/chat/completions"
        headers = {k: v for k, v in client.default_headers.items() if isinstance(v, str)}
        # An event stream gains nothing from compression; uncompressed, it is split into lines
        # as it arrives with no decoder in between.
        headers["Accept-Encoding"] = "identity"
        headers["x-stainless-retry-count"] = "0"
        headers["x-stainless-read-timeout"] = str(timeout)
        self.headers = headers
        self.timeout = aiohttp.ClientTimeout(
            sock_connect=timeout, sock_read=timeout, connect=timeout
        )
        self._session: aiohttp.ClientSession | None = None
        self.tools_json = ToolsJSON()

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            ssl = httpx.create_ssl_context(trust_env=True)  # what the SDK's transport trusts
            connector = aiohttp.TCPConnector(ssl=ssl)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
        return self._session

    async def open(self, body: JSONObject) -> Opened | None:
        """(close, body chunks) of a streaming request whose status was checked and whose body
        is unread; None for a redirect, which the SDK's client follows by its own rules (the
        caller asks it)."""
        response = await self._send(body)
        if response is None:
            return None

        async def close() -> None:
            # Back to the pool, or closed if the body was not read to its end.
            response.release()

        return close, self._chunks(response)

    async def _send(self, body: JSONObject) -> aiohttp.ClientResponse | None:
        data = self.tools_json.body(body)
        try:
            response = await self._pool().post(
                self.url,
                data=data,
                headers=self.headers,
                allow_redirects=False,
                auto_decompress=False,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            request = httpx.Request("POST", self.url)
            if isinstance(exc, TimeoutError):
                raise openai.APITimeoutError(request) from exc
            raise openai.APIConnectionError(request=request) from exc
        if 300 <= response.status < 400:
            response.release()
            return None
        if response.status < 400:
            return response
        raise await self._status_error(response)

    async def _status_error(self, response: aiohttp.ClientResponse) -> openai.APIStatusError:
        """The SDK's exception for a failed status, made by the SDK from the same answer."""
        try:
            content = await response.read()
        finally:
            response.release()
        answer = httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            content=content,
            request=httpx.Request("POST", self.url),
        )
        made: Any = self.client._make_status_error_from_response(answer)
        error: openai.APIStatusError = made
        return error

    @staticmethod
    async def _chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        async for chunk in response.content.iter_any():
            yield chunk

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ToolsJSON:
    """Request bodies as compact JSON, each tool definition encoded once and reused.

    A definition is known by its name, its description and its parameters' schema object, which
    the entry holds (so that object's id is never reused while it is a key): tools build their
    schema once and never change it, and a tool whose schema is rebuilt (an MCP server's, after
    a reconnect) is a new object and so a new entry. Descriptions are compared by value, so one
    whose text changes is encoded again. Bounded: the cache starts over past `LIMIT` entries.
    """

    LIMIT = 1024

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, int], tuple[object, str]] = {}

    def body(self, body: JSONObject) -> bytes:
        """`body` as UTF-8 compact JSON, its `tools` last (JSON objects are unordered)."""
        tools = body.get("tools")
        if not isinstance(tools, list) or not tools:
            return _compact(body).encode()
        rest = _compact({k: v for k, v in body.items() if k != "tools"})
        encoded = ",".join(self._tool(tool) for tool in tools)
        joiner = "," if rest != "{}" else ""
        return f'{rest[:-1]}{joiner}"tools":[{encoded}]}}'.encode()

    def _tool(self, tool: object) -> str:
        if not isinstance(tool, dict) or tool.keys() != {"type", "function"}:
            return _compact(tool)
        function = tool["function"]
        if not isinstance(function, dict):
            return _compact(tool)
        name, description = function.get("name"), function.get("description", "")
        parameters = function.get("parameters")
        if not isinstance(name, str) or not isinstance(description, str) or parameters is None:
            return _compact(tool)
        key = (name, description, id(parameters))
        known = self._known.get(key)
        if known is not None and known[0] is parameters:
            return known[1]
        encoded = _compact(tool)
        if len(self._known) >= self.LIMIT:
            self._known.clear()
        self._known[key] = (parameters, encoded)
        return encoded
