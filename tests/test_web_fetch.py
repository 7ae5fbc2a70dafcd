"""The guarded fetch behind `web_fetch`, against real HTTP servers on loopback.

Refused, without a connection: 127.0.0.1, `localhost` (the system resolver's answer), 10.x,
169.254.169.254 and the other private or reserved ranges, given as IP literals or as a name the
system resolver maps to them (only `socket.getaddrinfo` is patched, never our code), and a
redirect to one of them. Allowed: what FOYA_WEB_FETCH_ALLOW_HOSTS names. The name is resolved
once and the connection goes to the address checked (a second answer, a rebinding, is never
used). Size, time and redirect caps; only textual content; HTML becomes Markdown. The tool runs
in an in-process kernel with the fake provider calling it, its approval asked as `network`.

Only loopback servers are ever contacted: private and metadata addresses are refused before
any connection is made, which is what these tests assert.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support.fake_provider import BOUND, answer, call, tools
from support.helpers import threaded_server
from support.inprocess import InProcess, inprocess_kernel
from support.interactions_helpers import new_session, watch

from app import events as k
from app.kernel.turns.inputs import TurnInput
from app.kernel.web.errors import FetchError
from app.kernel.web.fetch import TRUNCATED, Fetcher
from app.kernel.web.guard import AllowList, blocked, literal

PAGE = """<html><head><title>T</title><script>steal()</script><style>p{}</style></head>
<body><nav><a href="/home">Home</a></nav><main><h1>Title</h1>
<p>Read <a href="/docs">the docs</a>.</p><ul><li>one</li><li>two</li></ul></main></body></html>"""


@dataclass
class Site:
    """A real HTTP server on one loopback address; it records every request's path."""

    host: str = "127.0.0.1"
    port: int = 0
    hits: list[str] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    name: str = "A"

    def url(self, path: str, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            site.hits.append(self.path)
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            route: Callable[[dict[str, str]], None] = getattr(
                self, "r_" + parts.path.strip("/"), self.r_missing
            )
            route(query)

        def r_page(self, q: dict[str, str]) -> None:
            self.send(200, PAGE.encode(), "text/html; charset=utf-8")

        def r_whoami(self, q: dict[str, str]) -> None:
            self.send(200, f"server {site.name}".encode(), "text/plain")

        def r_big(self, q: dict[str, str]) -> None:
            size = int(q["n"])
            if "chunked" not in q:
                self.send(200, b"a" * size, "text/plain")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"a" * 1000
            for start in range(0, size, len(piece)):
                chunk = piece[: min(len(piece), size - start)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")

        def r_slow(self, q: dict[str, str]) -> None:
            site.gate.wait(BOUND)  # until the test ends
            with contextlib.suppress(OSError):
                self.send(200, b"late", "text/plain")

        def r_redirect(self, q: dict[str, str]) -> None:
            self.send(302, b"", "text/plain", Location=q["to"])

        def r_loop(self, q: dict[str, str]) -> None:
            self.send(302, b"", "text/plain", Location="/loop")

        def r_png(self, q: dict[str, str]) -> None:
            self.send(200, b"\x89PNG\r\n\x1a\n", "image/png")

        def r_missing(self, q: dict[str, str]) -> None:
            self.send(404, b"no", "text/plain")

    return Handler


@contextlib.contextmanager
def serving(host: str = "127.0.0.1", port: int = 0, name: str = "A") -> Iterator[Site]:
    site = Site(host=host, name=name)
    with threaded_server(_handler(site), host, port) as server:
        site.port = server.server_address[1]
        try:
            yield site
        finally:
            site.gate.set()  # handlers held at the gate end before the server shuts down


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serving() as running:
        yield running


@dataclass
class Names:
    """Names the patched system resolver answers itself, and the lookups it answered."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)

    def __setitem__(self, name: str, addresses: list[str]) -> None:
        self.answers[name] = addresses


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Names:
    """`socket.getaddrinfo` answering the names set here with their addresses (one per call,
    the last one repeated); every other name resolves as usual."""
    names = Names()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in names.answers:
            return real(host, port, *args, **kwargs)
        names.lookups.append(name)
        queued = names.answers[name]
        address = queued.pop(0) if len(queued) > 1 else queued[0]
        if ":" in address:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, int(port), 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def fetch(url: str, allow: str = "", **caps: Any) -> str:
    async def go() -> str:
        fetcher = Fetcher(AllowList.parse(allow), **caps)
        try:
            return await fetcher.fetch(url)
        finally:
            await fetcher.close()

    return asyncio.run(go())


def refused(url: str, allow: str = "", **caps: Any) -> str:
    with pytest.raises(FetchError) as caught:
        fetch(url, allow, **caps)
    return str(caught.value)


# ------------------------------------------------------------------------- refused addresses


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.100.100.200",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "2002:a00:1::1",
        "64:ff9b::a9fe:a9fe",
    ],
)
def test_private_and_metadata_ip_literals_are_refused_before_any_connection(address: str) -> None:
    host = f"[{address}]" if ":" in address else address
    message = refused(f"http://{host}/latest/meta-data/")
    assert "private or reserved address" in message, message


def test_the_loopback_server_is_refused_by_ip_and_by_name(site: Site) -> None:
    assert "127.0.0.1 is a private or reserved address" in refused(site.url("/page"))
    message = refused(site.url("/page", host="localhost"))
    assert "localhost resolves to a private or reserved address" in message
    assert site.hits == []


@pytest.mark.parametrize("address", ["10.1.2.3", "169.254.169.254", "fd00:ec2::254"])
def test_a_name_resolving_to_a_private_address_is_refused(resolver: Names, address: str) -> None:
    resolver["internal.example"] = [address]
    message = refused("http://internal.example/admin")
    assert message == (
        f"web fetch failed: internal.example resolves to a private or reserved address ({address})"
    )


def test_a_redirect_to_a_private_address_is_refused(site: Site, resolver: Names) -> None:
    resolver["metadata.example"] = ["169.254.169.254"]
    site.hits.clear()
    for target in (site.url("/whoami"), "http://metadata.example/latest/", "http://10.0.0.7/"):
        start = site.url(f"/redirect?to={target}", host="localhost")
        assert "private or reserved address" in refused(start, allow="localhost")
    # Each chain's first hop was served (allowed by name); no second hop ever reached us.
    assert site.hits == [h for h in site.hits if h.startswith("/redirect")]
    assert len(site.hits) == 3


def test_a_redirect_to_another_scheme_is_refused(site: Site) -> None:
    start = site.url("/redirect?to=file:///etc/passwd", host="localhost")
    assert refused(start, allow="localhost") == (
        "web fetch failed: redirect to an invalid or unsafe URL"
    )


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "https://user:secret@example.com/",
        "http:///no-host",
        "not a url",
        "javascript:alert(1)",
    ],
)
def test_urls_that_are_not_plain_http_are_refused(url: str) -> None:
    assert refused(url) == "invalid or unsafe URL"


def test_the_address_rules() -> None:
    for public in ("93.184.216.34", "8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8"):
        address = literal(public)
        assert address is not None and not blocked(address), public
    nat64_public = literal("64:ff9b::808:808")
    assert nat64_public is not None and not blocked(nat64_public)


# ---------------------------------------------------------------------------------- allowed


def test_an_explicitly_allowed_host_is_fetched_and_html_becomes_markdown(site: Site) -> None:
    text = fetch(site.url("/page", host="localhost"), allow="localhost")
    assert text == (
        f"# Title\n\nRead [the docs](http://localhost:{site.port}/docs).\n\n- one\n- two"
    )
    assert "steal" not in text and "Home" not in text


def test_an_allowed_network_admits_its_addresses(site: Site) -> None:
    assert fetch(site.url("/whoami"), allow="127.0.0.0/8") == "server A"
    assert "private or reserved" in refused(site.url("/whoami"), allow="10.0.0.0/8")


def test_the_name_is_resolved_once_and_the_checked_address_is_used(
    resolver: Names,
) -> None:
    """A rebinding resolver: first the allowed 127.0.0.1, then 127.0.0.2 (not allowed, and a
    different server). The fetch must reach the first and never ask again."""
    with serving("127.0.0.1", name="A") as good:
        try:
            other = serving("127.0.0.2", good.port, name="B")
            bad = other.__enter__()
        except OSError:
            pytest.skip("127.0.0.2 cannot be bound here")
        try:
            resolver["rebind.example"] = ["127.0.0.1", "127.0.0.2"]
            url = f"http://rebind.example:{good.port}/whoami"
            assert fetch(url, allow="127.0.0.1") == "server A"
            assert resolver.lookups == ["rebind.example"]
            assert bad.hits == []
        finally:
            other.__exit__(None, None, None)


# ------------------------------------------------------------------------------------- caps


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_over_the_size_cap_is_refused(site: Site, chunked: bool) -> None:
    extra = "&chunked=1" if chunked else ""
    url = site.url(f"/big?n=3001{extra}", host="localhost")
    assert refused(url, "localhost", max_bytes=3000) == "web fetch response exceeds 3000 bytes"
    url = site.url(f"/big?n=3000{extra}", host="localhost")
    assert fetch(url, "localhost", max_bytes=3000) == "a" * 3000


def test_a_page_that_does_not_answer_in_time_is_given_up(site: Site) -> None:
    url = site.url("/slow", host="localhost")
    assert refused(url, "localhost", timeout=0.5) == "web fetch failed: no answer within 0.5 s"


def test_redirects_are_capped(site: Site) -> None:
    site.hits.clear()
    url = site.url("/loop", host="localhost")
    assert refused(url, "localhost", max_redirects=3) == "web fetch exceeded 3 redirects"
    assert site.hits == ["/loop"] * 4


def test_only_textual_successful_answers_are_read(site: Site) -> None:
    assert refused(site.url("/png", host="localhost"), "localhost") == (
        "web fetch response is not textual content"
    )
    assert refused(site.url("/nothing", host="localhost"), "localhost") == (
        "web fetch returned HTTP 404"
    )


def test_long_text_is_cut_with_a_mark(site: Site) -> None:
    text = fetch(site.url("/big?n=200001", host="localhost"), "localhost")
    assert text == "a" * 200_000 + TRUNCATED


# ------------------------------------------------------------------------------ the tool


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FOYA_WEB_FETCH_ALLOW_HOSTS", "localhost")
        with inprocess_kernel(tmp_path_factory.mktemp("webfetch") / "d") as running:
            yield running


def run_fetch(rig: InProcess, session: dict[str, Any], *urls: str) -> None:
    calls = [call(f"f{n}", "web_fetch", {"url": url}) for n, url in enumerate(urls)]
    rig.fake.push(session["model"], tools(*calls), answer("Read."))
    rig.run(rig.kernel.turns.submit(session["id"], TurnInput(message="read")))


def test_the_tool_reads_an_allowed_page_and_refuses_a_private_one(
    rig: InProcess, site: Site
) -> None:
    session = new_session(rig, "full_access")
    with watch(rig, session["id"]) as w:
        run_fetch(rig, session, site.url("/page", host="localhost"), site.url("/page"))
        w.until(k.TURN_COMPLETE)
    allowed, private = w.tool_messages()
    assert not allowed.get("is_error")
    assert allowed["content"].startswith("# Title\n\nRead [the docs](http://localhost:")
    assert private["is_error"]
    assert private["content"] == "web fetch failed: 127.0.0.1 is a private or reserved address"
    schema = next(
        t for t in rig.kernel.turns.tool_runner.schemas() if t["function"]["name"] == "web_fetch"
    )
    assert schema["function"]["parameters"]["required"] == ["url"]


def test_the_tool_asks_for_network_approval(rig: InProcess, site: Site) -> None:
    session = new_session(rig, "manual")
    url = site.url("/whoami", host="localhost")
    with watch(rig, session["id"]) as w:
        run_fetch(rig, session, url, url)
        asked = w.until(k.APPROVAL_REQUEST).payload
        assert (asked["tool_name"], asked["action"]) == ("web_fetch", "network")
        assert asked["scope"] == "internet"
        assert asked["detail"] == f"Read web page: {url}"
        assert asked["resource"] == url
        rig.kernel.approvals.decide(session["id"], asked["id"], "denied")
        asked = w.until(k.APPROVAL_REQUEST).payload
        rig.kernel.approvals.decide(session["id"], asked["id"], "approved")
        w.until(k.TURN_COMPLETE)
    denied, fetched = w.tool_messages()
    assert denied["is_error"] and denied["content"] == "user denied web fetch"
    assert fetched["content"] == "server A"


def test_an_unsafe_url_is_refused_before_asking(rig: InProcess) -> None:
    session = new_session(rig, "manual")
    with watch(rig, session["id"]) as w:
        run_fetch(rig, session, "file:///etc/passwd", "http://169.254.169.254/latest/")
        w.until(k.TURN_COMPLETE)
    assert k.APPROVAL_REQUEST not in w.kinds()
    bad_scheme, metadata = w.tool_messages()
    assert bad_scheme["content"] == "invalid or unsafe URL"
    assert metadata["content"] == (
        "web fetch failed: 169.254.169.254 is a private or reserved address"
    )
