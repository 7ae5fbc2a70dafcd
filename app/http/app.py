"""Build the ASGI application from a kernel: routers, error handlers, middleware."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from starlette.types import ASGIApp

from app import __version__
from app.http.errors import install_error_handlers
from app.http.middleware import BearerAuth, Observe
from app.http.routes import system
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
    api.include_router(system.router(kernel))
    app: ASGIApp = api
    if token_sha256 is not None:
        app = BearerAuth(app, token_sha256)
    return Observe(app, kernel.metrics)
