"""What a start builds: only what a first `/healthz` needs; a capability costs nothing until used.

A dummy capability (a route group and a service built on first use) is added to a real app built
by the app factory, whose kernel is started as the server starts it: after the start and a probe,
its module is not imported and its service not built, and the routers built are the probes'
alone; its first request builds both. No figure is asserted: bench.http_stack measures them.

`foya serve` also defers pydantic's model building to first use (app.serve.lean): the OpenAPI
document, which every model of every route goes into, is the same with it as without.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support import dummy_capability
from support.dummy_capability import DummyKernel, lazy_of, request
from support.helpers import REPO

import app.main
from app.http.app import ROUTE_GROUPS, create_api
from app.settings import Settings


def test_a_started_service_builds_a_capability_only_on_its_first_request(
    tmp_path: Path, dummy_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = (*ROUTE_GROUPS, dummy_capability.group())
    monkeypatch.setattr(app.main, "Kernel", DummyKernel)
    monkeypatch.setattr(app.main, "create_api", functools.partial(create_api, groups=groups))
    service = app.main.create_app(Settings(data_dir=tmp_path / "data"))
    kernel = service.kernel
    assert isinstance(kernel, DummyKernel)
    api = lazy_of(service.app)

    async def scenario() -> None:
        await kernel.start()
        try:
            assert (await request(service.app, "GET", "/healthz")).status_code == 200
            assert (await request(service.app, "GET", "/readyz")).status_code == 200
            assert dummy_module not in sys.modules
            assert not kernel.built("dummy")
            assert api.built() == []  # the probes' router alone: not even the sessions'

            answer = await request(service.app, "GET", "/dummy/x")
            assert answer.status_code == 200
            assert answer.json() == {"ref": "x", "service": "dummy"}
            assert dummy_module in sys.modules
            assert kernel.built("dummy")
            assert api.built() == [dummy_module]
        finally:
            await kernel.close()

    asyncio.run(scenario())


OPENAPI = """
import json, sys
from pathlib import Path
if sys.argv[1] == "lean":
    from app.serve.lean import lean_start
    lean_start()
from app.main import create_app
from app.settings import Settings
service = create_app(Settings(data_dir=Path(sys.argv[2])))
app = service.app
while not hasattr(app, "openapi"):
    app = app.app
print(json.dumps(app.openapi(), sort_keys=True))
"""


def fresh_interpreter(script: str, *args: str) -> Any:
    """Run `script` in a new interpreter (no FOYA_ settings) and decode the JSON of its last
    line of output (log lines may come before it). Its HOME and config home are its own: what
    other tests of this worker left in the shared ones (an `~/.foya/mcp.json`) would start
    capabilities this start must not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOYA_")}
    home = Path(tempfile.mkdtemp(prefix="start-home-"))
    env["HOME"], env["XDG_CONFIG_HOME"] = str(home), str(home / ".config")
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def openapi_document(mode: str, data_dir: Path) -> Any:
    return fresh_interpreter(OPENAPI, mode, str(data_dir))


def test_deferred_model_building_documents_the_same_api(tmp_path: Path) -> None:
    eager = openapi_document("eager", tmp_path / "a")
    lean = openapi_document("lean", tmp_path / "b")
    assert lean == eager


STARTED = """
import asyncio, json, sys
from pathlib import Path
import httpx
from app.main import create_app
from app.settings import Settings
service = create_app(Settings(data_dir=Path(sys.argv[1])))

async def probe() -> None:
    await service.kernel.start()
    try:
        transport = httpx.ASGITransport(app=service.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://k") as client:
            for path in ("/healthz", "/readyz"):
                assert (await client.get(path)).status_code == 200, path
    finally:
        await service.kernel.close()

asyncio.run(probe())
print(json.dumps(sorted(sys.modules)))
"""


def test_a_start_imports_no_capability_built_on_first_use(tmp_path: Path) -> None:
    """The real kernel, started and probed in a fresh interpreter, has not imported the modules
    of the capabilities it builds on first use (nor the surface's names from them), nor the
    turn core, its tool table and the tools, built with the first turn, nor the plugins,
    sub-agents, automations, MCP servers, web search, plan mode and channels while none was
    recorded,
    nor the hooks, skills and commands, read with the first turn."""
    loaded = fresh_interpreter(STARTED, str(tmp_path / "data"))
    lazy = (
        *("app.kernel.canvas", "app.kernel.terminals", "app.kernel.imports", "app.kernel.exports"),
        "app.kernel.channels",
        *("app.kernel.interactions", "app.kernel.background", "app.kernel.turns.runner"),
        *("app.kernel.turns.turn", "app.kernel.turns.tooltable", "app.kernel.turns.compaction"),
        *("app.tools.bash", "app.tools.files", "app.kernel.usercontext.tools"),
        *("app.kernel.plugins", "app.kernel.agents.service", "app.kernel.automations.service"),
        *("app.kernel.mcp", "app.kernel.web.search", "app.kernel.workflows.service"),
        *(
            "app.kernel.hooks.service",
            "app.kernel.usercontext.skills",
            "app.kernel.usercontext.commands",
        ),
    )
    early = [m for m in loaded if any(m == c or m.startswith(c + ".") for c in lazy)]
    assert early == [], f"imported by a start and two probes: {early}"
    assert "app.kernel.api" in loaded  # the surface itself was imported
