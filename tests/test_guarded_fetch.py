"""One guarded way out to the network: every URL the kernel fetches on
someone else's say-so goes through web_fetch's guard (app.kernel.web.fetch, app.kernel.web.guard).

In a real `foya serve` (HOME of its own, `FOYA_WEB_FETCH_ALLOW_HOSTS=127.0.0.1`) against hostile
peers of our own on loopback:
- a hostile image provider speaking the OpenAI images API, whose answer is a `url` pointing at
  a cloud metadata address, at a second loopback address not allowed (127.0.0.2, where a real
  server would hand out a "secret" image), at a redirect from itself to there, or at an oversize
  body: canvas image generation refuses each and stores nothing, and the 127.0.0.2 server sees
  no request; a link to the allowed 127.0.0.1 is downloaded (so the refusals are the guard's);
- the MCP registry (`FOYA_MCP_REGISTRY_URL`) at 127.0.0.2, or redirecting there, is refused;
- a marketplace, a plugin install and a marketplace entry naming a git remote at 127.0.0.2 are
  refused before git runs: a TCP listener there is never connected to, while the same remote
  on the allowed 127.0.0.1 is (git ran, pinned to the checked address).
The import-linter contract keeps raw HTTP clients out of those modules; `urllib.request`, which
import-linter cannot tell from `urllib.parse`, is checked here.
"""

from __future__ import annotations

import ast
import contextlib
import http.server
import io
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from PIL import Image
from support.helpers import Launcher, base_env, short_tmpdir, threaded_server
from support.streams_helpers import Served, assert_error, unix_kernel

BOUND = 20.0  # seconds: upper bound on waits that must end, only to never hang
MIB = 1024 * 1024
API_KEY = "sk-hostile-" + uuid.uuid4().hex[:8]
APP = Path(__file__).resolve().parent.parent / "app"


def png(width: int = 16, height: int = 8) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, "PNG")
    return out.getvalue()


@dataclass
class Hostile:
    """What the hostile peers answer next, and what they saw."""

    image_url: str = ""
    registry: str = "ok"  # "ok" or a URL to redirect to
    hits: list[str] = field(default_factory=list)  # paths asked of the hostile provider
    inside_hits: list[str] = field(default_factory=list)  # paths asked of 127.0.0.2


def provider_handler(state: Hostile) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            for name, value in headers.items():
                self.send_header(name, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

        def do_POST(self) -> None:  # the images API: the answer is a link of the test's choosing
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.hits.append(self.path)
            answer = {"created": 1, "data": [{"url": state.image_url}]}
            self._send(200, json.dumps(answer).encode(), "application/json")

        def do_GET(self) -> None:
            state.hits.append(self.path)
            parts = urlsplit(self.path)
            if parts.path == "/img.png":
                self._send(200, png(), "image/png")
            elif parts.path == "/redirect":
                target = parse_qs(parts.query)["to"][0]
                self._send(302, b"", "text/plain", Location=target)
            elif parts.path == "/huge":  # no length: the body is cut by its running size
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.end_headers()
                self.close_connection = True
                with contextlib.suppress(OSError):
                    block = png() + b"\0" * (MIB - len(png()))
                    for _ in range(24):
                        self.wfile.write(block)
            elif parts.path == "/v0.1/servers":
                if state.registry != "ok":
                    self._send(302, b"", "text/plain", Location=state.registry)
                    return
                server = {"name": "io.example/x", "remotes": [
                    {"type": "streamable-http", "url": "https://mcp.example/x"}]}  # fmt: skip
                body = json.dumps({"servers": [{"server": server}]}).encode()
                self._send(200, body, "application/json")
            else:
                self._send(404, b"", "text/plain")

    return Handler


def inside_handler(state: Hostile) -> type[http.server.BaseHTTPRequestHandler]:
    """A service on a private address the kernel must not reach: it would answer anything."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state.inside_hits.append(self.path)
            if self.path.startswith("/v0.1/servers"):
                body, kind = json.dumps({"servers": []}).encode(), "application/json"
            else:
                body, kind = png(), "image/png"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class Listener:
    """A bare TCP listener counting the connections made to it (a git remote that never is)."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()  # git's TLS handshake fails: it did connect

    def close(self) -> None:
        self._stop.set()
        self._thread.join(BOUND)
        self.sock.close()


@dataclass(frozen=True)
class World:
    served: Served
    client: httpx.Client
    state: Hostile
    provider: str  # http://127.0.0.1:port
    inside: str  # http://127.0.0.2:port
    launcher: Launcher
    root: Path


def start(launcher: Launcher, root: Path, name: str, **env: str) -> Served:
    home = root / f"{name}-home"
    home.mkdir(exist_ok=True)
    return unix_kernel(
        launcher,
        root,
        name,
        env=base_env(HOME=str(home), FOYA_WEB_FETCH_ALLOW_HOSTS="127.0.0.1", **env),
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    state = Hostile()
    launcher = Launcher(tmp_path_factory.mktemp("guarded"))
    with (
        threaded_server(provider_handler(state)) as provider,
        threaded_server(inside_handler(state), host="127.0.0.2") as inside,
        short_tmpdir() as root,
    ):
        base = f"http://127.0.0.1:{provider.server_address[1]}"
        try:
            served = start(launcher, root, "g", FOYA_MCP_REGISTRY_URL=f"{base}/v0.1/servers")
            with served.client() as client:
                client.timeout = httpx.Timeout(BOUND)
                connection(client, base)
                inside_url = f"http://127.0.0.2:{inside.server_address[1]}"
                yield World(served, client, state, base, inside_url, launcher, root)
        finally:
            launcher.close()


def connection(client: httpx.Client, base: str) -> None:
    body = {
        "name": "hostile images",
        "type": "image",
        "base_url": f"{base}/v1",
        "api_key": API_KEY,
        "models": ["img"],
    }
    response = client.post("/connections", json=body)
    assert response.status_code == 201, response.text
    defaults = {"image": {"connection_id": response.json()["id"], "model": "img"}}
    assert client.put("/settings/default-models", json=defaults).status_code == 200


def node(node_id: str, node_type: str, **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "x": 0, "y": 0, "width": 200, "height": 120, **fields}


def generation_canvas(client: httpx.Client) -> dict[str, Any]:
    created = client.post("/canvases", json={"title": "hostile"})
    assert created.status_code == 201, created.text
    doc = created.json()
    nodes = [
        node("gen", "generation", prompt="a fox", generation={"mode": "image", "model": "img"}),
        node("out", "image"),
    ]
    edges = [{"id": "e", "from_node_id": "gen", "to_node_id": "out", "kind": "output"}]
    body = {"expected_revision": doc["revision"], "nodes": nodes, "edges": edges}
    patched = client.patch(f"/canvases/{doc['id']}", json=body)
    assert patched.status_code == 200, patched.text
    return dict(patched.json())


def stored_files(data_dir: Path) -> set[Path]:
    """Every file of the data directory but the database's and the documents' own."""
    return {
        p
        for p in data_dir.rglob("*")
        if p.is_file() and not p.name.startswith("foya.db") and p.suffix != ".json"
    }


def generate(world: World, image_url: str) -> tuple[httpx.Response, dict[str, Any]]:
    """Generate with the provider answering `image_url`: the answer and the canvas after it."""
    world.state.image_url = image_url
    doc = generation_canvas(world.client)
    body = {"expected_revision": doc["revision"], "config_node_id": "gen", "output_node_id": "out"}
    response = world.client.post(f"/canvases/{doc['id']}/generate-image", json=body)
    after = world.client.get(f"/canvases/{doc['id']}").json()
    return response, after


def output(doc: dict[str, Any]) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["id"] == "out")


# ---------------------------------------------------------------------------- image results


def test_a_linked_image_on_an_allowed_host_is_downloaded(world: World) -> None:
    response, after = generate(world, f"{world.provider}/img.png")
    assert response.status_code == 200, response.text
    assert output(after)["status"] == "success"
    [asset] = after["assets"]
    assert (asset["width"], asset["height"]) == (16, 8)


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "inside:/secret.png",
        "redirect:/secret.png",
        "redirect-metadata",
        "huge",
    ],
)
def test_a_hostile_image_link_is_refused_and_nothing_is_stored(world: World, target: str) -> None:
    url = {
        "inside:/secret.png": f"{world.inside}/secret.png",
        "redirect:/secret.png": f"{world.provider}/redirect?to={world.inside}/secret.png",
        "redirect-metadata": f"{world.provider}/redirect?to=http://169.254.169.254/latest/",
        "huge": f"{world.provider}/huge",
    }.get(target, target)
    before = stored_files(world.served.data_dir)
    inside_before = len(world.state.inside_hits)

    response, after = generate(world, url)

    assert_error(response, 502, "generation_provider_failed")
    message = response.json()["message"]
    assert "could not be downloaded" in message, message
    if target == "huge":
        assert "exceeds 20 MB" in message, message
    else:
        assert "private or reserved address" in message, message
    assert output(after)["status"] == "error"
    assert after["assets"] == []
    assert stored_files(world.served.data_dir) == before
    assert len(world.state.inside_hits) == inside_before  # the private server was never asked
    assert API_KEY not in message


# ---------------------------------------------------------------------------- the MCP registry


def test_the_registry_is_fetched_through_the_guard(world: World) -> None:
    world.state.registry = "ok"
    answer = world.client.get("/mcp/registry", params={"search": "x"})
    assert answer.status_code == 200, answer.text
    assert [item["id"] for item in answer.json()] == ["io.example/x"]

    world.state.registry = f"{world.inside}/v0.1/servers"  # a redirect to a private address
    try:
        refused = world.client.get("/mcp/registry")
    finally:
        world.state.registry = "ok"
    assert_error(refused, 502, "mcp_registry_failed")
    assert "private or reserved address" in refused.json()["message"]
    assert not any(h.startswith("/v0.1") for h in world.state.inside_hits)


def test_a_registry_at_a_private_address_is_refused(world: World) -> None:
    served = start(
        world.launcher, world.root, "r", FOYA_MCP_REGISTRY_URL=f"{world.inside}/v0.1/servers"
    )
    with served.client() as client:
        client.timeout = httpx.Timeout(BOUND)
        refused = client.get("/mcp/registry")
    assert_error(refused, 502, "mcp_registry_failed")
    assert "127.0.0.2 is a private or reserved address" in refused.json()["message"]
    assert not any(h.startswith("/v0.1") for h in world.state.inside_hits)


# ---------------------------------------------------------------------------- git remotes


@contextlib.contextmanager
def listener(host: str) -> Iterator[Listener]:
    found = Listener(host)
    try:
        yield found
    finally:
        found.close()


def test_a_marketplace_at_a_private_address_is_refused_before_git_runs(world: World) -> None:
    client = world.client
    with listener("127.0.0.2") as inside, listener("127.0.0.1") as allowed:
        refused = client.post(
            "/plugin-marketplaces", json={"source": f"https://127.0.0.2:{inside.port}/m.git"}
        )
        assert_error(refused, 400, "plugin_marketplace_add_failed")
        assert "refused to fetch from 127.0.0.2" in refused.json()["message"]
        install = client.post(
            "/plugins/install", json={"source": f"https://127.0.0.2:{inside.port}/p.git"}
        )
        assert_error(install, 400, "plugin_install_failed")
        assert "refused to fetch from 127.0.0.2" in install.json()["message"]
        assert inside.accepted == 0

        # The control: the same remote on the allowed address is connected to (git ran).
        ran = client.post(
            "/plugin-marketplaces", json={"source": f"https://127.0.0.1:{allowed.port}/m.git"}
        )
        assert_error(ran, 400, "plugin_marketplace_add_failed")
        assert ran.json()["message"].startswith("git"), ran.json()["message"]
        assert allowed.accepted >= 1

    ssh = client.post("/plugin-marketplaces", json={"source": "git@10.1.2.3:owner/repo.git"})
    assert_error(ssh, 400, "plugin_marketplace_add_failed")
    assert "refused to fetch from 10.1.2.3" in ssh.json()["message"]
    assert client.get("/plugin-marketplaces").json() == []


def test_a_marketplace_entry_naming_a_private_remote_is_refused(
    world: World, tmp_path: Path
) -> None:
    client = world.client
    with listener("127.0.0.2") as inside:
        market = tmp_path / "market"
        (market / ".claude-plugin").mkdir(parents=True)
        entry = {"source": "url", "url": f"https://127.0.0.2:{inside.port}/evil.git"}
        catalog = {"name": "hostile-shop", "owner": {"name": "x"},
                   "plugins": [{"name": "evil", "source": entry}]}  # fmt: skip
        (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(catalog))
        added = client.post("/plugin-marketplaces", json={"source": str(market)})
        assert added.status_code == 201, added.text
        try:
            installed = client.post("/plugin-marketplaces/hostile-shop/plugins/evil/install")
            assert installed.status_code == 400, installed.text
            assert "refused to fetch from 127.0.0.2" in installed.json()["message"]
            assert inside.accepted == 0
            assert client.get("/plugins").json() == []
        finally:
            client.delete("/plugin-marketplaces/hostile-shop")


# ---------------------------------------------------------------------------- no raw clients


def test_no_module_behind_the_guard_imports_urllib_request() -> None:
    """import-linter sees `urllib` as one module, so this one is checked here: no module of
    the kernel or of the image path opens URLs with the standard library."""
    modules = [*(APP / "kernel").rglob("*.py"), APP / "providers" / "openai.py"]
    found = []
    for path in modules:
        for item in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(item, ast.Import):
                names = [alias.name for alias in item.names]
            elif isinstance(item, ast.ImportFrom) and item.module:
                names = [item.module, *(f"{item.module}.{a.name}" for a in item.names)]
            if any(n == "urllib.request" or n.startswith("urllib.request.") for n in names):
                found.append(str(path.relative_to(APP.parent)))
    assert found == []
