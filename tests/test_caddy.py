"""The repository's Caddyfile, run by a real Caddy in front of a real kernel, all on loopback.

The Caddyfile is used unchanged: its variables put the site on a plain-HTTP loopback port
(FOYA_DOMAIN=http://127.0.0.1:PORT, FOYA_BIND=127.0.0.1, the catch-all on the same port), point
it at the kernel (FOYA_UPSTREAM) and turn the admin API off. TLS and HTTP/2 are what Caddy adds
for a real domain; `test_production_address_gets_automatic_https` checks that adapted config.
deploy/Caddyfile.local, the loopback/LAN variant, is run with real TLS from Caddy's local CA: it
never installs that CA into the system trust store, so it is safe to run here as root.

Timing: the SSE latency test compares arrival times of the same frames on two subscriptions
opened side by side, one through Caddy and one straight to the kernel, and bounds the median
difference (the issue's 200 ms); it is a functional bound, not a benchmark.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import FakeProvider, answer, connect, wait
from support.helpers import (
    REPO,
    STOP_DEADLINE,
    UNAUTHORIZED,
    Kernel,
    Launcher,
    base_env,
    free_ports,
    is_listening,
    sha256_hex,
    wait_until,
)
from support.streams_helpers import EventStream, Frame

CADDYFILE = REPO / "Caddyfile"
LOCAL_CADDYFILE = REPO / "deploy" / "Caddyfile.local"
SSE_BOUND = 0.2  # seconds: the bound on Caddy's added delay for an SSE frame
TURNS = 5
WAIT = 20.0  # upper bound on any wait here, only to never hang


def caddy_binary() -> str:
    found = shutil.which("caddy")
    assert found, "caddy is missing: install the `caddy` package (.ci/run does)"
    return found


def caddy_env(home: Path, **variables: str) -> dict[str, str]:
    """This environment without FOYA_*/CADDY_*, Caddy's storage under `home`, plus `variables`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FOYA_", "CADDY_"))}
    env.update(
        HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config")
    )
    env.update(variables)
    return env


def loopback_site(port: int, upstream: str) -> dict[str, str]:
    """The variables that serve the Caddyfile's site on 127.0.0.1:`port`, plain HTTP."""
    return {
        "FOYA_DOMAIN": f"http://127.0.0.1:{port}",
        "FOYA_BIND": "127.0.0.1",
        "FOYA_OTHER_HOSTS": f"http://:{port}",
        "FOYA_UPSTREAM": upstream,
        "CADDY_ADMIN": "off",
    }


class Caddy:
    """`caddy run` on the repository's Caddyfile (or `config` with `variables`); stopped by PID."""

    def __init__(
        self,
        workdir: Path,
        port: int,
        upstream: str,
        config: Path = CADDYFILE,
        variables: dict[str, str] | None = None,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = workdir / "caddy.log"
        if variables is None:
            variables = loopback_site(port, upstream)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [caddy_binary(), "run", "--config", str(config), "--adapter", "caddyfile"],
                cwd=workdir,
                env=caddy_env(workdir, **variables),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def wait_listening(self) -> Caddy:
        def up() -> bool:
            assert self.proc.poll() is None, f"caddy exited: {self.log.read_text()}"
            return is_listening(self.port)

        wait_until(up, "caddy to listen", WAIT)
        return self

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Stack:
    kernel: Kernel
    caddy: Caddy
    token: str
    fake: FakeProvider

    def client(self, url: str, token: str | None = None, **headers: str) -> httpx.Client:
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=url, headers=headers, timeout=WAIT)

    def proxied(self, **headers: str) -> httpx.Client:
        return self.client(self.caddy.url, self.token, **headers)

    def direct(self) -> httpx.Client:
        assert self.kernel.url
        return self.client(self.kernel.url, self.token)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, token: str) -> Iterator[Stack]:
    """Kernel (TCP plaintext, token digest in a file) with Caddy in front, both on loopback."""
    base = tmp_path_factory.mktemp("caddy")
    digest_file = base / "auth-token.sha256"
    digest_file.write_text(sha256_hex(token) + "\n")
    kernel_port, caddy_port = free_ports(2)
    launch = Launcher(base / "procs")
    caddy: Caddy | None = None
    try:
        with FakeProvider.running() as fake:
            args = ["--allow-plaintext", "--data-dir", str(base / "data")]
            kernel = launch.tcp(
                [*args, "--auth-token-hash-file", str(digest_file)],
                port=kernel_port,
                env=base_env(),
            )
            caddy = Caddy(base / "caddy", caddy_port, f"127.0.0.1:{kernel_port}").wait_listening()
            yield Stack(kernel, caddy, token, fake)
    finally:
        # Kernel first: it ends its event streams, which lets Caddy finish the proxied ones.
        # Caddy 2.6 notices a client that hung up on a stream only at the next write, and it
        # waits for open streams (up to the Caddyfile's grace_period) before it exits.
        launch.close()
        if caddy is not None:
            caddy.stop()


# -------------------------------------------------------------------------- configuration


def adapt(
    home: Path, config: Path = CADDYFILE, **variables: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [caddy_binary(), "adapt", "--config", str(config), "--adapter", "caddyfile"],
        env=caddy_env(home, **variables),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def handlers(route: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for handler in route.get("handle", []):
        yield handler
        for sub in handler.get("routes", []):
            yield from handlers(sub)


def test_production_address_gets_automatic_https(tmp_path: Path) -> None:
    done = adapt(tmp_path, FOYA_DOMAIN="foya.example.com")
    assert done.returncode == 0 and not done.stderr.strip(), done  # no unformatted warning
    config = json.loads(done.stdout)
    assert config["admin"] == {"listen": "localhost:2019"}
    assert config["apps"]["http"]["grace_period"] == 10 * 10**9
    (server,) = config["apps"]["http"]["servers"].values()
    # Every interface, port 443 (port 80 redirects): what a public ACME-issued domain needs.
    assert server["listen"] == [":443"]
    assert "automatic_https" not in server, "automatic HTTPS must stay on for a real domain"
    site, other = server["routes"]
    assert site["match"] == [{"host": ["foya.example.com"]}]
    assert "match" not in other, "the catch-all follows the site"
    by_kind = {h["handler"]: h for h in handlers(site)}
    proxy = by_kind["reverse_proxy"]
    assert proxy["upstreams"] == [{"dial": "127.0.0.1:8787"}]
    assert proxy["flush_interval"] == -1
    headers = by_kind["headers"]["response"]
    assert headers["deferred"] is True and headers["delete"] == ["Server"]
    assert headers["set"]["Strict-Transport-Security"] == ["max-age=31536000"]
    # encode matches the response type: event streams are not in its list.
    types = by_kind["encode"]["match"]["headers"]["Content-Type"]
    assert "application/json*" in types
    assert not any(t.startswith(("text/event-stream", "text/*", "*")) for t in types), types
    assert {h["handler"] for h in handlers(other)} == {"subroute", "static_response"}

    # A LAN-only host binds where it is told.
    bound = json.loads(
        adapt(tmp_path, FOYA_DOMAIN="foya.example.com", FOYA_BIND="192.0.2.7").stdout
    )
    (server,) = bound["apps"]["http"]["servers"].values()
    assert server["listen"] == ["192.0.2.7:443"]


def test_a_missing_domain_is_refused_with_a_message_naming_it(tmp_path: Path) -> None:
    done = adapt(tmp_path)
    assert done.returncode != 0
    assert "(FOYA_DOMAIN:is-not-set)" in done.stderr, done.stderr


def site_handlers(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The handlers of the first site (the kernel's), in order."""
    (server,) = config["apps"]["http"]["servers"].values()
    return [h for h in handlers(server["routes"][0]) if h["handler"] != "subroute"]


def test_local_caddyfile_is_the_same_site_on_loopback_with_its_own_ca(tmp_path: Path) -> None:
    done = adapt(tmp_path, LOCAL_CADDYFILE)
    assert done.returncode == 0 and not done.stderr.strip(), done  # no unformatted warning
    local = json.loads(done.stdout)
    production = json.loads(adapt(tmp_path, FOYA_DOMAIN="foya.example.com").stdout)
    # The site itself (headers, encode, proxy) cannot drift from the production Caddyfile's.
    assert site_handlers(local) == site_handlers(production)
    assert local["admin"] == {"disabled": True}
    assert local["apps"]["http"]["grace_period"] == 10 * 10**9
    (server,) = local["apps"]["http"]["servers"].values()
    # Loopback, an unprivileged port, no HTTP listener, and no change to the system trust store.
    assert server["listen"] == ["127.0.0.1:8443"]
    assert server["automatic_https"] == {"disable_redirects": True}
    assert local["apps"]["pki"]["certificate_authorities"]["local"]["install_trust"] is False
    site, other = server["routes"]
    assert site["match"] == [{"host": ["localhost"]}]
    assert "match" not in other
    policies = local["apps"]["tls"]["automation"]["policies"]
    assert {"subjects": ["localhost"], "issuers": [{"module": "internal"}]} in policies
    # A LAN name and address, the same way.
    lan = adapt(tmp_path, LOCAL_CADDYFILE, FOYA_DOMAIN="foya.lan", FOYA_BIND="192.0.2.7")
    (server,) = json.loads(lan.stdout)["apps"]["http"]["servers"].values()
    assert server["listen"] == ["192.0.2.7:8443"]
    assert server["routes"][0]["match"] == [{"host": ["foya.lan"]}]
    policies = json.loads(lan.stdout)["apps"]["tls"]["automation"]["policies"]
    assert {"subjects": ["foya.lan"], "issuers": [{"module": "internal"}]} in policies


def local_ca_root(home: Path) -> Path:
    """The root certificate of Caddy's local CA, under `caddy_env(home)`'s XDG_DATA_HOME."""
    return home / "data" / "caddy" / "pki" / "authorities" / "local" / "root.crt"


def handshake(port: int, server_name: str | None) -> None:
    """A TLS handshake with Caddy on 127.0.0.1:`port`, verifying nothing (only Caddy's answer)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw,
        context.wrap_socket(raw, server_hostname=server_name),
    ):
        pass


def handshake_works(port: int, server_name: str) -> bool:
    try:
        handshake(port, server_name)
    except (OSError, ssl.SSLError):
        return False
    return True


def test_local_caddyfile_serves_the_kernel_over_tls_on_loopback(
    stack: Stack, tmp_path: Path
) -> None:
    """deploy/Caddyfile.local as the README runs it: only the port and upstream differ here."""
    (port,) = free_ports(1)
    home = tmp_path / "caddy"
    upstream = f"127.0.0.1:{stack.kernel.port}"
    variables = {"FOYA_PORT": str(port), "FOYA_UPSTREAM": upstream}
    caddy = Caddy(home, port, upstream, LOCAL_CADDYFILE, variables)
    try:
        caddy.wait_listening()
        # The site's certificate is issued once Caddy listens: wait for a handshake that works.
        wait_until(lambda: handshake_works(port, "localhost"), "caddy's certificate", WAIT)
        trusted = ssl.create_default_context(cafile=str(local_ca_root(home)))
        auth = {"Authorization": f"Bearer {stack.token}"}
        url = f"https://localhost:{port}"
        with httpx.Client(base_url=url, verify=trusted, headers=auth, timeout=WAIT) as client:
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.headers["strict-transport-security"] == "max-age=31536000"
            # The TLS name matches, the Host does not: the catch-all answers 421.
            other = client.get("/readyz", headers={"Host": f"other.example:{port}"})
            assert other.status_code == 421, other.text
        # A TLS name Caddy has no certificate for (none at all, for an IP address): no handshake.
        for name in (None, "other.example"):
            with pytest.raises(ssl.SSLError):
                handshake(port, name)
        # disable_redirects: nothing on port 80 (no HTTP listener, no root needed).
        assert caddy.proc.poll() is None
        assert listeners(80) == [], "Caddy listens on port 80"
    finally:
        caddy.stop()


# ------------------------------------------------------------------------------------ REST


def listeners(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of the sockets listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():  # no IPv6 in this kernel
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, _, hexport = local.rpartition(":")
            if state == "0A" and int(hexport, 16) == port:
                found.append(address)
    return found


def test_caddy_listens_on_loopback_only(stack: Stack) -> None:
    """FOYA_BIND=127.0.0.1: without `bind`, Caddy would listen on every interface."""
    assert listeners(stack.caddy.port) == ["0100007F"]  # 127.0.0.1, and no [::] socket


def test_rest_goes_through_with_the_bearer_token(stack: Stack) -> None:
    with stack.proxied() as client:
        listed = client.get("/sessions", headers={"X-Request-Id": "through-caddy-1"})
        assert listed.status_code == 200, listed.text
        assert isinstance(listed.json(), list)
        # The kernel saw Caddy's request with our headers (Authorization, X-Request-Id).
        assert listed.headers["x-request-id"] == "through-caddy-1"
        created = client.post("/sessions", json={})
        assert created.status_code == 200, created.text
        assert created.json()["id"] in {s["id"] for s in client.get("/sessions").json()}
    with stack.client(stack.caddy.url) as anonymous:
        health = anonymous.get("/healthz")
        assert (health.status_code, health.text) == (200, "ok")
        denied = anonymous.get("/sessions")
        assert denied.status_code == 401
        assert denied.headers["www-authenticate"] == 'Bearer realm="foya"'
        assert denied.json() == UNAUTHORIZED


def test_security_headers_are_set_once_and_server_is_removed(stack: Stack) -> None:
    with stack.proxied() as client:
        for response in (client.get("/sessions"), client.get("/healthz")):
            headers = response.headers
            assert headers.get_list("strict-transport-security") == ["max-age=31536000"]
            # The kernel sends these too: Caddy must replace, not duplicate, them.
            assert headers.get_list("x-content-type-options") == ["nosniff"]
            assert headers.get_list("referrer-policy") == ["no-referrer"]
            assert "server" not in headers, headers


def test_the_web_client_loads_through_caddy_without_a_token(stack: Stack) -> None:
    """The page is served without the token (it asks for it), with its own strict CSP kept,
    compressed once (the kernel's gzip, not Caddy's again); the API behind it still needs it."""
    with stack.client(stack.caddy.url, **{"Accept-Encoding": "gzip"}) as anonymous:
        assert anonymous.get("/").headers["location"] == "/ui/"
        page = anonymous.get("/ui/")
        assert page.status_code == 200 and 'type="module"' in page.text
        assert page.headers.get_list("content-encoding") == ["gzip"]
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert page.headers.get_list("x-frame-options") == ["DENY"]
        assert anonymous.get("/sessions").status_code == 401


def test_json_is_compressed_and_event_streams_are_not(stack: Stack) -> None:
    """encode is on for ordinary responses, off for SSE. (Caddy 2.6 decides on the first write,
    and a stream's first write is the kernel's 6-byte `: ok`, below encode's 512-byte minimum,
    so even an unrestricted encode leaves these streams alone here; the Caddyfile's list of
    response types makes that independent of both, see test_production_address_...)"""
    with stack.proxied(**{"Accept-Encoding": "gzip"}) as client:
        with client.stream("GET", "/openapi.json") as response:
            raw = b"".join(response.iter_raw())
        assert response.headers["content-encoding"] == "gzip", response.headers
        assert "paths" in json.loads(gzip.decompress(raw))
        session = client.post("/sessions", json={}).json()["id"]
    # A browser-like client asking for every encoding Caddy offers, and one not announcing SSE.
    for accept in ("text/event-stream", "*/*"):
        with (
            stack.proxied(**{"Accept-Encoding": "gzip, zstd", "Accept": accept}) as client,
            client.stream("GET", f"/sessions/{session}/events") as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            assert "content-encoding" not in response.headers, response.headers
            first = next(response.iter_raw())
            assert first.startswith(b": ok"), first


def test_an_unknown_host_never_reaches_the_kernel(stack: Stack) -> None:
    """Through `ssh -L` the Host is localhost:<port>: Caddy must refuse it (421), not answer an
    empty 200 a readiness probe would believe, and the kernel must never see it."""
    stray, marker = f"stray-{uuid.uuid4().hex}", f"marker-{uuid.uuid4().hex}"
    with stack.proxied() as client:
        refused = client.get(
            "/readyz",
            headers={"Host": f"localhost:{stack.caddy.port}", "X-Request-Id": stray},
        )
        assert refused.status_code == 421, (refused.status_code, refused.text)
        assert client.get("/readyz", headers={"X-Request-Id": marker}).status_code == 200

    def logged(request_id: str) -> bool:
        return any(line.get("request_id") == request_id for line in stack.kernel.logs())

    wait_until(lambda: logged(marker), "the kernel to log the request that went through", WAIT)
    assert not logged(stray)


# ------------------------------------------------------------------------------------- SSE


class Subscription:
    """One SSE response read on its own thread, keeping (arrival time, frame) of every event,
    until `last` frames of kind `until` have arrived; then it hangs up by itself."""

    def __init__(self, client: httpx.Client, path: str, until: str, last: int) -> None:
        self.client, self.path, self.until, self.last = client, path, until, last
        self.frames: list[tuple[float, Frame]] = []
        self.headers: httpx.Headers | None = None
        self.opened = threading.Event()
        self.changed = threading.Condition()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        assert self.opened.wait(WAIT) and self.headers is not None, self.error

    def _read(self) -> None:
        seen = 0
        try:
            with self.client, self.client.stream("GET", self.path) as response:
                self.headers = response.headers
                self.opened.set()
                stream = EventStream(response)
                while (frame := stream.next_frame()) is not None:
                    with self.changed:
                        self.frames.append((time.monotonic(), frame))
                        self.changed.notify_all()
                    seen += frame.event == self.until
                    if seen == self.last:
                        return
        except httpx.HTTPError as exc:
            self.error = exc
        finally:
            self.opened.set()
            with self.changed:
                self.changed.notify_all()

    def wait_for(self, count: int) -> list[tuple[float, Frame]]:
        with self.changed:
            got = self.changed.wait_for(lambda: len(self.frames) >= count, WAIT)
            assert got, f"{len(self.frames)} frames, want {count}; {self.error}"
            return list(self.frames)

    def index_of(self, kind: str, start: int) -> int:
        """The index of the first frame of `kind` at or after index `start`, once it arrived."""

        def found() -> int | None:
            kinds = [f.event for _, f in self.frames[start:]]
            return start + kinds.index(kind) if kind in kinds else None

        with self.changed:
            assert self.changed.wait_for(lambda: found() is not None, WAIT), self.error
            index = found()
        assert index is not None
        return index


def test_first_event_of_a_turn_arrives_through_caddy_within_200_ms(stack: Stack) -> None:
    with stack.direct() as client:
        connection = connect(client, stack.fake)
        model = f"m-{uuid.uuid4().hex[:12]}"
        body = {"connection_id": connection["id"], "model": model, "approval_mode": "full_access"}
        session = client.post("/sessions", json=body).json()["id"]
        client.patch(f"/sessions/{session}", json={"title": "latency"})  # no title request
    path = f"/sessions/{session}/events"
    direct = Subscription(stack.direct(), path, "turn_complete", TURNS)
    # Like a browser's EventSource: every encoding on offer, no special Accept header.
    browser = stack.proxied(**{"Accept-Encoding": "gzip, deflate, zstd"})
    proxied = Subscription(browser, path, "turn_complete", TURNS)
    assert proxied.headers is not None and "content-encoding" not in proxied.headers
    delays: list[float] = []
    firsts: set[str] = set()
    with stack.proxied() as client:
        for turn in range(TURNS):
            # The provider holds the answer back until both streams got the first frame, so
            # nothing behind that frame can push it out of a buffer.
            gate = stack.fake.gate()
            stack.fake.push(model, [wait(gate), *answer(f"Answer {turn}")])
            start_direct, start_proxied = len(direct.frames), len(proxied.frames)
            submitted = client.post(f"/sessions/{session}/turns", json={"message": "hi"})
            assert submitted.status_code == 200, submitted.text
            at_direct, first_direct = direct.wait_for(start_direct + 1)[start_direct]
            at_proxied, first_proxied = proxied.wait_for(start_proxied + 1)[start_proxied]
            assert first_proxied.lines == first_direct.lines
            firsts.add(first_direct.event or "")
            delays.append(at_proxied - at_direct)
            gate.set()
            end_direct = direct.index_of("turn_complete", start_direct)
            end_proxied = proxied.index_of("turn_complete", start_proxied)
            # The rest of the turn (deltas included) arrives in full and in order too.
            assert [f.lines for _, f in direct.frames[start_direct : end_direct + 1]] == [
                f.lines for _, f in proxied.frames[start_proxied : end_proxied + 1]
            ]
    direct.thread.join(WAIT)
    proxied.thread.join(WAIT)
    shown = ", ".join(f"{d * 1000:.1f}" for d in delays)
    print(f"\nCaddy's added delay for the first SSE frame ({firsts}) of each turn, ms: {shown}")
    assert statistics.median(delays) < SSE_BOUND, f"delays (ms): {shown}"


# ------------------------------------------------------------------------------- uploads


class RawUpstream:
    """A one-request HTTP/1.1 server on a raw socket, recording exactly what Caddy forwards."""

    def __init__(self, first: bytes, last: bytes) -> None:
        self.first, self.last = first, last
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.head = b""
        self.first_seen = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(WAIT)
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(WAIT)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.head, _, body = data.partition(b"\r\n\r\n")
            while self.last not in body:
                if self.first in body:
                    self.first_seen.set()
                chunk = conn.recv(65536)
                if not chunk:
                    break
                body += chunk
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")

    def headers(self) -> dict[str, str]:
        lines = self.head.decode().split("\r\n")[1:]
        return {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}

    def close(self) -> None:
        self.sock.close()
        self.thread.join(WAIT)


def test_uploads_stream_through_with_authorization(tmp_path: Path) -> None:
    """Caddy forwards a request body as it arrives (no buffering of uploads) and the
    Authorization header untouched: the second half is sent only once the upstream has the
    first, which could not happen if Caddy waited for the whole body."""
    first, last = b"first-half-" * 20, b"-second-half"
    upstream = RawUpstream(first, last)
    (port,) = free_ports(1)
    caddy = Caddy(tmp_path / "caddy", port, f"127.0.0.1:{upstream.port}").wait_listening()
    streamed: list[bool] = []

    def body() -> Iterator[bytes]:
        yield first
        streamed.append(upstream.first_seen.wait(WAIT / 4))
        yield last

    try:
        bearer = "Bearer " + "t" * 43
        response = httpx.post(
            f"{caddy.url}/sessions/x/artifacts",
            content=body(),
            headers={"Authorization": bearer},
            timeout=WAIT,
        )
        assert (response.status_code, response.text) == (200, "ok")
    finally:
        caddy.stop()
        upstream.close()
    assert streamed == [True], "Caddy held the first half of the body back"
    headers = upstream.headers()
    assert headers["authorization"] == bearer
    assert headers["transfer-encoding"] == "chunked"
    assert headers["x-forwarded-proto"] == "http"
