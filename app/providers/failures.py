"""Failed provider calls as the user and the log see them: the provider's host, the HTTP status
when there is one and the cause ("cannot reach the provider at api.example.com: connection
refused", "the provider at api.example.com answered HTTP 404: …"); text the provider sent is cut
short and stripped of the key.
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx
import openai

from app.providers.base import ErrorKind

#: How much of a provider's own error text a message quotes.
DETAIL_CHARS = 200
#: What `classify` maps: the SDK's errors, and what it lets through unwrapped (its HTTP
#: library's errors when a body breaks off mid-stream, an aiohttp error the transport does not
#: translate, socket errors, and the header encoding of a non-ASCII key or URL). The SDK's
#: major version is pinned in pyproject.toml: 2.x moved to another HTTP library (`httpx2`),
#: whose errors escaped this map as internal errors.
MAPPED = (openai.OpenAIError, httpx.HTTPError, aiohttp.ClientError, OSError, UnicodeError)


@dataclass(frozen=True)
class Failure:
    """A failed call as the user and the log see it."""

    kind: ErrorKind
    message: str
    status: int | None = None
    cause: str = ""


def host_of(base_url: str) -> str:
    """`host` or `host:port` of a base URL: what a failure names (never a path or query)."""
    parts = urlsplit(base_url)
    host = parts.hostname or "?"
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{parts.port}" if parts.port else shown


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first (the SDK wraps its HTTP library's errors,
    which wrap the socket's)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def cause_of(exc: BaseException) -> str:
    """The root cause of a transport failure in a few words, or "" when none is known."""
    for inner in reversed(_chain(exc)):
        if isinstance(inner, ssl.SSLCertVerificationError):
            return f"its TLS certificate is not trusted ({inner.verify_message})"
        if isinstance(inner, ssl.SSLError):
            return f"TLS failed ({inner.reason or 'handshake'})"
        if isinstance(inner, socket.gaierror):
            return f"the host name does not resolve ({str(inner.strerror).lower()})"
        if isinstance(inner, TimeoutError | httpx.TimeoutException):
            return "timed out"
        if isinstance(inner, OSError) and inner.errno:
            return os.strerror(inner.errno).lower()
    return ""


def detail_of(body: Any, key: str) -> str:
    """The provider's own error text, short, on one line and without the key (an HTML error
    page says nothing the status does not)."""
    if isinstance(body, dict):
        body = body.get("message") or ""
    text = " ".join(str(body or "").split())
    if text.startswith("<"):
        return ""
    if key:
        text = text.replace(key, "[redacted]")
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def classify(exc: Exception, host: str, key: str) -> Failure:
    at = f"the provider at {host}"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return Failure("auth", f"{at} rejected the API key (HTTP {status})", status)
        if isinstance(exc, openai.RateLimitError):
            return Failure("rate_limit", f"{at} is rate limiting requests (HTTP 429)", status)
        detail = detail_of(getattr(exc, "body", None), key)
        text = str(getattr(exc, "body", "") or exc.message).lower()
        if "context" in text and ("length" in text or "window" in text or "too long" in text):
            message = f"the request exceeds the model's context ({at} answered HTTP {status})"
            return Failure("context_overflow", message, status, detail)
        suffix = f": {detail}" if detail else ""
        return Failure("bad_response", f"{at} answered HTTP {status}{suffix}", status, detail)
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        cause = cause_of(exc) or "the connection failed"
        return Failure("network", f"cannot reach the provider at {host}: {cause}", cause=cause)
    if isinstance(exc, httpx.HTTPError | aiohttp.ClientError | OSError):
        # Raised by the SDK's HTTP library itself while a stream's body is read.
        cause = cause_of(exc) or "the connection closed before the answer ended"
        return Failure("network", f"the stream from {at} broke off: {cause}", cause=cause)
    if isinstance(exc, UnicodeError):
        cause = "the connection's URL or key is not plain ASCII"
        return Failure("bad_response", f"cannot call {at}: {cause}", cause=cause)
    cause = type(exc).__name__
    return Failure("bad_response", f"unexpected answer from {at} ({cause})", cause=cause)
