"""`POST /connections/discover-models`: the models a provider lists, asked with
a connection's `base_url` and `api_key` (or a saved connection's key), without saving anything;
through a real `foya serve` against the fake provider's `/v1/models`. Keys never come back.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.fake_provider import API_KEY, Agent, agent_kernel
from support.streams_helpers import assert_error

OTHER_KEY = "sk-other-" + "7" * 24


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("discover")) as running:
        yield running


def discover(agent: Agent, **body: object) -> httpx.Response:
    return agent.client.post("/connections/discover-models", json=body)


def models_requests(agent: Agent) -> list[str]:
    """The Authorization header of each models request the fake received."""
    return [
        r.headers.get("authorization", "")
        for r in agent.fake.requests
        if r.path.endswith("/models")
    ]


def test_an_unsaved_connection_lists_its_models_and_nothing_is_saved(agent: Agent) -> None:
    before = agent.client.get("/connections").json()
    seen = len(models_requests(agent))
    answer = discover(agent, name="new", base_url=agent.fake.base_url, api_key=OTHER_KEY)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"models": ["fake-large", "fake-small"]}
    assert models_requests(agent)[seen:] == [f"Bearer {OTHER_KEY}"]
    assert agent.client.get("/connections").json() == before
    assert OTHER_KEY not in answer.text


def test_a_saved_connection_lends_its_key_for_its_own_base_url(agent: Agent) -> None:
    saved = next(
        c for c in agent.client.get("/connections").json() if c["id"] == agent.connection_id
    )
    seen = len(models_requests(agent))
    # What a Foya client read back (with has_api_key, sort_order, …) is accepted as it is.
    answer = discover(agent, **saved)
    assert answer.status_code == 200, answer.text
    assert API_KEY not in answer.text
    assert discover(agent, id=agent.connection_id).status_code == 200
    elsewhere = agent.fake.base_url.replace("127.0.0.1", "localhost")
    assert discover(agent, id=agent.connection_id, base_url=elsewhere).status_code == 200
    assert models_requests(agent)[seen:] == [f"Bearer {API_KEY}"] * 2 + ["Bearer none"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"id": "nope"}, 404, "connection_not_found"),
        ({"base_url": "ftp://example.com"}, 400, "bad_request"),
        ({"base_url": "http://u:p@example.com/v1"}, 400, "bad_request"),
        ({"auth_kind": "oauth_subscription"}, 400, "unsupported_auth_kind"),
        ({"type": "audio"}, 400, "bad_request"),
        ({"api_key": "é"}, 400, "bad_request"),
        ({"models_cached": [True]}, 400, "bad_request"),
    ],
)
def test_bad_requests(agent: Agent, body: dict[str, object], status: int, code: str) -> None:
    seen = len(models_requests(agent))
    assert_error(discover(agent, **body), status, code)
    assert len(models_requests(agent)) == seen


@pytest.mark.parametrize("status", [401, 500])
def test_a_failing_provider_is_a_502_without_the_key(agent: Agent, status: int) -> None:
    agent.fake.models_error = status
    try:
        answer = discover(agent, base_url=agent.fake.base_url, api_key=OTHER_KEY)
    finally:
        agent.fake.models_error = None
    body = assert_error(answer, 502, "models_failed")
    assert f"127.0.0.1:{agent.fake.port}" in body["message"]
    assert OTHER_KEY not in answer.text
    assert OTHER_KEY not in agent.served.kernel.stdout() + agent.served.kernel.stderr()
