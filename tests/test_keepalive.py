"""Refusals and keep-alive: a request refused before its body is read (401, 413,
415, 400) either leaves its connection usable or says `Connection: close`, over HTTP/1.1
(plaintext, TLS) and HTTP/2 (TLS with ALPN `h2`, h2c prior knowledge on plaintext).

Through two real `foya serve --listen` processes (plaintext and TLS). The root cause
(app.serve.hypercorn_fixes `RequestBodyDrain`): hypercorn closed an HTTP/1.1 connection whose
refused
request's body it had not parsed yet, after an answer that promised keep-alive. The raw-socket
tests make that order certain (the body follows the head only once the server had time to answer
without it); the httpx tests send 100 requests on one client each, as a client would.
"""

from __future__ import annotations

import io
import itertools
import select
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from PIL import Image
from support.helpers import UNAUTHORIZED, Kernel, Launcher, TlsFiles, base_env

REQUESTS = 100  # per test: the reproduction of the broken keep-alive failed within a few dozen
# An 8 MiB body costs the client about 0.1 s of CPU (and the server about as much to drain it):
# 60 of them on one HTTP/1.1 connection are still well past "a few dozen". HTTP/2 has no
# keep-alive state to break (each stream ends on its own): fewer there.
OVERSIZED = 60
H2_OVERSIZED = 10
CAP = 8 * 1024 * 1024  # app.http.guard MAX_BODY_BYTES
EARLY_ANSWER_WAIT = 0.05  # seconds the raw client gives the server to answer before the body
WRONG = {"Authorization": "Bearer " + "w" * 43}
JSON = {"content-type": "application/json"}
# (client options, the HTTP version every answer must come in)
MODES = {
    "http1-plain": ("plain", {}, "HTTP/1.1"),
    "http1-tls": ("tls", {}, "HTTP/1.1"),
    "h2-tls": ("tls", {"http2": True}, "HTTP/2"),
    "h2c-plain": ("plain", {"http2": True, "http1": False}, "HTTP/2"),
}


@dataclass(frozen=True)
class Kernels:
    plain: Kernel
    tls: Kernel
    token: str


@pytest.fixture(scope="module")
def kernels(
    tmp_path_factory: pytest.TempPathFactory, digest: str, token: str, tls_files: TlsFiles
) -> Iterator[Kernels]:
    base = tmp_path_factory.mktemp("keepalive")
    launch = Launcher(base / "procs")
    env = base_env(FOYA_AUTH_TOKEN_SHA256=digest)
    try:
        plain = launch.tcp(["--allow-plaintext", "--data-dir", str(base / "plain")], env=env)
        tls = launch.tcp(
            ["--data-dir", str(base / "tls"), "--tls-cert", str(tls_files.cert),
             "--tls-key", str(tls_files.key)],
            tls=tls_files, env=env,
        )  # fmt: skip
        yield Kernels(plain, tls, token)
    finally:
        launch.close()


def client(kernels: Kernels, mode: str, token: str | None) -> tuple[httpx.Client, str]:
    which, options, version = MODES[mode]
    kernel = kernels.plain if which == "plain" else kernels.tls
    return kernel.client(token, **options), version


def chunks(total: int, size: int = 256 * 1024) -> Iterator[bytes]:
    """A body httpx sends chunked (no length known beforehand)."""
    for start in range(0, total, size):
        yield b" " * min(size, total - start)


def check(response: httpx.Response, version: str, status: int, code: str) -> None:
    assert response.http_version == version
    assert response.status_code == status, response.text
    assert response.json()["code"] == code


# ------------------------------------------------------------------------------ 200 on one client


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", list(MODES))
def test_401s_on_one_client(kernels: Kernels, mode: str) -> None:
    """Unauthenticated POSTs with JSON bodies of every kind: small, larger than one read, chunked,
    and over the drain bound (answered `Connection: close` on HTTP/1.1); then a real request."""
    http, version = client(kernels, mode, None)
    with http:
        for i in range(REQUESTS):
            kind = i % 4
            if kind == 0:
                r = http.post("/sessions", json={"title": f"t{i}"})
            elif kind == 1:
                r = http.post("/sessions", json={"title": "x" * 300_000})
            elif kind == 2:
                r = http.post("/sessions", content=chunks(100_000), headers=JSON)
            else:
                r = http.post("/sessions", content=b" " * (3 << 20), headers=JSON)
            check(r, version, 401, "unauthorized")
            assert r.json() == UNAUTHORIZED
            close = r.headers.get("connection") == "close"
            if version == "HTTP/2":
                assert not close, r.headers  # no such header in HTTP/2
            elif kind == 3:
                assert close, (i, r.headers)  # 3 MiB: past the drain bound
        r = http.post("/sessions", json={}, headers={"Authorization": f"Bearer {kernels.token}"})
        assert r.status_code == 200


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", list(MODES))
def test_413s_on_one_client(kernels: Kernels, mode: str) -> None:
    """Bodies over the 8 MiB cap: a declared Content-Length over it (refused before a byte is
    read) and a chunked body that grows over it mid-stream (refused once past it)."""
    http, version = client(kernels, mode, kernels.token)
    over = b" " * (CAP + 1)
    with http:
        for i in range(OVERSIZED if version == "HTTP/1.1" else H2_OVERSIZED):
            if i % 2:
                r = http.post("/sessions", content=over, headers=JSON)
            else:
                r = http.post("/sessions", content=chunks(CAP + (1 << 20), 1 << 20), headers=JSON)
            check(r, version, 413, "payload_too_large")
        assert http.get("/sessions").status_code == 200


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", list(MODES))
def test_415s_on_one_client(kernels: Kernels, mode: str) -> None:
    """Uploads the kernel refuses for their content: bytes that are no image (415), and a body
    that is not multipart at all (400, refused on its Content-Type before it is read)."""
    http, version = client(kernels, mode, kernels.token)
    with http:
        sid = http.post("/sessions", json={}).json()["id"]
        url = f"/sessions/{sid}/artifacts"
        for i in range(REQUESTS):
            if i % 2:
                files = {"file": ("notes.png", b"not an image " * 100, "image/png")}
                check(http.post(url, files=files), version, 415, "unsupported_image")
            else:
                r = http.post(url, content=b"x" * 200_000, headers={"content-type": "image/png"})
                check(r, version, 400, "bad_request")
        png = io.BytesIO()
        Image.new("RGB", (4, 4), "red").save(png, "PNG")
        stored = http.post(url, files={"file": ("red.png", png.getvalue(), "image/png")})
        assert stored.status_code == 201, stored.text


# ----------------------------------------------------------- the root cause, in a certain order


class Conn:
    """One raw HTTP/1.1 connection: what a client sees byte by byte."""

    def __init__(self, kernel: Kernel) -> None:
        assert kernel.port is not None
        raw = socket.create_connection(("127.0.0.1", kernel.port), timeout=30)
        if kernel.tls is not None:
            raw = kernel.tls.client_context().wrap_socket(raw, server_hostname="127.0.0.1")
        self.sock = raw
        self.buffer = b""

    def answered(self, wait: float) -> bool:
        """Whether anything (an answer, or the end of the connection) came within `wait` s."""
        if self.buffer or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            return True
        return bool(select.select([self.sock], [], [], wait)[0])

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:])
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), headers, body

    def closed_by_server(self) -> bool:
        try:
            self._fill()
        except (ConnectionError, OSError):
            return True
        return False

    def close(self) -> None:
        self.sock.close()


def head(path: str, length: int, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: foya", "Content-Type: application/json",
             f"Content-Length: {length}", *extra]  # fmt: skip
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("which", ["plain", "tls"])
def test_body_after_the_head_keeps_the_connection(kernels: Kernels, which: str) -> None:
    """The head first; the body only once the server had time to answer the head alone. Every
    answer without `Connection: close` must leave the connection usable: the next request on it
    is answered. Before the fix the 401 came at once and the connection was closed after it."""
    kernel = kernels.plain if which == "plain" else kernels.tls
    auth = f"Authorization: Bearer {kernels.token}"
    body = b'{"title":"late body"}'
    cases = itertools.islice(
        itertools.cycle(
            [
                (head("/sessions", len(body)), body, 401),
                (head("/sessions", CAP + 1, auth), b" " * (CAP + 1), 413),
            ]
        ),
        20,
    )
    conn = Conn(kernel)
    try:
        for request_head, request_body, status in cases:
            conn.sock.sendall(request_head)
            conn.answered(EARLY_ANSWER_WAIT)
            conn.sock.sendall(request_body)
            got, headers, _ = conn.response()
            assert got == status
            if headers.get("connection") == "close":
                assert status == 413  # over the drain bound; a small body keeps the connection
                assert conn.closed_by_server()
                conn.close()
                conn = Conn(kernel)
        conn.sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: foya\r\n\r\n")
        assert conn.response()[0] == 200
    finally:
        conn.close()


@pytest.mark.timeout(60)
def test_refused_body_is_not_parsed_as_the_next_request(kernels: Kernels) -> None:
    """A refused body that looks like a request is discarded with its request, not answered:
    the connection's next answer is the next request's own."""
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: foya\r\n\r\n"
    conn = Conn(kernels.plain)
    try:
        for _ in range(10):
            conn.sock.sendall(head("/sessions", len(smuggled)))
            conn.answered(EARLY_ANSWER_WAIT)
            conn.sock.sendall(smuggled)
            status, headers, body = conn.response()
            assert (status, headers.get("connection")) == (401, None)
            assert b"unauthorized" in body
        conn.sock.sendall(b"GET /nowhere HTTP/1.1\r\nHost: foya\r\n\r\n")
        assert conn.response()[0] == 401  # not the smuggled /healthz's 200
        assert not conn.answered(EARLY_ANSWER_WAIT)  # and nothing else is pending
    finally:
        conn.close()
