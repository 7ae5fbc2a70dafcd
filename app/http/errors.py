"""The one place errors become responses: `{"code", "message"}` with the error's status.

FastAPI's own 404/405 and validation errors are rendered here too, so a client sees one shape.

Exception map (what a client sees):

- `FoyaError` and subclasses: their `status` and `code` (`app.errors` lists the families)
- Starlette `HTTPException`: its status; code `bad_request`, `not_found`, `method_not_allowed`,
  `payload_too_large` or `http_error`
- `RequestValidationError`: 400 `bad_request`, saying in the client's terms what is wrong with
  the first problem (never echoing a value): "request body is not valid JSON: expecting value
  at line 1 column 5", "request body must be JSON (Content-Type: application/json)",
  "field `x`: must be a string", "unknown field `workspace`"
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
import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.errors import FoyaError, InsufficientStorage
from app.logs import get_logger

_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}
# FastAPI's words for a JSON body it cannot decode as text (it reads bytes that are not UTF-8).
_UNDECODABLE = {
    "There was an error parsing the body": "request body is not valid JSON: it is not UTF-8 text"
}

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
        message = _UNDECODABLE.get(message, message)
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


_PLACES = {
    "body": "field",
    "query": "query parameter",
    "path": "path parameter",
    "header": "header",
}
_PROBLEMS = {
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}
_BOUNDS = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be {ge} or greater",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be {le} or less",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
}


def _describe(exc: RequestValidationError) -> str:
    """What is wrong with the request, for the person who sent it, from its first problem."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    kind, loc = first.get("type", ""), tuple(first.get("loc", ()))
    if kind == "json_invalid":
        return _not_json(exc.body, loc[-1], first.get("ctx") or {})
    if loc == ("body",):  # the body as a whole
        if kind == "missing":
            return "request body is required (JSON)"
        if isinstance(first.get("input"), bytes):  # not parsed: not sent as JSON
            return "request body must be JSON (Content-Type: application/json)"
        return "request body must be a JSON object"
    where = _where(loc)
    if kind == "extra_forbidden":
        return f"unknown {where}"
    return f"{where}: {_problem(kind, first)}"


def _not_json(doc: Any, pos: Any, ctx: dict[str, Any]) -> str:
    """`request body is not valid JSON: expecting value at line 1 column 5`."""
    reason = str(ctx.get("error") or "syntax error").removesuffix(" at")
    reason = reason[:1].lower() + reason[1:]
    if isinstance(doc, str) and isinstance(pos, int) and 0 <= pos <= len(doc):
        place = json.JSONDecodeError(reason, doc, pos)
        reason = f"{reason} at line {place.lineno} column {place.colno}"
    return f"request body is not valid JSON: {reason}"


def _where(loc: tuple[Any, ...]) -> str:
    """How the client names `loc`: "field `model_settings.m.context_window`", "field
    `models[0]`", "query parameter `after`"."""
    place, rest = (_PLACES[loc[0]], loc[1:]) if loc and loc[0] in _PLACES else ("field", loc)
    name = ""
    for part in rest:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else str(part)
    return f"{place} `{name}`" if name else place


def _problem(kind: str, error: Any) -> str:
    if kind in _PROBLEMS:
        return _PROBLEMS[kind]
    ctx = error.get("ctx") or {}
    if kind in _BOUNDS:
        with contextlib.suppress(KeyError):
            return _BOUNDS[kind].format(**ctx)
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    return message[:1].lower() + message[1:]
