"""The one place errors become responses: `{"code", "message"}` with the error's status.

FastAPI's own 404/405 and validation errors are rendered here too, so a client sees one shape.
Unexpected exceptions are logged with a traceback and answered with a message that reveals nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.errors import FoyaError
from app.logs import get_logger

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Render an error body."""
    return JSONResponse({"code": code, "message": message, **extra}, status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on `app`."""
    log = get_logger("foya.http")

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

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", path=request.url.path, exc_info=exc)
        return error_response(500, "internal_error", "internal error")

    app.add_exception_handler(FoyaError, foya_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, unexpected)


def _describe(exc: RequestValidationError) -> str:
    """A short message naming the first invalid field, without echoing its value."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    return f"{where}: {first.get('msg', 'invalid')}"
