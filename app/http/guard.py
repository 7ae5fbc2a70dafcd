"""The request boundary: what every route may assume about its input before it is parsed.

- A request body is at most `MAX_BODY_BYTES` (8 MiB); a larger one is refused with 413
  `payload_too_large` as soon as the count passes the limit (or at once when Content-Length says
  so), never read whole first. Routes with their own limit (the artifact upload) are exempt.
- A JSON body holding a lone UTF-16 surrogate (`"\\ud800"`) is refused with 400 `bad_request`:
  no encoder downstream (SQLite, our JSON files, responses) can write one (app.text.surrogates).
- A query string must be UTF-8 once percent-decoded (Starlette would silently turn bad bytes
  into U+FFFD and a route would act on text the client never sent).

A pure ASGI layer, inside `BearerAuth` so an anonymous client never gets a body read. The body is
collected here (routes parse JSON bodies whole anyway) and replayed to the app; later `receive()`
calls (an SSE stream watching for the client leaving) go to the server as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.middleware import header
from app.text.surrogates import has_lone_surrogate

MAX_BODY_BYTES = 8 * 1024 * 1024
# No route reads a body for these, so none is collected: the hot path (probes, listings, event
# streams) passes straight through.
_NO_BODY = frozenset({"GET", "HEAD"})
# A cheap filter before decoding: an escape of a high or low surrogate (D800-DFFF).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_JSON_TYPE = re.compile(rb"application/(?:[\w.+-]+\+)?json", re.IGNORECASE)


def _refusal(status: int, code: str, message: str, *, close: bool = False) -> list[Message]:
    body = json.dumps({"code": code, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the rest of the body is unread: the connection cannot be reused
        headers.append((b"connection", b"close"))
    return [
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]


def valid_query(raw: bytes) -> bool:
    """Whether the query string is UTF-8 after percent-decoding."""
    if b"%" not in raw and raw.isascii():  # most requests: nothing to decode
        return True
    try:
        unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def lone_surrogate_in_json(body: bytes) -> bool:
    """Whether `body`, parsed as JSON, holds a lone surrogate. Invalid JSON is left to the
    route's parser (which answers 400 for it)."""
    if not _SURROGATE_ESCAPE.search(body):
        return False
    try:
        return has_lone_surrogate(json.loads(body))
    except ValueError:
        return False


class RequestGuard:
    """Body size cap, surrogate check and query-string check for every HTTP request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int = MAX_BODY_BYTES,
        exempt: Callable[[Scope], bool] = lambda _: False,
    ) -> None:
        self.app = app
        self.limit = limit
        self.exempt = exempt
        self.limit_text = f"{limit // (1024 * 1024)} MiB"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not valid_query(scope.get("query_string", b"")):
            await self._send(send, 400, "bad_request", "the query string is not valid UTF-8")
            return
        if scope["method"] in _NO_BODY or self.exempt(scope):
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length") or b""
        if declared.isdigit() and int(declared) > self.limit:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was complete: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and self._json(scope) and lone_surrogate_in_json(body):
            await self._send(
                send,
                400,
                "bad_request",
                "the JSON body holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)",
            )
            return
        await self.app(scope, _replay(body, receive), send)

    @staticmethod
    def _json(scope: Scope) -> bool:
        """Bodies FastAPI would parse as JSON: a JSON media type, or none given."""
        content_type = header(scope, b"content-type")
        return content_type is None or _JSON_TYPE.match(content_type.strip()) is not None

    async def _too_large(self, send: Send) -> None:
        message = f"the request body is larger than {self.limit_text}"
        await self._send(send, 413, "payload_too_large", message, close=True)

    @staticmethod
    async def _send(send: Send, status: int, code: str, message: str, close: bool = False) -> None:
        for part in _refusal(status, code, message, close=close):
            await send(part)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the collected body once, then defers to the server's."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
