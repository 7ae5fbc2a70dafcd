"""Capabilities cost nothing at start: their routers and services are built on first use.

A dummy capability is registered the way a real one is (a router module in the app's table of
route groups, a service built on first use by the composition root); start-up imports neither,
and its first request builds both. Each real group's routes lie under the prefixes that build
it, so a request is routed exactly as if every router had been built at start.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import dummy_capability
from support.dummy_capability import DummyKernel, lazy_of, request

from app.http.app import ROUTE_GROUPS, create_api
from app.http.lazy import RouteGroup
from app.kernel import Kernel
from app.metrics import Metrics
from app.settings import Settings


def get(app: Any, method: str, path: str) -> httpx.Response:
    return asyncio.run(request(app, method, path))


def test_a_capability_is_not_imported_at_start_and_works_on_first_use(
    tmp_path: Path, dummy_module: str
) -> None:
    kernel = DummyKernel(Settings(data_dir=tmp_path / "data"), Metrics())
    groups = (*ROUTE_GROUPS, dummy_capability.group())
    app = create_api(kernel, token_sha256=None, lifespan=None, groups=groups)
    api = lazy_of(app)
    assert dummy_module not in sys.modules
    assert not kernel.built("dummy")
    assert api.built() == []  # no capability router was built with the app

    assert get(app, "GET", "/healthz").status_code == 200
    assert dummy_module not in sys.modules  # a hot route builds nothing

    answer = get(app, "GET", "/dummy/x")
    assert answer.status_code == 200
    assert answer.json() == {"ref": "x", "service": "dummy"}
    assert api.built() == [dummy_module]
    assert kernel.built("dummy")

    paths = get(app, "GET", "/openapi.json").json()["paths"]
    assert "/dummy/{ref}" in paths
    assert "/canvases" in paths  # the document lists every route: every group is built
    assert len(api.built()) == len(groups)


def test_first_use_answers_as_if_every_router_was_built(tmp_path: Path) -> None:
    kernel = Kernel(Settings(data_dir=tmp_path / "data"), Metrics())
    app = create_api(kernel, token_sha256=None, lifespan=None)
    api = lazy_of(app)
    # POST only: the route is built first, so the answer is 405, not 404. Every group with a
    # route that could match is built: the session routes too (`/sessions/{session_id}/...`).
    answer = get(app, "GET", "/sessions/s1/terminals/t1/input")
    assert (answer.status_code, answer.json()["code"]) == (405, "method_not_allowed")
    assert api.built() == [
        "app.http.routes.sessions",
        "app.http.routes.turns",
        "app.http.routes.terminals",
    ]
    answer = get(app, "GET", "/nowhere")
    assert (answer.status_code, answer.json()["code"]) == (404, "not_found")
    # Another group's route under a shared head builds that group only.
    get(app, "GET", "/projects/p1/skills")
    assert api.built() == [
        "app.http.routes.sessions",
        "app.http.routes.turns",
        "app.http.routes.projects",
        "app.http.routes.skills",
        "app.http.routes.terminals",
    ]
    # The first session listing builds the session routes only.
    fresh = lazy_of(create_api(kernel, token_sha256=None, lifespan=None))
    fresh.prepare("/sessions")
    assert fresh.built() == ["app.http.routes.sessions"]


def _segments(path: str) -> list[str]:
    return ["{}" if s.startswith("{") else s for s in path.strip("/").split("/")]


@pytest.mark.parametrize("group", ROUTE_GROUPS, ids=lambda g: g.module.rsplit(".", 1)[1])
def test_every_route_of_a_group_lies_under_its_prefixes(group: RouteGroup, tmp_path: Path) -> None:
    kernel = Kernel(Settings(data_dir=tmp_path / "data"), Metrics())
    router = importlib.import_module(group.module).router(kernel)
    prefixes = [_segments(p) for p in group.prefixes]
    for route in router.routes:
        path = _segments(getattr(route, "path_format", ""))
        assert any(path[: len(p)] == p for p in prefixes), (group.module, route)
