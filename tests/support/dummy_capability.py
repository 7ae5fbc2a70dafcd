"""A capability that exists only for tests: a router module written at test time and a kernel
with one more service built on first use, registered the way a real capability is.

`tests/conftest.py`'s `dummy_module` fixture writes the module where it can be imported and
removes it afterwards; `group()` is its entry for the app's table of route groups.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import httpx

from app.http.lazy import LazyFastAPI, RouteGroup
from app.kernel import Kernel

MODULE = "foya_dummy_capability_routes"
SOURCE = """
from fastapi import APIRouter


def router(kernel):
    api = APIRouter(tags=["dummy"])

    @api.get("/dummy/{ref}")
    async def dummy(ref: str) -> dict[str, str]:
        return {"ref": ref, "service": kernel.dummy.name}

    return api
"""


class DummyService:
    name = "dummy"


class DummyKernel(Kernel):
    """A kernel with one more capability, its service built on first use like `LAZY` ones."""

    @cached_property
    def dummy(self) -> DummyService:
        return DummyService()


def write(directory: Path) -> None:
    """Write the router module into `directory` (which the caller puts on `sys.path`)."""
    (directory / f"{MODULE}.py").write_text(SOURCE)


def group() -> RouteGroup:
    """The dummy's entry in the app's route groups: every route under `/dummy`."""
    return RouteGroup(MODULE, ("/dummy",))


def lazy_of(asgi: Any) -> LazyFastAPI:
    """The lazy FastAPI app inside `asgi`'s middleware."""
    while not isinstance(asgi, LazyFastAPI):
        asgi = asgi.app
    return asgi


async def request(asgi: Any, method: str, path: str) -> httpx.Response:
    """One request to `asgi` in process."""
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.request(method, path)
