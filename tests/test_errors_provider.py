"""Provider failures say what went wrong: the provider's host, the HTTP status
when there is one, and the cause; never the key. The turn's `error` event carries that text, and
the kernel logs a warning (logger `foya.providers`) with the same facts.

One real kernel (Unix socket) and the fake OpenAI-compatible provider for the module; a closed
port stands in for a provider that cannot be reached.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import (
    API_KEY,
    Agent,
    Session,
    agent_kernel,
    connect,
    garbage,
    http_error,
    only,
    payloads,
    text,
)
from support.helpers import free_port, wait_until
from support.streams_helpers import assert_error


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("provider-errors")) as agent:
        yield agent


def fake_host(agent: Agent) -> str:
    return f"127.0.0.1:{agent.fake.port}"


def failed_turn(s: Session, *scripts: Any) -> str:
    """Run a turn that fails; its one `error` event's text (the turn ends `failed`)."""
    frames = s.turn(*scripts)
    (error,) = payloads(frames, "error")
    assert only(frames, "turn_complete")["status"] == "failed"
    assert API_KEY not in json.dumps([f.data for f in frames])
    return str(error)


def warnings_about(agent: Agent, host: str, count: int) -> list[dict[str, Any]]:
    """The kernel's `foya.providers` warnings naming `host`, once there are `count` of them."""

    def found() -> list[dict[str, Any]]:
        return [
            line
            for line in agent.served.kernel.logs()
            if line.get("logger") == "foya.providers" and line.get("host") == host
        ]

    wait_until(lambda: len(found()) >= count, f"{count} provider warning(s) for {host}")
    lines = found()
    assert all(line["level"] == "warning" for line in lines), lines
    assert API_KEY not in agent.served.kernel.stdout()
    return lines


def test_an_unreachable_provider_names_its_host_and_the_cause(agent: Agent) -> None:
    port = free_port()  # nothing listens there: the connection is refused
    host = f"127.0.0.1:{port}"
    closed = connect(agent.client, agent.fake, name="closed", base_url=f"http://{host}/v1")
    response = agent.client.post("/sessions", json={"connection_id": closed["id"], "model": "m"})
    assert response.status_code == 200, response.text
    error = failed_turn(Session(agent, response.json()))
    assert error == f"cannot reach the provider at {host}: connection refused"
    (line,) = warnings_about(agent, host, 1)
    assert line["cause"] == "connection refused"
    assert line["status"] is None
    assert line["error"] == error


def test_an_http_error_names_the_host_the_status_and_the_providers_words(agent: Agent) -> None:
    s = agent.session()
    host = fake_host(agent)
    before = len(warnings_about(agent, host, 0))
    words = f"The model `{s.model}` does not exist"
    error = failed_turn(s, http_error(404, words))
    assert error == f"the provider at {host} answered HTTP 404: {words}"
    line = warnings_about(agent, host, before + 1)[-1]
    assert line["status"] == 404
    assert line["error"] == error


def test_the_providers_words_never_carry_the_key(agent: Agent) -> None:
    s = agent.session()
    error = failed_turn(s, http_error(500, f"upstream refused key {API_KEY}"))
    host = fake_host(agent)
    assert error == f"the provider at {host} answered HTTP 500: upstream refused key [redacted]"


def test_an_error_in_the_middle_of_a_stream_names_the_host(agent: Agent) -> None:
    s = agent.session()
    chunk = json.dumps({"error": {"message": f"overloaded ({API_KEY})"}})
    error = failed_turn(s, [text("partial "), garbage(f"data: {chunk}\n\n")])
    host = fake_host(agent)
    assert error == f"the provider at {host} reported an error mid-stream: overloaded ([redacted])"


def test_a_rejected_key_names_the_host_and_the_status(agent: Agent) -> None:
    s = agent.session()
    error = failed_turn(s, http_error(401, f"Incorrect API key provided: {API_KEY}"))
    assert error == f"the provider at {fake_host(agent)} rejected the API key (HTTP 401)"


def test_a_model_list_from_an_unreachable_provider_says_why(agent: Agent) -> None:
    host = f"127.0.0.1:{free_port()}"
    closed = connect(agent.client, agent.fake, name="closed-models", base_url=f"http://{host}/v1")
    response = agent.client.get(f"/connections/{closed['id']}/models", params={"refresh": "true"})
    body = assert_error(response, 502, "models_failed")
    assert body["message"] == f"cannot reach the provider at {host}: connection refused"
    assert API_KEY not in response.text
    warnings_about(agent, host, 1)
