"""Probes and metrics: `/healthz`, `/readyz`, `/metrics`.

`/readyz` is polled by load balancers and monitors, often many times a second: its answer is
rendered once per readiness result (the kernel reuses a result for a second) and sent as bytes,
rather than validated and serialized through pydantic models on every request (~12 µs of the
route's ~20). `Readiness` still documents it in the OpenAPI schema.

A scrape of `/metrics` evaluates readiness first (the kernel's cached result, if fresh; each new
result sets the `foya_ready{check}` gauge): an alert on `foya_ready == 0` works even when nobody
polls `/readyz`.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Literal

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel

from app.events import compact_json
from app.http.models.common import one_of
from app.kernel.api import Check, CheckName, Kernel, NotReady
from app.metrics import CONTENT_TYPE


class CheckOut(BaseModel):
    name: CheckName
    ok: bool
    detail: str


class Readiness(BaseModel):
    status: Annotated[Literal["ready"], one_of("ready")]
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

    rendered: tuple[list[Check], bytes] | None = None

    @api.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"description": "a readiness check failed"}},
    )
    async def readyz() -> Response:
        """Readiness: database, data directory and disk checks; 503 names the failing one."""
        nonlocal rendered
        checks = await kernel.readiness()
        if rendered is None or rendered[0] is not checks:
            rendered = (checks, _ready_body(checks))
        return Response(rendered[1], media_type="application/json")

    @api.get("/metrics", response_class=Response)
    async def metrics() -> Response:
        """Prometheus text exposition of the app-owned registry, readiness checks included."""
        with contextlib.suppress(NotReady):
            await kernel.readiness()
        return Response(kernel.metrics.render(), media_type=CONTENT_TYPE)

    return api


def _ready_body(checks: list[Check]) -> bytes:
    return compact_json({"status": "ready", "checks": [vars(c) for c in checks]}).encode()
