"""Build the ASGI application from a kernel: routers, error handlers, middleware."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp

from app import __version__
from app.http.errors import install_error_handlers
from app.http.middleware import BearerAuth, Observe
from app.http.routes import artifacts, connections, files, projects, sessions, system, turns
from app.kernel import Kernel

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_api(kernel: Kernel, *, token_sha256: str | None, lifespan: Lifespan | None) -> ASGIApp:
    """The full stack: `Observe` → `BearerAuth` (TCP only) → FastAPI routes."""
    api = FastAPI(
        title="Foya kernel",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(api)
    _document_errors_truthfully(api)
    for module in (system, sessions, turns, files, artifacts, connections, projects):
        api.include_router(module.router(kernel))
    app: ASGIApp = api
    if token_sha256 is not None:
        app = BearerAuth(app, token_sha256)
    return Observe(app, kernel.metrics)


def _document_errors_truthfully(api: FastAPI) -> None:
    """FastAPI documents a 422 validation response on every route; ours answer 400
    `{"code", "message"}` instead (app.http.errors), so the schema says that."""
    generate = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            schema = generate()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    responses = operation.get("responses", {})
                    if responses.pop("422", None) is not None:
                        responses.setdefault(
                            "400",
                            {
                                "description": "Invalid request",
                                "content": {
                                    "application/json": {
                                        "schema": {"$ref": "#/components/schemas/Error"}
                                    }
                                },
                            },
                        )
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            schemas["Error"] = {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
