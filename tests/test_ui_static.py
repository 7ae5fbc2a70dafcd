"""The web client's files at `/ui/…` (app.http.ui): what each answer carries, that nothing
outside `app/ui/static` is reachable, that the files need no token while every API route still
does, that a start costs nothing for them, and that `pip install .` ships them.

Header checks call the ASGI app in process: `WebClient` over a tree written by the test (its
scope built by hand, so a path reaches it exactly as a server decodes it; httpx would resolve
`..` first), and the whole stack `create_api` builds. The auth exemption and the encoded paths
go through a real kernel over TLS on loopback, sent as raw request lines.
"""

from __future__ import annotations

import asyncio
import glob
import gzip
import hashlib
import json
import socket
import tomllib
from pathlib import Path
from typing import Any

import pytest
from support.helpers import REPO, Kernel, TlsFiles, app_endpoints
from test_startup_budget import fresh_interpreter

from app.http.app import create_api
from app.http.middleware import web_client_path
from app.http.ui import CSP, WebClient, read_tree
from app.kernel import Kernel as KernelCore
from app.metrics import Metrics
from app.settings import Settings
from app.ui import STATIC

Headers = dict[str, list[str]]
FILES = {
    "index.html": b"<!doctype html><title>Foya</title>" + b"<p>shell</p>" * 50,
    "app.css": b"body { margin: 0 }\n" * 50,
    "js/main.js": b"export const main = 1;\n" * 50,
    "js/views/chat.js": b"export function mount() {}\n",
    "sw.js": b"self.addEventListener('fetch', () => {});\n",
    "shell.json": b'{"a real file": "never served: the listing is made by the server"}',
    "manifest.webmanifest": b'{"name": "Foya"}',
    "icons/icon.png": b"\x89PNG\r\n\x1a\n" + b"\0" * 400,
    "icons/icon.svg": b"<svg xmlns='http://www.w3.org/2000/svg'></svg>" * 20,
    "vendor/lib/lib.mjs": b"export default 1;\n" * 50,
    "vendor/lib/LICENSE": b"MIT\n",
    "vendor/xterm/xterm.mjs": b"export class Terminal {}\n",
    "vendor/MANIFEST.json": b"{}",
    "data.json": b'{"x": 1}',
}
TYPES = {
    "/ui/": "text/html; charset=utf-8",
    "/ui/app.css": "text/css; charset=utf-8",
    "/ui/js/main.js": "text/javascript; charset=utf-8",
    "/ui/vendor/lib/lib.mjs": "text/javascript; charset=utf-8",
    "/ui/manifest.webmanifest": "application/manifest+json",
    "/ui/icons/icon.svg": "image/svg+xml",
    "/ui/icons/icon.png": "image/png",
    "/ui/data.json": "application/json",
    "/ui/vendor/lib/LICENSE": "text/plain; charset=utf-8",
}


def call(app: Any, path: str, method: str = "GET", **headers: str) -> tuple[int, Headers, bytes]:
    """One request to an ASGI app, its scope as a server builds it: (status, headers, body)."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    found: Headers = {}
    for key, value in sent[0]["headers"]:
        found.setdefault(key.decode().lower(), []).append(value.decode())
    return sent[0]["status"], found, b"".join(m.get("body", b"") for m in sent[1:])


def one(headers: Headers, name: str) -> str:
    values = headers.get(name, [])
    assert len(values) == 1, (name, values)
    return values[0]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A static tree beside a secret file, with links from inside to outside and to inside."""
    root = tmp_path / "static"
    for name, body in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "linked").symlink_to(tmp_path / "outside")
    (root / "js" / "alias.js").symlink_to(root / "js" / "main.js")
    (root / ".hidden.js").write_text("dot-files are never served")
    return root


@pytest.fixture
def client(tree: Path) -> WebClient:
    return WebClient(tree)


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/index.html"])
def test_ui_serves_the_index(client: WebClient, path: str) -> None:
    status, headers, body = call(client, path)
    assert (status, body) == (200, FILES["index.html"])
    assert one(headers, "content-type") == "text/html; charset=utf-8"


def test_the_root_redirects_to_the_client(client: WebClient) -> None:
    status, headers, body = call(client, "/")
    assert (status, one(headers, "location"), body) == (307, "/ui/", b"")


@pytest.mark.parametrize(("path", "kind"), TYPES.items())
def test_content_type_by_suffix(client: WebClient, path: str, kind: str) -> None:
    status, headers, _ = call(client, path)
    assert (status, one(headers, "content-type")) == (200, kind)


TRAVERSALS = [
    "/ui/../secret.txt",  # also what a server makes of /ui/%2e%2e/secret.txt
    "/ui/js/../../secret.txt",
    "/ui/..\\secret.txt",
    "/ui//secret.txt",
    "/ui/link.txt",  # a symlink to a file outside
    "/ui/linked/secret.txt",  # a symlinked directory
    "/ui/js/alias.js",  # a symlink is not served even when it points inside
    "/ui/.hidden.js",
    "/ui/nope.js",
    "/ui/js",
    "/uix",
]


@pytest.mark.parametrize("path", [*TRAVERSALS, "ABSOLUTE"])
def test_nothing_outside_the_tree_is_reachable(client: WebClient, tree: Path, path: str) -> None:
    path = "/ui/" + str(tree.parent / "secret.txt") if path == "ABSOLUTE" else path
    status, headers, body = call(client, path)
    assert status == 404
    assert json.loads(body) == {"code": "not_found", "message": "not found"}
    assert one(headers, "content-security-policy") == CSP.decode()


def test_the_tree_read_is_exactly_its_regular_files(tree: Path) -> None:
    assert sorted(read_tree(tree)) == sorted(FILES)


@pytest.mark.parametrize(("method", "status"), [("POST", 405), ("DELETE", 405), ("HEAD", 200)])
def test_only_get_and_head(client: WebClient, method: str, status: int) -> None:
    answer, headers, body = call(client, "/ui/app.css", method)
    assert answer == status
    if status == 405:
        assert one(headers, "allow") == "GET, HEAD"
        assert json.loads(body)["code"] == "method_not_allowed"
    else:  # HEAD: the headers of GET, no body
        assert (one(headers, "content-length"), body) == (str(len(FILES["app.css"])), b"")


def test_etag_and_if_none_match(client: WebClient) -> None:
    _, headers, _ = call(client, "/ui/js/main.js")
    etag = one(headers, "etag")
    assert etag == '"' + hashlib.sha256(FILES["js/main.js"]).hexdigest()[:32] + '"'
    for condition in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        status, again, body = call(client, "/ui/js/main.js", if_none_match=condition)
        assert (status, body, one(again, "etag")) == (304, b"", etag)
        assert "content-length" not in again
        assert one(again, "cache-control") == "no-cache"
    assert call(client, "/ui/js/main.js", if_none_match='"other"')[0] == 200


@pytest.mark.parametrize(
    ("path", "policy"),
    [
        ("/ui/", "no-cache"),
        ("/ui/sw.js", "no-cache"),
        ("/ui/manifest.webmanifest", "no-cache"),
        ("/ui/shell.json", "no-cache"),
        ("/ui/js/main.js", "no-cache"),
        ("/ui/vendor/lib/lib.mjs", "public, max-age=86400"),
        ("/ui/icons/icon.png", "public, max-age=86400"),
    ],
)
def test_cache_control(client: WebClient, path: str, policy: str) -> None:
    assert one(call(client, path)[1], "cache-control") == policy


def test_text_is_gzipped_once_when_accepted(client: WebClient) -> None:
    status, headers, body = call(client, "/ui/app.css", accept_encoding="br, gzip;q=0.5")
    assert (status, one(headers, "content-encoding")) == (200, "gzip")
    assert gzip.decompress(body) == FILES["app.css"]
    assert one(headers, "content-length") == str(len(body)) and len(body) < len(FILES["app.css"])
    assert one(headers, "vary") == "Accept-Encoding"
    gzip_etag = one(headers, "etag")
    assert gzip_etag.endswith('-gzip"')
    assert call(client, "/ui/app.css", accept_encoding="gzip")[2] is body  # kept, not redone
    status, headers, _ = call(
        client, "/ui/app.css", accept_encoding="gzip", if_none_match=gzip_etag
    )
    assert (status, one(headers, "etag")) == (304, gzip_etag)
    assert "content-encoding" not in headers
    for refused in ("gzip;q=0", "identity", "br", ""):
        status, headers, body = call(client, "/ui/app.css", accept_encoding=refused)
        assert "content-encoding" not in headers and body == FILES["app.css"], refused


def test_binary_files_are_never_gzipped(client: WebClient) -> None:
    status, headers, body = call(client, "/ui/icons/icon.png", accept_encoding="gzip, *")
    assert (status, body) == (200, FILES["icons/icon.png"])
    assert "content-encoding" not in headers and "vary" not in headers


@pytest.mark.parametrize("path", ["/", "/ui/", "/ui/sw.js", "/ui/nope", "/ui/data.json"])
def test_every_answer_carries_the_security_headers(client: WebClient, path: str) -> None:
    for method in ("GET", "POST"):
        headers = call(client, path, method)[1]
        assert one(headers, "content-security-policy") == CSP.decode()
        assert one(headers, "x-frame-options") == "DENY"


def test_the_service_worker_may_control_the_client(client: WebClient) -> None:
    headers = call(client, "/ui/sw.js")[1]
    assert one(headers, "service-worker-allowed") == "/ui/"
    assert one(headers, "content-type") == "text/javascript; charset=utf-8"


def shell(app: Any) -> dict[str, Any]:
    status, _, body = call(app, "/ui/shell.json")
    assert status == 200
    document: dict[str, Any] = json.loads(body)
    return document


def test_the_shell_list_names_what_the_worker_precaches(client: WebClient, tree: Path) -> None:
    document = shell(client)
    urls = [entry["url"] for entry in document["files"]]
    assert urls == [
        "/ui/",
        *("/ui/app.css", "/ui/data.json", "/ui/icons/icon.png", "/ui/icons/icon.svg"),
        *("/ui/index.html", "/ui/js/main.js", "/ui/js/views/chat.js"),
        *("/ui/manifest.webmanifest", "/ui/vendor/lib/lib.mjs"),
    ]
    for entry in document["files"]:  # each hash is the body served at that URL
        assert hashlib.sha256(call(client, entry["url"])[2]).hexdigest() == entry["sha256"]
    listing = json.dumps(document["files"], sort_keys=True).encode()
    assert document["version"] == hashlib.sha256(listing).hexdigest()[:16]
    (tree / "js" / "main.js").write_bytes(b"export const main = 2;\n")
    assert shell(WebClient(tree))["version"] != document["version"]  # a new cache for the worker


def test_the_real_shell_lists_the_client_and_its_libraries() -> None:
    document = shell(WebClient(STATIC))
    urls = {entry["url"] for entry in document["files"]}
    for expected in (
        "/ui/vendor/htm/standalone.module.js",
        "/ui/vendor/marked/marked.esm.js",
        "/ui/vendor/dompurify/purify.es.mjs",
        "/ui/manifest.webmanifest",
        "/ui/icons/icon-192.png",
        "/ui/icons/icon-512.png",
        "/ui/icons/icon.svg",
    ):
        assert expected in urls
    assert not any(u.startswith("/ui/vendor/xterm/") or "LICENSE" in u for u in urls)
    assert "/ui/sw.js" not in urls and "/ui/shell.json" not in urls


def test_package_data_ships_every_served_file() -> None:
    """The package-data globs, expanded as setuptools expands them (`glob(recursive=True)`,
    files only), match exactly the files app.http.ui serves."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["app.ui"]
    package = STATIC.parent
    shipped = {
        Path(found).relative_to(STATIC).as_posix()
        for pattern in patterns
        for found in glob.glob(str(package / pattern), recursive=True)
        if Path(found).is_file()
    }
    assert shipped == set(read_tree(STATIC))
    assert {"sw.js", "manifest.webmanifest", "vendor/MANIFEST.json"} <= shipped


STARTED = """
import asyncio, json, sys
from pathlib import Path
import httpx
from app.main import create_app
from app.settings import Settings
service = create_app(Settings(data_dir=Path(sys.argv[1])))

async def probe() -> list[bool]:
    await service.kernel.start()
    seen = []
    try:
        transport = httpx.ASGITransport(app=service.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://k") as client:
            for path in ("/healthz", "/readyz", "/ui/sw.js"):
                seen.append("app.http.ui" in sys.modules or "app.ui" in sys.modules)
                assert (await client.get(path)).status_code == 200, path
            seen.append("app.http.ui" in sys.modules)
    finally:
        await service.kernel.close()
    return seen

print(json.dumps(asyncio.run(probe())))
"""


def test_a_start_costs_nothing_for_the_client(tmp_path: Path) -> None:
    """A started kernel answering its probes has not imported app.http.ui nor app.ui; the first
    request for a file does."""
    assert fresh_interpreter(STARTED, str(tmp_path / "data")) == [False, False, False, True]


def test_the_whole_stack_exempts_only_the_files(tmp_path: Path) -> None:
    token = "t" * 40
    kernel = KernelCore(Settings(data_dir=tmp_path / "data"), Metrics())
    digest = hashlib.sha256(token.encode()).hexdigest()
    app = create_api(kernel, token_sha256=digest, lifespan=None)
    status, headers, _ = call(app, "/ui/sw.js")
    assert status == 200
    for name in ("content-security-policy", "x-frame-options", "cache-control", "etag"):
        one(headers, name)  # each once: Observe adds none of them again
    assert one(headers, "x-content-type-options") == "nosniff"
    assert one(headers, "referrer-policy") == "no-referrer"
    assert call(app, "/")[0] == 307
    assert call(app, "/ui/nope", "HEAD")[0] == 404
    for method, path in [("POST", "/ui/sw.js"), ("DELETE", "/"), ("GET", "/sessions")]:
        assert call(app, path, method)[0] == 401, (method, path)
    assert call(app, "/ui/sw.js", "POST", authorization=f"Bearer {token}")[0] == 405


def test_no_api_route_lies_under_the_client(tmp_path: Path, digest: str) -> None:
    """The exemption covers only the client's paths, and no API route is one of them."""
    endpoints = app_endpoints(tmp_path / "routes", digest)
    assert len(endpoints) > 50
    assert [e for e in endpoints if web_client_path(e[1])] == []


def raw(kernel: Kernel, tls: TlsFiles, target: str) -> bytes:
    """A raw GET of `target` over TLS (no client normalises the path): the whole answer."""
    assert kernel.port is not None
    plain = socket.create_connection(("127.0.0.1", kernel.port), timeout=10)
    with tls.client_context().wrap_socket(plain, server_hostname="127.0.0.1") as conn:
        conn.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_tls_kernel_serves_the_client_without_a_token(
    tls_kernel: Kernel, tls_files: TlsFiles, token: str
) -> None:
    with tls_kernel.client() as anonymous:
        for path in ("/ui/", "/ui/sw.js", "/ui/manifest.webmanifest", "/ui/shell.json"):
            answer = anonymous.get(path)
            assert answer.status_code == 200, (path, answer.text)
            assert answer.headers["content-security-policy"] == CSP.decode()
        packed = anonymous.get("/ui/vendor/marked/marked.esm.js")
        assert packed.headers["content-encoding"] == "gzip"
        assert packed.content == (STATIC / "vendor/marked/marked.esm.js").read_bytes()
        assert anonymous.get("/", follow_redirects=False).headers["location"] == "/ui/"
        head = anonymous.head("/ui/sw.js", headers={"accept-encoding": "identity"})
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-length"] == str((STATIC / "sw.js").stat().st_size)
        assert anonymous.get("/sessions").status_code == 401
        assert anonymous.post("/ui/sw.js").status_code == 401
    with tls_kernel.client(token) as authed:
        assert authed.get("/sessions").status_code == 200
    secret = (REPO / "pyproject.toml").read_bytes()[:40]
    for target in (
        "/ui/%2e%2e/%2e%2e/%2e%2e/pyproject.toml",
        "/ui/../../../pyproject.toml",
        "/ui/..%2f..%2f..%2fpyproject.toml",
        "/ui/%2E%2E%5C%2E%2E%5C%2E%2E%5Cpyproject.toml",
        "/ui/" + str(REPO / "pyproject.toml"),
        "/ui/%2F" + str(REPO / "pyproject.toml")[1:],
    ):
        whole = raw(tls_kernel, tls_files, target)
        assert int(whole.split(maxsplit=2)[1]) in (400, 404), (target, whole[:200])
        assert secret not in whole, target
