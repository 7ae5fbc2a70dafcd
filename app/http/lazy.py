"""Routers built on first use, so start-up does not grow with the number of capabilities.

A capability's routes live in `app.http.routes.<name>`, whose `router(kernel)` builds them.
Importing that module (and its request and response models) and building the router is most
of what a capability costs at start, so only the probes are built with the app; every other
router (sessions and turns included) is a `RouteGroup` (its module and the path prefixes its
routes lie under), imported and included when the first request under one of its prefixes
arrives.

Matching stays exactly as if every router had been built at start: before a request is routed,
every group that has a route which could match its path is built, and the routers are kept in
the one declared order, so the same route wins where two patterns overlap and a path that
matches no route of any group answers the same 404 or 405. A prefix is a path template whose
`{}` segments stand for any one segment; every route of a group must lie under one of the
group's prefixes (tests/test_lazy_surface.py checks each real group).

Reading `routes` builds every group: the OpenAPI document is generated from it on its first
request and lists every route.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from app.kernel.api import Kernel

#: Builds a module's router for the app's kernel (`app.http.routes.<name>.router`).
RouterFactory = Callable[["Kernel"], APIRouter]


@dataclass(frozen=True)
class RouteGroup:
    """One capability's routes: the module whose `router(kernel)` builds them, and the path
    prefixes (templates such as `/sessions/{}/terminals`) every one of its routes lies under."""

    module: str
    prefixes: tuple[str, ...]


def _pattern(prefix: str) -> str:
    segments = prefix.strip("/").split("/")
    body = "/".join("[^/]*" if s == "{}" else re.escape(s) for s in segments)
    return f"/{body}(?:/|$)"


def _head(path: str) -> str:
    """The first segment of a path: the key of the prefixes worth trying."""
    return path.split("/", 2)[1] if path.startswith("/") and len(path) > 1 else ""


class LazyFastAPI(FastAPI):
    """A FastAPI app whose capability routers are built on the first request that needs them.

    `defer` declares the groups, in the order their routers are included; groups built later
    are put back in that order among the routers already there."""

    _deferred: list[tuple[int, RouteGroup]]
    _built: dict[int, ModuleType]
    _alternatives: dict[str, list[str]]
    _by_head: dict[str, re.Pattern[str]]
    _kernel: Kernel
    _base: int

    def defer(self, kernel: Kernel, groups: Sequence[RouteGroup]) -> None:
        """Include `groups` on first use, after every router included so far."""
        self._kernel = kernel
        self._deferred = list(enumerate(groups))
        self._built = {}
        self._base = len(self.router.routes)
        self._index()

    def _index(self) -> None:
        # One pattern per first segment: the common request (under no pending prefix) costs
        # a dict lookup and at most one regex match. Each is compiled when first needed: a
        # start that answers only probes compiles none.
        self._alternatives = {}
        for _, group in self._deferred:
            for prefix in group.prefixes:
                self._alternatives.setdefault(_head(prefix), []).append(_pattern(prefix))
        self._by_head = {}

    def _pending(self, head: str) -> re.Pattern[str] | None:
        pattern = self._by_head.get(head)
        if pattern is None and (alternatives := self._alternatives.get(head)) is not None:
            pattern = self._by_head[head] = re.compile("|".join(alternatives))
        return pattern

    def prepare(self, path: str) -> None:
        """Build every pending group with a prefix `path` lies under."""
        pattern = self._pending(_head(path))
        if pattern is None or pattern.match(path) is None:
            return
        wanted = [
            (i, g)
            for i, g in self._deferred
            if any(re.match(_pattern(p), path) for p in g.prefixes)
        ]
        for index, group in wanted:
            self._build(index, group)
        self._after_build()

    def build_all(self) -> None:
        """Build every pending group (the OpenAPI document lists every route)."""
        if self._deferred:
            for index, group in list(self._deferred):
                self._build(index, group)
            self._after_build()

    def _build(self, index: int, group: RouteGroup) -> None:
        module = importlib.import_module(group.module)
        factory: RouterFactory = module.router
        self.include_router(factory(self._kernel))
        included = self.router.routes.pop()
        # Back among the routers already built, in the declared order.
        at = self._base + sum(1 for i in self._built if i < index)
        self.router.routes.insert(at, included)
        self._built[index] = module
        self._deferred.remove((index, group))

    def _after_build(self) -> None:
        self.router._mark_routes_changed()
        self.openapi_schema = None  # the cached document lacked the routes just added
        self._index()

    def is_upload(self, scope: Scope) -> bool:
        """Whether a built group's module calls `scope` an upload with its own body limit."""
        self.prepare(scope["path"])
        return any(
            check(scope)
            for module in self._built.values()
            if (check := getattr(module, "is_upload", None)) is not None
        )

    def built(self) -> list[str]:
        """The modules of the groups built so far, in declared order."""
        return [self._built[i].__name__ for i in sorted(self._built)]

    @property
    def routes(self) -> list[BaseRoute]:
        """Every route, every group built first."""
        self.build_all()
        return self.router.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            self.prepare(scope["path"])
        await super().__call__(scope, receive, send)
