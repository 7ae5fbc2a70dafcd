"""Build the ASGI application from a kernel: routers, error handlers, middleware."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from app import __version__
from app.http.errors import install_error_handlers
from app.http.guard import RequestGuard
from app.http.lazy import LazyFastAPI, RouteGroup
from app.http.middleware import BearerAuth, Observe, web_client_path
from app.http.routes import system
from app.http.sse import StreamSlots
from app.kernel.api import Kernel

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

#: The routers built on first use, in the order they are included (after the one built with
#: the app: the probes and metrics), with the path prefixes their routes lie under.
ROUTE_GROUPS: tuple[RouteGroup, ...] = tuple(
    RouteGroup(f"app.http.routes.{name}", prefixes)
    for name, prefixes in (
        # Sessions, their events and turns too: a start that answers /healthz builds nothing
        # else, and the first session request builds these (~1 ms a route).
        ("sessions", ("/sessions", "/usage")),
        ("turns", ("/sessions/{}",)),
        ("files", ("/sessions/{}/turns/{}/rewind", "/sessions/{}/file-review")),
        ("workspace", ("/sessions/{}/workspace",)),
        ("artifacts", ("/sessions/{}/artifacts",)),
        ("connections", ("/connections", "/settings/default-models")),
        ("projects", ("/projects",)),
        ("context", ("/rules", "/memories", "/settings/memory")),
        ("context_events", ("/context/events",)),
        ("hooks", ("/hooks",)),
        ("commands", ("/commands", "/sessions/{}/commands")),
        ("skills", ("/skills", "/projects/{}/skills")),
        ("terminals", ("/sessions/{}/terminals",)),
        ("canvas", ("/canvases",)),
        (
            "agents",
            (
                "/agents",
                "/projects/{}/agents",
                "/settings/agent-limits",
                "/sessions/{}/agents",
                "/sessions/{}/agent-budget",
            ),
        ),
        (
            "background",
            (
                "/sessions/{}/tools/{}/background",
                "/sessions/{}/tools/{}/reveal",
                "/sessions/{}/background-commands",
            ),
        ),
        ("automations", ("/automations",)),
        (
            "channels",
            (
                "/channels",
                "/channel-pairings",
                "/settings/feishu-bot",
                "/sessions/{}/channel-binding",
                "/sessions/{}/channel-pairings",
            ),
        ),
        ("workflows", ("/sessions/{}/workflow",)),
        ("interactions", ("/sessions/{}/questions", "/sessions/{}/browser-actions")),
        ("plugins", ("/plugins", "/plugin-marketplaces")),
        ("websearch", ("/web-search",)),
        ("push", ("/push",)),
        ("mcp", ("/mcp",)),
        ("imports", ("/imports", "/sessions/{}/export", "/export")),
    )
)


def create_api(
    kernel: Kernel,
    *,
    token_sha256: str | None,
    lifespan: Lifespan | None,
    groups: Sequence[RouteGroup] = ROUTE_GROUPS,
) -> ASGIApp:
    """The full stack: `Observe` → `BearerAuth` (TCP only) → `RequestGuard` → the web client's
    files or the FastAPI routes. The routers of `groups` are built on the first request under
    their prefixes, the web client on the first request for it."""
    api = LazyFastAPI(
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
    api.include_router(system.router(kernel))
    api.defer(kernel, groups)
    # Uploads (artifacts, canvas assets, imports) enforce their own, larger body limit.
    app: ASGIApp = RequestGuard(WithWebClient(api), exempt=api.is_upload)
    if token_sha256 is not None:
        app = BearerAuth(app, token_sha256)
    return Observe(app, kernel.metrics)


class WithWebClient:
    """`/` and `/ui…` go to the web client (app.http.ui, imported and built on the first such
    request, so a start costs nothing for it), every other path to `app`, the API."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.client: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not web_client_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.client is None:
            from app.http.ui import WebClient
            from app.ui import STATIC

            self.client = WebClient(STATIC)
        await self.client(scope, receive, send)


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
