"""Bad requests are answered in the client's terms: 400 `bad_request` with a
sentence saying what is wrong with the body, a field or a parameter, never echoing a value, and
nothing is changed. One real kernel on a Unix socket for the module.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.helpers import short_tmpdir
from support.streams_helpers import Served, assert_error, module_kernels

JSON = {"content-type": "application/json"}
NOT_JSON = "request body must be JSON (Content-Type: application/json)"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with short_tmpdir() as root, module_kernels(tmp_path_factory.mktemp("e"), root, "k") as ks:
        yield ks["k"]


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as client:
        yield client


@pytest.fixture(scope="module")
def session(client: httpx.Client) -> str:
    response = client.post("/sessions", json={})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


CASES = [
    # (id, method, path, body bytes, headers, message)
    ("truncated_json", "POST", "/sessions", b'{"model":', JSON,
     "request body is not valid JSON: expecting value at line 1 column 10"),
    ("json_error_on_line_2", "POST", "/sessions", b'{"model": "m",\n  title}', JSON,
     "request body is not valid JSON: expecting property name enclosed in double quotes "
     "at line 2 column 3"),
    ("trailing_garbage", "POST", "/sessions", b'{"model": "m"} x', JSON,
     "request body is not valid JSON: extra data at line 1 column 16"),
    ("not_utf8", "POST", "/sessions", b'{"model": "\xff"}', JSON,
     "request body is not valid JSON: it is not UTF-8 text"),
    ("no_content_type", "POST", "/sessions", b'{"model": "m"}', {}, NOT_JSON),
    ("text_plain", "POST", "/sessions", b'{"model": "m"}', {"content-type": "text/plain"},
     NOT_JSON),
    ("array_body", "POST", "/sessions", b'["m"]', JSON, "request body must be a JSON object"),
    ("missing_body", "POST", "/projects", b"", JSON, "request body is required (JSON)"),
    ("string_field", "POST", "/sessions", b'{"model": 1234567}', JSON,
     "field `model`: must be a string"),
    ("unknown_field", "POST", "/sessions", b'{"workspace": "/tmp"}', JSON,
     "unknown field `workspace`"),
    ("required_field", "POST", "/projects", b"{}", JSON, "field `path`: is required"),
    ("list_item", "POST", "/connections", b'{"models": ["a", 7]}', JSON,
     "field `models[1]`: must be a string"),
    ("integer_field", "POST", "/connections", b'{"sort_order": "first"}', JSON,
     "field `sort_order`: must be an integer"),
    ("nested_bound", "POST", "/connections",
     b'{"model_settings": {"m": {"context_window": -5}}}', JSON,
     "field `model_settings.m.context_window`: must be 0 or greater"),
    ("literal_field", "POST", "/connections", b'{"type": "audio"}', JSON,
     "field `type`: must be one of 'language', 'image' or 'video'"),
    ("boolean_field", "POST", "/sessions/{session}/turns/1/rewind", b'{"confirm": "yes"}', JSON,
     "field `confirm`: must be true or false"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_a_bad_body_is_400_saying_what_is_wrong(
    client: httpx.Client,
    session: str,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    message: str,
) -> None:
    before = (client.get("/sessions").json(), client.get("/connections").json())
    response = client.request(method, path.format(session=session), content=body, headers=headers)
    assert assert_error(response, 400, "bad_request")["message"] == message
    assert "1234567" not in response.text, "a value is never echoed"
    assert (client.get("/sessions").json(), client.get("/connections").json()) == before


def test_a_bad_query_parameter_is_named(client: httpx.Client, session: str) -> None:
    response = client.get(f"/sessions/{session}/events", params={"after": "latest"})
    body = assert_error(response, 400, "bad_request")
    assert body["message"] == "query parameter `after`: must be an integer"
