"""The one place errors become responses: `{"code", "message"}` with the error's status.

FastAPI's own 404/405 and validation errors are rendered here too, so a client sees one shape.

Exception map (what a client sees):

- `FoyaError` and subclasses: their `status` and `code` (`app.errors` lists the families)
- Starlette `HTTPException`: its status; code `not_found`, `method_not_allowed` or `http_error`
- `RequestValidationError`: 400 `bad_request`, naming the first invalid field (never its value)
- `OSError(ENOSPC/EDQUOT)`: 507 `insufficient_storage`
- anything else: 500 `internal_error`, logged once with its traceback, message revealing nothing

Why an unexpected error is logged exactly once: Starlette's `ServerErrorMiddleware` calls the
`Exception` handler to send the response and then re-raises, and hypercorn logs what reaches it
("Error in ASGI Framework"). The handler logs and marks the exception; `Observe`
(app.http.middleware), the outermost layer, swallows a marked one and logs and answers any other.
"""

from __future__ import annotations

import contextlib
import errno
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.errors import FoyaError, InsufficientStorage
from app.logs import get_logger

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
_FULL = (errno.ENOSPC, errno.EDQUOT)
_LOGGED = "_foya_logged"
INTERNAL_ERROR = b'{"code":"internal_error","message":"internal error"}'


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Render an error body."""
    return JSONResponse({"code": code, "message": message, **extra}, status, headers=headers)


def disk_full() -> InsufficientStorage:
    return InsufficientStorage("the disk holding the data directory is full: free space on it")


def log_unexpected(exc: BaseException, path: str) -> None:
    """Log an unexpected error with its traceback, once per exception."""
    if getattr(exc, _LOGGED, False):
        return
    get_logger("foya.http").error("unhandled error", path=path, exc_info=exc)
    with contextlib.suppress(AttributeError):  # a type with __slots__: logged twice at worst
        setattr(exc, _LOGGED, True)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on `app`."""

    async def foya_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, FoyaError)
        return error_response(exc.status, exc.code, exc.message, **exc.extra)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return error_response(exc.status_code, code, message, dict(exc.headers or {}))

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(400, "bad_request", _describe(exc))

    async def os_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, OSError)
        if exc.errno in _FULL:
            return await foya_error(request, disk_full())
        log_unexpected(exc, request.url.path)
        return error_response(500, "internal_error", "internal error")

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log_unexpected(exc, request.url.path)
        return error_response(500, "internal_error", "internal error")

    app.add_exception_handler(FoyaError, foya_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    # Handled by ExceptionMiddleware (no re-raise), unlike the catch-all below.
    app.add_exception_handler(OSError, os_error)
    app.add_exception_handler(Exception, unexpected)


def _describe(exc: RequestValidationError) -> str:
    """A short message naming the first invalid field, without echoing its value."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    return f"{where}: {first.get('msg', 'invalid')}"
