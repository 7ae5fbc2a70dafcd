"""Wiring: build the kernel and the ASGI app from settings. Nothing here decides anything."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.types import ASGIApp

from app.http.app import create_api
from app.kernel import Kernel
from app.metrics import Metrics, ReplicationStatus
from app.settings import Settings


@dataclass(frozen=True)
class Service:
    """The ASGI app and the kernel behind it (the server needs the kernel to begin shutdown)."""

    app: ASGIApp
    kernel: Kernel


def create_app(
    settings: Settings,
    *,
    token_sha256: str | None = None,
    on_started: Callable[[], None] | None = None,
    replication: Callable[[], ReplicationStatus] | None = None,
) -> Service:
    """Build the service. Its lifespan starts the kernel, then calls `on_started`.
    `replication` is the status of the replicator running beside it (`--replicate`)."""
    kernel = Kernel(settings, Metrics(), replication=replication)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await kernel.start()
        try:
            if on_started is not None:
                on_started()
            yield
        finally:
            await kernel.close()

    return Service(create_api(kernel, token_sha256=token_sha256, lifespan=lifespan), kernel)
