"""Probes and metrics: `/healthz`, `/readyz`, `/metrics`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel

from app.kernel import Kernel
from app.metrics import CONTENT_TYPE


class CheckOut(BaseModel):
    name: str
    ok: bool
    detail: str


class Readiness(BaseModel):
    status: str
    checks: list[CheckOut]


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["system"])

    @api.get("/healthz", response_class=PlainTextResponse)
    async def healthz() -> Response:
        """Liveness: the process answers. Never authenticated (`HEAD` too)."""
        return PlainTextResponse("ok")

    # The same probe without a body (load balancers and `curl -I` use HEAD); undocumented, as
    # FastAPI documents no HEAD routes.
    api.add_api_route(
        "/healthz",
        healthz,
        methods=["HEAD"],
        response_class=PlainTextResponse,
        include_in_schema=False,
    )

    @api.get("/readyz", responses={503: {"description": "a readiness check failed"}})
    async def readyz() -> Readiness:
        """Readiness: database, data directory and disk checks; 503 names the failing one."""
        checks = await kernel.readiness()
        return Readiness(status="ready", checks=[CheckOut(**vars(c)) for c in checks])

    @api.get("/metrics", response_class=Response)
    async def metrics() -> Response:
        """Prometheus text exposition of the app-owned registry."""
        return Response(kernel.metrics.render(), media_type=CONTENT_TYPE)

    return api
