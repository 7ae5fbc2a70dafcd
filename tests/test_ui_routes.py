"""Every API request the web client's code makes names a route the kernel has, with its method.

The client's modules call the API through one object (`api.get|post|patch|put|del|stream`,
js/api.js) with a template literal or a string; a module names its base path once
(`const base = …`, `this.base = …`). The test reads every call from the shipped sources,
substitutes those bases, turns each `${…}` into a path parameter, drops the query, and matches
the result against the real app's route table. A renamed route or a typo fails here, before
any browser runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.helpers import app_endpoints

from app.ui import STATIC

JS = sorted((STATIC / "js").rglob("*.js"))
CALL = re.compile(r"\bapi\.(get|post|patch|put|del|stream)\(\s*(`[^`]*`|'[^']*'|base\b|path\b)")
BASE = re.compile(r"(?:const |this\.)(base|path) = (`[^`]*`)")
METHODS = {"get": "GET", "post": "POST", "patch": "PATCH", "put": "PUT", "del": "DELETE"}
METHODS["stream"] = "GET"


def calls(source: str) -> list[tuple[str, str]]:
    """(method, path template) of each API call in one module's `source`."""
    bases = {name: literal.strip("`") for name, literal in BASE.findall(source)}
    found = []
    for verb, literal in CALL.findall(source):
        path = bases.get(literal, literal).strip("`'")
        for name, value in bases.items():
            path = path.replace(f"${{{name}}}", value).replace(f"${{this.{name}}}", value)
        path = re.sub(r"\$\{(query|q|qs)\}$", "", path).split("?", 1)[0]
        found.append((METHODS[verb], re.sub(r"\$\{[^}]*\}", "{p}", path)))
    return found


def matches(template: str, route: str) -> bool:
    pattern = re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(route))
    return re.fullmatch(pattern, template.replace("{p}", "x")) is not None


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory, digest: str) -> list[tuple[str, str]]:
    return app_endpoints(tmp_path_factory.mktemp("routes"), digest)


def test_the_reader_finds_the_client_calls() -> None:
    """The reader sees the calls it should (a broken pattern would make the next test pass
    vacuously)."""
    every = {c for path in JS for c in calls(path.read_text())}
    assert ("GET", "/sessions/{p}/events") in every
    assert ("POST", "/sessions/{p}/approvals/{p}") in every
    assert ("DELETE", "/sessions/{p}/queue/{p}") in every
    assert len(every) > 30


@pytest.mark.parametrize("path", JS, ids=lambda p: str(p.relative_to(STATIC)))
def test_every_call_names_a_route_of_the_kernel(path: Path, routes: list[tuple[str, str]]) -> None:
    unknown = [
        (method, template)
        for method, template in calls(path.read_text())
        if not template.startswith("/")
        or not any(m == method and matches(template, r) for m, r in routes)
    ]
    assert unknown == [], f"{path.name} calls what the kernel does not serve: {unknown}"
