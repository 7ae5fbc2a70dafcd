"""Feishu's OpenAPI over HTTP (`{api_url}/open-apis/…`): the internal app's tenant token,
cached until shortly before it expires, and one `call` through which every request goes, so
every foreign failure becomes a `PlatformError` here and nowhere else.

Error map (Feishu answers most refusals with HTTP 200 or 400 and a non-zero `code`):

- HTTP 429, or code 99991400 (app rate limit), 230020 (chat rate limit), 11232 (message
  service rate limit): `PlatformError(retry_after=…)` from `x-ogw-ratelimit-reset` or
  `retry-after` (seconds), else 1 s.
- HTTP 5xx, or a network failure: `PlatformError(retry_after=<header or None>)`, transient.
- code 99991661/99991663/99991668/99991677 (token missing, invalid, expired): the token is
  fetched again and the call retried once; a second refusal is permanent.
- Any other non-zero code or 4xx (bad credentials, a message too old to edit, no rights in
  the chat): `PlatformError(permanent=True)`.

Texts carry the path, the status and Feishu's code and message, never the secret or token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from app.kernel.channels.platform import PlatformError
from app.kernel.channels.redaction import forget, redact, remember

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"  # noqa: S105 (a path)
_EARLY = 300.0  # refresh five minutes before the token's `expire`, never with a stale one
_TOKEN_CODES = frozenset({99991661, 99991663, 99991668, 99991677})
_RATE_CODES = frozenset({99991400, 230020, 11232})
_DEFAULT_WAIT = 1.0

JSON = dict[str, Any]
#: A test's stand-in for the network (`httpx.MockTransport`).
Transport = httpx.AsyncBaseTransport


def http_client(base_url: str = "", *, timeout: float, transport: Transport | None) -> Any:
    """An `httpx.AsyncClient`: the one module of this package that imports httpx is this one
    (the import-linter contract on the kernel's way out to the network names it)."""
    return httpx.AsyncClient(
        base_url=base_url, timeout=timeout, transport=transport, trust_env=False
    )


class FeishuApi:
    """One app's authenticated access to Feishu's OpenAPI."""

    def __init__(
        self,
        api_url: str,
        app_id: str,
        app_secret: str,
        *,
        timeout: float = 15.0,
        transport: Transport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app_id = app_id
        self._app_secret = app_secret
        self._clock = clock
        self._client: httpx.AsyncClient = http_client(
            api_url.rstrip("/"), timeout=timeout, transport=transport
        )
        self._token = ""
        self._token_until = 0.0
        self._token_lock = asyncio.Lock()
        remember(app_secret)

    async def token(self) -> str:
        """The tenant access token, fetched when none is cached or it is about to expire;
        a refused app id or secret raises a permanent `PlatformError`."""
        async with self._token_lock:
            if self._token and self._clock() < self._token_until:
                return self._token
            body = {"app_id": self._app_id, "app_secret": self._app_secret}
            answer = await self._send("POST", TOKEN_PATH, json=body, headers={})
            token = answer.get("tenant_access_token")
            if not isinstance(token, str) or not token:
                raise PlatformError("Feishu token: no tenant_access_token", permanent=True)
            forget(self._token)
            remember(token)
            expire = answer.get("expire")
            lifetime = float(expire) if isinstance(expire, int | float) else 7200.0
            self._token, self._token_until = token, self._clock() + max(lifetime - _EARLY, 0.0)
            return token

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: JSON | None = None,
    ) -> JSON:
        """`method path` with the tenant token; the answer's JSON (code 0)."""
        for attempt in (1, 2):
            token = await self.token()
            headers = {"Authorization": f"Bearer {token}"}
            try:
                return await self._send(method, path, params=params, json=json, headers=headers)
            except _TokenRefused:
                self._drop(token)
                if attempt == 2:
                    raise PlatformError(
                        f"Feishu {method} {path}: access token refused", permanent=True
                    ) from None
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self._client.aclose()
        forget(self._token)
        forget(self._app_secret)
        self._token = ""

    def _drop(self, token: str) -> None:
        if self._token == token:
            self._token_until = 0.0

    async def _send(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str],
        params: Mapping[str, str] | None = None,
        json: JSON | None = None,
    ) -> JSON:
        where = f"Feishu {method} {path}"
        try:
            response = await self._client.request(
                method, path, params=params, json=json, headers=headers
            )
        except httpx.HTTPError as exc:
            raise PlatformError(f"{where}: {type(exc).__name__}: {redact(str(exc))}") from None
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        if not isinstance(answer, dict):
            answer = {}
        code = answer.get("code")
        text = redact(f"{where}: HTTP {response.status_code}, code {code}: {answer.get('msg')}")
        waited = _retry_after(response.headers)
        if response.status_code == 429 or code in _RATE_CODES:
            raise PlatformError(text, retry_after=_DEFAULT_WAIT if waited is None else waited)
        if response.status_code >= 500:
            raise PlatformError(text, retry_after=waited)
        if code in _TOKEN_CODES and "Authorization" in headers:
            raise _TokenRefused
        if response.status_code >= 400 or code != 0:
            raise PlatformError(text, permanent=True)
        return answer


class _TokenRefused(Exception):
    """Feishu no longer takes the cached token (revoked, or expired early)."""


def _retry_after(headers: httpx.Headers) -> float | None:
    for name in ("x-ogw-ratelimit-reset", "retry-after"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(float(value), 0.0)
        except ValueError:
            continue
    return None
