"""Pure ASGI middleware: observation (request id, metrics, log line, security headers) and auth.

Written as plain ASGI callables rather than FastAPI dependencies or `BaseHTTPMiddleware` so they
cover every route, 404s and 405s included, and cost one function call each (measured: a sync
dependency halved throughput). `Observe` sits outside `BearerAuth` so 401s are counted, logged
and carry the same headers as everything else. It is also where an unexpected exception ends: logged
once and answered 500 if nothing was sent yet, never re-raised to hypercorn (app.http.errors).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import time
from secrets import token_hex
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.errors import INTERNAL_ERROR, log_unexpected
from app.logs import get_logger
from app.metrics import Metrics

_SECURITY_HEADERS = (
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
)
_NO_STORE = (b"cache-control", b"no-store")
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._-]{1,64}")
_UNAUTHORIZED_BODY = b'{"code":"unauthorized","message":"valid bearer token required"}'
MIN_TOKEN_LENGTH = 32


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of request header `name` (lower-case), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def web_client_path(path: str) -> bool:
    """Whether `path` is the web client's (app.http.ui): `/ui`, `/ui/…`, or `/`, which
    redirects there."""
    return path == "/" or path == "/ui" or path.startswith("/ui/")


def route_template(scope: Scope) -> str:
    """The matched route's path template (`/sessions/{id}`), never the raw path."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    if scope.get("endpoint") is not None and not scope.get("path_params"):
        # A plain Starlette route (FastAPI's /openapi.json): matched, and without parameters
        # its path is its template.
        return str(scope.get("path", "unmatched"))
    return "unmatched"


class Observe:
    """Request id, security headers, Prometheus series and one log line per HTTP request."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self.log = get_logger("foya.http")
        # `labels()` costs a lock and a tuple hash per call; routes are few, so keep the children
        # (bounded: the method is the client's word).
        self._count = functools.lru_cache(maxsize=1024)(
            lambda m, r, s: metrics.requests.labels(m, r, str(s))
        )
        self._timer = functools.lru_cache(maxsize=1024)(lambda m, r: metrics.latency.labels(m, r))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = header(scope, b"x-request-id")
        if given and _REQUEST_ID.fullmatch(given):
            request_id, request_id_bytes = given.decode(), given
        else:
            request_id = token_hex(16)
            request_id_bytes = request_id.encode()
        status = 500
        started = False
        start = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                headers = list(message.get("headers", ()))
                for name, _ in headers:  # a plain loop: any() over a generator costs more here
                    if name.lower() == b"cache-control":
                        break
                else:
                    headers.append(_NO_STORE)
                headers += _SECURITY_HEADERS
                headers.append((b"x-request-id", request_id_bytes))
                message = {**message, "headers": headers}
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:
            # Logged by the app's handler already when it got that far; never re-raised, so
            # hypercorn does not log it a second time.
            log_unexpected(exc, scope.get("path", ""))
            if not started:
                await send_with_headers(_json_start(500, len(INTERNAL_ERROR)))
                await send({"type": "http.response.body", "body": INTERNAL_ERROR})
        finally:
            self.metrics.in_flight.dec()
            elapsed = time.perf_counter() - start
            route = route_template(scope)
            method = scope["method"]
            self._count(method, route, status).inc()
            self._timer(method, route).observe(elapsed)
            self.log.info(
                "request",
                method=method,
                route=route,
                status=status,
                duration_ms=round(elapsed * 1000, 3),
                request_id=request_id,
            )


def _json_start(status: int, length: int) -> Message:
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(length).encode()),
        ],
    }


class BearerAuth:
    """Bearer-token check for TCP listeners: only exact `GET /healthz` (and its `HEAD`, the same
    probe without a body) is exempt, and GET and HEAD of the web client's static files
    (`web_client_path`), which hold no data: the page asks for the token, then sends it on every
    API call.

    The server holds only the token's SHA-256 digest and compares digests in constant time.
    """

    def __init__(self, app: ASGIApp, token_sha256: str) -> None:
        self.app = app
        # Raw bytes, compared with the raw digest of the presented token: no hex round trip per
        # request. A malformed setting (not 64 hex digits) matches no token, as before.
        try:
            self.digest = bytes.fromhex(token_sha256)
        except ValueError:
            self.digest = b"\0" * 33  # longer than any SHA-256 digest: never equal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._exempt(scope) or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(_UNAUTHORIZED_BODY)).encode()),
                    (b"www-authenticate", b'Bearer realm="foya"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": _UNAUTHORIZED_BODY})

    @staticmethod
    def _exempt(scope: Scope) -> bool:
        return bool(
            scope["type"] == "http"
            and scope["method"] in ("GET", "HEAD")
            and (scope["path"] == "/healthz" or web_client_path(scope["path"]))
        )

    def _authorized(self, scope: Scope) -> bool:
        value = header(scope, b"authorization")
        if value is None:
            return False
        scheme, _, token = value.partition(b" ")
        if scheme.lower() != b"bearer" or len(token) < MIN_TOKEN_LENGTH:
            return False
        return hmac.compare_digest(hashlib.sha256(token).digest(), self.digest)
