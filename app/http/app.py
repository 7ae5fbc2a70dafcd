"""Build the ASGI application from a kernel: routers, error handlers, middleware."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp

from app import __version__
from app.http.errors import install_error_handlers
from app.http.guard import RequestGuard
from app.http.middleware import BearerAuth, Observe
from app.http.routes import agents as routes_agents
from app.http.routes import artifacts, connections, files, projects, sessions, system, turns
from app.http.routes import automations as routes_automations
from app.http.routes import background as routes_background
from app.http.routes import canvas as routes_canvas
from app.http.routes import commands as routes_commands
from app.http.routes import context as routes_context
from app.http.routes import context_events as routes_context_events
from app.http.routes import hooks as routes_hooks
from app.http.routes import imports as routes_imports
from app.http.routes import interactions as routes_interactions
from app.http.routes import mcp as routes_mcp
from app.http.routes import plugins as routes_plugins
from app.http.routes import skills as routes_skills
from app.http.routes import terminals as routes_terminals
from app.http.routes import websearch as routes_websearch
from app.http.routes import workflows as routes_workflows
from app.http.routes import workspace as routes_workspace
from app.http.sse import StreamSlots
from app.kernel.api import Kernel

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_api(kernel: Kernel, *, token_sha256: str | None, lifespan: Lifespan | None) -> ASGIApp:
    """The full stack: `Observe` → `BearerAuth` (TCP only) → `RequestGuard` → FastAPI routes."""
    api = FastAPI(
        title="Foya kernel",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # We export Prometheus metrics and structured logs ourselves; FastAPI's OpenTelemetry
        # check would otherwise run on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    # Streams per client are capped on TCP only: the Unix socket's one client is its owner.
    per_client = kernel.settings.max_streams_per_client
    api.state.stream_slots = StreamSlots(per_client) if token_sha256 is not None else None
    install_error_handlers(api)
    _document_errors_truthfully(api)
    for module in (system, sessions, turns, files, routes_workspace, artifacts, connections):
        api.include_router(module.router(kernel))
    api.include_router(projects.router(kernel))
    api.include_router(routes_context.router(kernel))
    api.include_router(routes_context_events.router(kernel))
    api.include_router(routes_hooks.router(kernel))
    api.include_router(routes_commands.router(kernel))
    api.include_router(routes_skills.router(kernel))
    api.include_router(routes_terminals.router(kernel))
    api.include_router(routes_canvas.router(kernel))
    api.include_router(routes_agents.router(kernel))
    api.include_router(routes_background.router(kernel))
    api.include_router(routes_automations.router(kernel))
    api.include_router(routes_workflows.router(kernel))
    api.include_router(routes_interactions.router(kernel))
    api.include_router(routes_plugins.router(kernel))
    api.include_router(routes_websearch.router(kernel))
    api.include_router(routes_mcp.router(kernel))
    api.include_router(routes_imports.router(kernel))
    app: ASGIApp = RequestGuard(
        api,
        exempt=lambda scope: (
            artifacts.is_upload(scope)
            or routes_canvas.is_upload(scope)
            or routes_imports.is_upload(scope)
        ),
    )
    if token_sha256 is not None:
        app = BearerAuth(app, token_sha256)
    return Observe(app, kernel.metrics)


def _document_errors_truthfully(api: FastAPI) -> None:
    """Make the generated schema say what the service does.

    - FastAPI documents a 422 validation response on every route; ours answer 400
      `{"code", "message"}` instead (app.http.errors).
    - Any operation may answer another error (404, 409, 413, 502, 507, …), always as `Error`:
      a `default` response says so.
    - FastAPI's OpenAPI models hold numeric bounds as floats (2**63 becomes 9.2e18); integral
      ones are written back as integers.
    """
    generate = api.openapi
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            schema = generate()
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    responses = operation.get("responses", {})
                    if responses.pop("422", None) is not None:
                        responses.setdefault("400", {"description": "Invalid request", **error})
                    responses.setdefault("default", {"description": "An error", **error})
            schemas = schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            schemas["Error"] = {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
            api.openapi_schema = _integral_bounds(schema)
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _integral_bounds(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: int(v)
            if k in _BOUNDS and isinstance(v, float) and v.is_integer()
            else _integral_bounds(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_integral_bounds(v) for v in node]
    return node
