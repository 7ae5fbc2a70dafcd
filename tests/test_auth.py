"""Bearer auth over TCP: only exact `GET /healthz` (and `HEAD /healthz`, the same
probe without a body) is open, everything else needs a token whose SHA-256 matches the
configured digest."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
from support.helpers import (
    SECURITY_HEADERS,
    TOKEN_31,
    TOKEN_32,
    UNAUTHORIZED,
    Fleet,
    Kernel,
    app_endpoints,
    concrete_path,
)

# `GET /` is the web client's redirect to `/ui/` (tests/test_ui_static.py): only its other
# methods are here.
UNKNOWN_PATHS = ["/nope", "/healthz/", "/HEALTHZ", "/healthz/extra", "/readyz/x", "/uix"]


def concrete_endpoints(tmp_path: Path, digest: str) -> list[tuple[str, str]]:
    """(method, path) for every route of the app, path parameters replaced by "x"."""
    return sorted({(m, concrete_path(p)) for m, p in app_endpoints(tmp_path / "routes", digest)})


def assert_security_headers(response: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code, response.url)


def assert_unauthorized(response: httpx.Response, *, head: bool = False) -> None:
    assert response.status_code == 401, (response.request.method, response.url, response.text)
    assert response.headers["www-authenticate"] == 'Bearer realm="foya"'
    assert_security_headers(response)
    if not head:
        assert response.json() == UNAUTHORIZED


def test_route_enumeration_sees_the_system_routes(tmp_path: Path, digest: str) -> None:
    endpoints = concrete_endpoints(tmp_path, digest)
    for expected in [("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")]:
        assert expected in endpoints


def test_every_route_needs_a_token_except_the_healthz_probe(
    tcp_kernel: Kernel, tmp_path: Path, token: str, digest: str
) -> None:
    endpoints = concrete_endpoints(tmp_path, digest)
    checked = 0
    with tcp_kernel.client() as anonymous, tcp_kernel.client(token) as authed:
        for method, path in endpoints:
            response = anonymous.request(method, path)
            if (method, path) == ("GET", "/healthz"):
                assert response.status_code == 200
                assert response.text == "ok"
                assert_security_headers(response)
            elif (method, path) == ("HEAD", "/healthz"):
                assert response.status_code == 200
                assert_security_headers(response)
            else:
                assert_unauthorized(response, head=method == "HEAD")
                checked += 1
            # and the same request with the token gets past auth (an event stream stays open:
            # its status is enough)
            with authed.stream(method, path) as passed:
                assert passed.status_code != 401, (method, path)
    assert checked >= 2  # /readyz and /metrics at least


@pytest.mark.parametrize("path", UNKNOWN_PATHS)
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_unknown_paths_need_a_token(tcp_kernel: Kernel, method: str, path: str) -> None:
    with tcp_kernel.client() as client:
        assert_unauthorized(client.request(method, path))


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_only_the_healthz_probe_is_exempt(tcp_kernel: Kernel, method: str) -> None:
    with tcp_kernel.client() as client:
        assert_unauthorized(client.request(method, "/healthz"))
        assert_unauthorized(client.request(method, "/"))
        assert_unauthorized(client.request(method, "/ui/"))


def test_head_healthz_is_open_and_200(tcp_kernel: Kernel) -> None:
    """The probe without a body: no token needed, 200, no body (it was 401)."""
    with tcp_kernel.client() as client:
        response = client.head("/healthz")
    assert response.status_code == 200, response.headers
    assert response.content == b""
    assert_security_headers(response)


def test_healthz_with_a_token_is_200(tcp_kernel: Kernel, token: str) -> None:
    with tcp_kernel.client(token) as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.text == "ok"
    assert_security_headers(response)


def test_valid_token_is_accepted(tcp_kernel: Kernel, token: str) -> None:
    with tcp_kernel.client(token) as client:
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["status"] == "ready"
    assert_security_headers(response)


def test_lowercase_bearer_scheme_is_accepted(tcp_kernel: Kernel, token: str) -> None:
    with tcp_kernel.client() as client:
        response = client.get("/readyz", headers={"Authorization": f"bearer {token}"})
        assert response.status_code == 200
        response = client.get("/readyz", headers={"Authorization": f"BEARER {token}"})
        assert response.status_code == 200


def bad_authorizations(token: str) -> dict[str, str]:
    basic = base64.b64encode(f"user:{token}".encode()).decode()
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    return {
        "wrong_token": "Bearer " + "w" * 43,
        "one_char_changed": f"Bearer {flipped}",
        "token_with_suffix": f"Bearer {token}x",
        "basic_scheme": f"Basic {basic}",
        "token_without_scheme": token,
        "scheme_without_token": "Bearer",
        "two_spaces": f"Bearer  {token}",  # split at the first space: the token gains a space
        "other_scheme_same_token": f"Token {token}",
        "empty": "",
    }


@pytest.mark.parametrize(
    "case",
    [
        "wrong_token",
        "one_char_changed",
        "token_with_suffix",
        "basic_scheme",
        "token_without_scheme",
        "scheme_without_token",
        "two_spaces",
        "other_scheme_same_token",
        "empty",
    ],
)
def test_bad_authorization_is_401(tcp_kernel: Kernel, token: str, case: str) -> None:
    value = bad_authorizations(token)[case]
    with tcp_kernel.client() as client:
        assert_unauthorized(client.get("/readyz", headers={"Authorization": value}))


def test_token_length_rule(fleet: Fleet) -> None:
    """A 31-char token is refused even though its digest is the configured one; 32 chars pass."""
    with fleet.ready("token31").client(TOKEN_31) as client:
        assert_unauthorized(client.get("/readyz"))
    with fleet.ready("token32").client(TOKEN_32) as client:
        assert client.get("/readyz").status_code == 200
        assert client.get("/metrics").status_code == 200
    with fleet.ready("token32").client(TOKEN_32[:-1]) as client:
        assert_unauthorized(client.get("/readyz"))


def test_every_response_kind_carries_security_headers(tcp_kernel: Kernel, token: str) -> None:
    with tcp_kernel.client() as anonymous, tcp_kernel.client(token) as authed:
        responses = {
            200: authed.get("/readyz"),
            401: anonymous.get("/readyz"),
            404: authed.get("/does-not-exist"),
            405: authed.post("/healthz"),
        }
    for status, response in responses.items():
        assert response.status_code == status
        assert_security_headers(response)
