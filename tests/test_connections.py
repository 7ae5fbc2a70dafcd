"""Connections, model lists and default models, and the API key's
secrecy: it is write-only and must never leave the kernel except towards the provider.

One kernel and one fake provider for the module; each test creates the connections it needs.
"""

from __future__ import annotations

import json
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    API_KEY,
    Agent,
    Session,
    agent_kernel,
    answer,
    connect,
    http_error,
    only,
    payloads,
)
from support.helpers import Launcher, free_port
from support.streams_helpers import assert_error, unix_kernel

CONNECTION_KEYS = {
    "id",
    "name",
    "type",
    "kind",
    "auth_kind",
    "base_url",
    "has_api_key",
    "models",
    "models_cached",
    "sort_order",
    "model_settings",
}
"""A language connection's keys; a video one also has `video_protocol` (test_body_policy.py)."""
PURPOSES = {"language", "fast", "image", "video"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("connections")) as agent:
        yield agent


@pytest.fixture
def client(agent: Agent) -> httpx.Client:
    return agent.client


def listed(client: httpx.Client) -> dict[str, dict[str, Any]]:
    response = client.get("/connections")
    assert response.status_code == 200, response.text
    return {c["id"]: c for c in response.json()}


def session_of(client: httpx.Client, session_id: str) -> dict[str, Any]:
    return next(s for s in client.get("/sessions").json() if s["id"] == session_id)


# ------------------------------------------------------------------------------------- CRUD


def test_create_returns_201_without_the_key(agent: Agent, client: httpx.Client) -> None:
    body = {
        "name": "Mine",
        "type": "language",
        "kind": "openai",
        "auth_kind": "api_key",
        "base_url": agent.fake.base_url,
        "api_key": API_KEY,
        "models": ["fake-large"],
        "model_settings": {"fake-large": {"context_window": 128000, "tool_calling": True}},
    }
    response = client.post("/connections", json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    assert set(created) == CONNECTION_KEYS
    assert created["has_api_key"] is True
    assert API_KEY not in response.text
    assert created["name"] == "Mine" and created["kind"] == "openai"
    assert created["models"] == ["fake-large"]
    assert created["model_settings"]["fake-large"]["context_window"] == 128000
    assert listed(client)[created["id"]] == created


def test_get_never_returns_the_key(agent: Agent, client: httpx.Client) -> None:
    with_key = connect(client, agent.fake)
    without = connect(client, agent.fake, api_key="")
    response = client.get("/connections")
    assert all("api_key" not in c for c in response.json())
    assert API_KEY not in response.text
    everything = listed(client)
    assert everything[with_key["id"]]["has_api_key"] is True
    assert everything[without["id"]]["has_api_key"] is False
    assert all(set(c) == CONNECTION_KEYS for c in everything.values())


@pytest.mark.parametrize("auth_kind", ["oauth_subscription", "bearer", ""])
def test_other_auth_kinds_are_unsupported(client: httpx.Client, auth_kind: str) -> None:
    before = listed(client)
    body = {"name": "x", "auth_kind": auth_kind, "api_key": "k"}
    assert_error(client.post("/connections", json=body), 400, "unsupported_auth_kind")
    assert listed(client) == before


def test_create_errors(client: httpx.Client) -> None:
    assert_error(client.post("/connections", json={"type": "audio"}), 400, "bad_request")
    # Unknown fields are ignored (Foya's handler decodes leniently): tests/test_body_policy.py.
    assert_error(client.post("/connections", json={"models": "x"}), 400, "bad_request")


def test_patch_updates_fields_and_the_key_is_used_next(agent: Agent, client: httpx.Client) -> None:
    created = connect(client, agent.fake)
    new_key = "sk-rotated-" + uuid.uuid4().hex
    response = client.patch(
        f"/connections/{created['id']}",
        json={"name": "Renamed", "api_key": new_key, "models": ["a", "b"]},
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["name"] == "Renamed" and patched["models"] == ["a", "b"]
    assert patched["has_api_key"] is True and new_key not in response.text
    assert patched["base_url"] == created["base_url"], "fields not sent are kept"
    assert listed(client)[created["id"]] == patched

    s = Session(
        agent,
        client.post("/sessions", json={"connection_id": created["id"], "model": "rot"}).json(),
    )
    s.turn(answer("Rotated."))
    assert s.chats()[-1].headers["authorization"] == f"Bearer {new_key}"

    assert_error(
        client.patch(f"/connections/{created['id']}", json={"auth_kind": "oauth_subscription"}),
        400,
        "unsupported_auth_kind",
    )
    assert_error(client.patch("/connections/nope", json={"name": "x"}), 404, "connection_not_found")


def test_delete_detaches_sessions_but_keeps_their_model(agent: Agent, client: httpx.Client) -> None:
    created = connect(client, agent.fake)
    session = client.post(
        "/sessions", json={"connection_id": created["id"], "model": "kept-model"}
    ).json()
    bystander = agent.session()
    response = client.delete(f"/connections/{created['id']}")
    assert response.status_code == 204 and response.content == b""
    assert created["id"] not in listed(client)
    after = session_of(client, session["id"])
    assert after["connection_id"] == "" and after["model"] == "kept-model"
    assert session_of(client, bystander.id)["connection_id"] == agent.connection_id
    assert_error(client.delete(f"/connections/{created['id']}"), 404, "connection_not_found")


# ------------------------------------------------------------------------------------- models


def test_models_refresh_asks_the_provider_and_keeps_the_selection(
    agent: Agent, client: httpx.Client
) -> None:
    created = connect(client, agent.fake, models=["old"])
    stored = client.get(f"/connections/{created['id']}/models")
    assert stored.status_code == 200 and stored.json() == {"models": ["old"]}

    agent.fake.models = ["zeta", "alpha"]
    try:
        before = len([r for r in agent.fake.requests if r.path.endswith("/models")])
        response = client.get(f"/connections/{created['id']}/models", params={"refresh": "true"})
        assert response.status_code == 200, response.text
        assert response.json()["models"] == ["alpha", "zeta"]
        asked = [r for r in agent.fake.requests if r.path.endswith("/models")][before:]
        assert [r.headers["authorization"] for r in asked] == [f"Bearer {API_KEY}"]
    finally:
        agent.fake.models = ["fake-large", "fake-small"]
    # The desktop refreshes after every save: the catalog must not replace the user's pick.
    assert listed(client)[created["id"]]["models"] == ["old"]


def test_models_lists_context_windows(agent: Agent, client: httpx.Client) -> None:
    settings = {"big": {"context_window": 200000}, "small": {"image_input": False}}
    created = connect(client, agent.fake, models=["big", "small"], model_settings=settings)
    response = client.get(f"/connections/{created['id']}/models")
    assert response.json() == {"models": ["big", "small"], "context_windows": {"big": 200000}}


def test_a_failing_provider_is_502_models_failed(agent: Agent, client: httpx.Client) -> None:
    created = connect(client, agent.fake)
    agent.fake.models_error = 500
    try:
        response = client.get(f"/connections/{created['id']}/models", params={"refresh": "true"})
    finally:
        agent.fake.models_error = None
    body = assert_error(response, 502, "models_failed")
    assert API_KEY not in response.text, body


def test_an_unreachable_provider_is_502_models_failed(client: httpx.Client) -> None:
    body = {"name": "gone", "base_url": f"http://127.0.0.1:{free_port()}/v1", "api_key": API_KEY}
    created = client.post("/connections", json=body).json()
    response = client.get(f"/connections/{created['id']}/models", params={"refresh": "true"})
    assert_error(response, 502, "models_failed")
    assert API_KEY not in response.text


def test_models_of_an_unknown_connection_is_404(client: httpx.Client) -> None:
    assert_error(client.get("/connections/nope/models"), 404, "connection_not_found")


# ------------------------------------------------------------------------------------ storage


def test_connections_file_is_private_and_holds_the_key(agent: Agent, client: httpx.Client) -> None:
    created = connect(client, agent.fake)
    path = agent.data_dir / "connections.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = {c["id"]: c for c in json.loads(path.read_text())}
    assert saved[created["id"]]["api_key"] == API_KEY


# ----------------------------------------------------------------------------- default models


def test_default_models_get_put_and_new_sessions_use_the_language_default(
    agent: Agent, client: httpx.Client
) -> None:
    response = client.get("/settings/default-models")
    assert response.status_code == 200, response.text
    assert set(response.json()) == PURPOSES

    chosen = connect(client, agent.fake, name="default", models=["first", "second"])
    body = {
        "language": {"connection_id": chosen["id"], "model": "second"},
        "fast": {"connection_id": chosen["id"], "model": "first"},
    }
    response = client.put("/settings/default-models", json=body)
    assert response.status_code == 200, response.text
    saved = response.json()
    assert saved["language"] == {"connection_id": chosen["id"], "model": "second"}
    assert saved["fast"] == {"connection_id": chosen["id"], "model": "first"}
    assert client.get("/settings/default-models").json() == saved

    session = client.post("/sessions", json={}).json()
    assert session["connection_id"] == chosen["id"] and session["model"] == "second"
    explicit = client.post("/sessions", json={"connection_id": agent.connection_id}).json()
    assert explicit["connection_id"] == agent.connection_id

    # Deleting the connection clears the defaults that name it.
    assert client.delete(f"/connections/{chosen['id']}").status_code == 204
    cleared = client.get("/settings/default-models").json()
    assert cleared["language"].get("connection_id", "") == ""


def test_default_models_errors(client: httpx.Client) -> None:
    unknown = {"language": {"connection_id": "nope", "model": "m"}}
    response = client.put("/settings/default-models", json=unknown)
    assert response.status_code in (400, 404), response.text
    assert response.json()["code"] == "connection_not_found"
    bad = {"language": {"connection_id": "", "model": "m", "extra": 1}}
    assert_error(client.put("/settings/default-models", json=bad), 400, "bad_request")


# ----------------------------------------------------------------------------- key secrecy


def test_the_key_never_leaves_the_kernel(agent: Agent, client: httpx.Client) -> None:
    """Everything a client or an operator can see — responses, events, error messages, the
    metrics, the kernel's own stdout/stderr — after operations that handle the key, including
    provider failures whose bodies echo it."""
    seen: list[str] = []

    def keep(response: httpx.Response) -> httpx.Response:
        seen.append(response.text)
        return response

    created = keep(
        client.post("/connections", json={"base_url": agent.fake.base_url, "api_key": API_KEY})
    )
    cid = created.json()["id"]
    keep(client.patch(f"/connections/{cid}", json={"name": "renamed", "api_key": API_KEY}))
    keep(client.get("/connections"))
    keep(client.get(f"/connections/{cid}/models", params={"refresh": "true"}))
    agent.fake.models_error = 401
    try:
        keep(client.get(f"/connections/{cid}/models", params={"refresh": "true"}))
    finally:
        agent.fake.models_error = None
    keep(client.post("/connections", json={"api_key": API_KEY, "bogus": API_KEY}))
    keep(client.post("/connections", json={"api_key": API_KEY, "auth_kind": API_KEY}))
    keep(client.post("/connections", json={"api_key": [API_KEY]}))

    body = {"connection_id": cid, "model": f"m-{uuid.uuid4().hex[:12]}"}
    s = Session(agent, keep(client.post("/sessions", json=body)).json())
    frames = s.turn(http_error(401, f"Incorrect API key provided: {API_KEY}", "invalid_api_key"))
    assert only(frames, "turn_complete")["status"] == "failed"
    assert payloads(frames, "error")
    frames += s.turn(http_error(500, f"internal error for key {API_KEY}"))
    frames += s.turn(answer("Fine."))
    seen.extend(json.dumps(f.data) for f in frames)
    keep(client.get(f"/sessions/{s.id}/history"))
    keep(client.get("/sessions"))
    keep(client.get("/metrics"))
    assert all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in s.chats())

    leaks = [text[:200] for text in seen if API_KEY in text]
    assert not leaks, leaks
    kernel = agent.served.kernel
    assert API_KEY not in kernel.stdout(), "the key is in the kernel's stdout"
    assert API_KEY not in kernel.stderr(), "the key is in the kernel's stderr"


@pytest.mark.parametrize("field", ["name", "models", "sort_order", "base_url"])
def test_patch_with_null_never_breaks_the_connection(
    agent: Agent, client: httpx.Client, field: str
) -> None:
    """A JSON null in a PATCH must not store a value the connection shape cannot hold: the
    PATCH is refused (400) or ignores it, and GET /connections keeps working."""
    created = connect(client, agent.fake, name="nullable", models=["m1"])
    response = client.patch(f"/connections/{created['id']}", json={field: None})
    try:
        assert response.status_code in (200, 400), response.text
        after = client.get("/connections")
        assert after.status_code == 200, after.text
    finally:
        # Remove what a failure left behind so the module's other tests keep working.
        client.delete(f"/connections/{created['id']}")


# ------------------------------------------------------------------- conformance


@pytest.mark.parametrize("field", ["sort_order", "name", "type", "base_url", "api_key", "models"])
def test_create_with_null_is_201_and_stores_nothing_bad(client: httpx.Client, field: str) -> None:
    """`null` means "not given" (it was a 500 for sort_order, and stored for the others, after
    which every GET /connections answered 500)."""
    response = client.post("/connections", json={"name": "nulls", field: None})
    assert response.status_code == 201, response.text
    created = response.json()
    try:
        assert set(created) == CONNECTION_KEYS
        assert all(created[k] is not None for k in CONNECTION_KEYS)
        assert listed(client)[created["id"]] == created
    finally:
        client.delete(f"/connections/{created['id']}")


@pytest.mark.parametrize(
    "fields",
    [
        {"base_url": "nonsense"},
        {"base_url": "not a url"},
        {"base_url": "ftp://127.0.0.1/v1"},
        {"base_url": "http://ü.example/v1"},
        {"base_url": "http://127.0.0.1:99999/v1"},
        {"base_url": "http:///v1"},
        {"base_url": "http://user:pw@127.0.0.1/v1"},
        {"base_url": "http://127.0.0.1/ v1"},
        {"api_key": "sk-é"},
        {"api_key": "sk-\nInjected: header"},
        {"model_settings": {"m": {"context_window": 10, "max_output_tokens": 11}}},
        {"model_settings": {"m": {"context_window": -1}}},
        {"model_settings": {"m": {"context_window": 2**63}}},
        {"sort_order": 2**63},
        {"kind": "anthropic"},
    ],
)
def test_invalid_fields_are_400_on_create_and_patch(
    agent: Agent, client: httpx.Client, fields: dict[str, Any]
) -> None:
    before = listed(client)
    assert_error(client.post("/connections", json={"name": "bad", **fields}), 400, "bad_request")
    created = connect(client, agent.fake, name="patch-target")
    try:
        response = client.patch(f"/connections/{created['id']}", json=fields)
        assert_error(response, 400, "bad_request")
        assert listed(client)[created["id"]] == created
    finally:
        client.delete(f"/connections/{created['id']}")
    assert listed(client) == before


@pytest.mark.parametrize(
    ("base_url", "says"),
    [
        ("not a url", "must be an http:// or https:// URL with a host"),
        ("http://127.0.0.1/ v1", "must not contain spaces"),
        ("http://ü.example/v1", "printable ASCII"),
    ],
)
def test_a_bad_base_url_is_refused_saying_what_a_good_one_looks_like(
    client: httpx.Client, base_url: str, says: str
) -> None:
    body = assert_error(
        client.post("/connections", json={"base_url": base_url}), 400, "bad_request"
    )
    assert body["message"].startswith("base_url: ") and says in body["message"], body


@pytest.mark.parametrize(
    "query", ["refresh=false&=null", "refresh=false&x=%C3%A9t%C3%A9", "=&refresh=true&%E2%82%AC=1"]
)
def test_models_with_odd_queries_never_500(agent: Agent, client: httpx.Client, query: str) -> None:
    """Empty names and non-ASCII in the query string of GET …/models (they were 500s)."""
    created = connect(client, agent.fake, models=[])
    try:
        response = client.get(f"/connections/{created['id']}/models?{query}")
        assert response.status_code == 200, response.text
        assert response.json()["models"] == sorted(agent.fake.models)
    finally:
        client.delete(f"/connections/{created['id']}")


def test_sort_order_is_a_position_and_the_first_language_one_is_the_default(
    agent: Agent, client: httpx.Client
) -> None:
    """Positions are 0..n-1 over all connections; creating or PATCHing with a sort_order moves
    the connection there; with no language default set, a new session gets the first language
    connection in that order (Foya: SetConnections / UpdateConnection)."""
    assert client.put("/settings/default-models", json={}).status_code == 200
    made = []
    try:
        image = client.post("/connections", json={"name": "img", "type": "image", "sort_order": 0})
        assert image.status_code == 201, image.text
        made.append(image.json()["id"])
        first = connect(client, agent.fake, name="first-lang", models=["m-first"], sort_order=1)
        made.append(first["id"])
        last = connect(client, agent.fake, name="last-lang", models=["m-last"])
        made.append(last["id"])

        ordered = client.get("/connections").json()
        assert [c["sort_order"] for c in ordered] == list(range(len(ordered)))
        ids = [c["id"] for c in ordered]
        assert ids[:2] == [made[0], first["id"]] and ids[-1] == last["id"]
        session = client.post("/sessions", json={}).json()
        assert (session["connection_id"], session["model"]) == (first["id"], "m-first")

        moved = client.patch(f"/connections/{last['id']}", json={"sort_order": -5})
        assert moved.status_code == 200 and moved.json()["sort_order"] == 0
        ordered = client.get("/connections").json()
        assert [c["id"] for c in ordered][:3] == [last["id"], made[0], first["id"]]
        assert [c["sort_order"] for c in ordered] == list(range(len(ordered)))
        session = client.post("/sessions", json={}).json()
        assert (session["connection_id"], session["model"]) == (last["id"], "m-last")

        # A PATCH without sort_order keeps the position; a huge one moves it to the end.
        client.patch(f"/connections/{last['id']}", json={"name": "renamed"})
        assert client.get("/connections").json()[0]["id"] == last["id"]
        client.patch(f"/connections/{last['id']}", json={"sort_order": 10**6})
        assert client.get("/connections").json()[-1]["id"] == last["id"]
    finally:
        for cid in made:
            client.delete(f"/connections/{cid}")


def test_a_new_base_url_without_a_new_key_drops_the_key(agent: Agent, client: httpx.Client) -> None:
    """The stored key is never sent to a host it was not given for (Foya keeps it)."""
    created = connect(client, agent.fake)
    cid = created["id"]
    path = agent.data_dir / "connections.json"

    def stored_key() -> str:
        return str({c["id"]: c for c in json.loads(path.read_text())}[cid]["api_key"])

    try:
        same = client.patch(f"/connections/{cid}", json={"base_url": created["base_url"]})
        assert same.json()["has_api_key"] is True, "an unchanged base_url keeps the key"
        empty = client.patch(f"/connections/{cid}", json={"api_key": "", "name": ""})
        assert empty.json()["has_api_key"] is True and empty.json()["name"] == created["name"]
        assert stored_key() == API_KEY, '"" keeps the current value (Foya)'

        moved = client.patch(f"/connections/{cid}", json={"base_url": "http://127.0.0.1:9/v1"})
        assert moved.status_code == 200, moved.text
        assert moved.json()["has_api_key"] is False
        assert stored_key() == ""

        back = client.patch(
            f"/connections/{cid}", json={"base_url": agent.fake.base_url, "api_key": API_KEY}
        )
        assert back.json()["has_api_key"] is True and stored_key() == API_KEY
    finally:
        client.delete(f"/connections/{cid}")


def test_bad_records_in_a_hand_edited_file_never_break_the_listing(
    spawn: Launcher, short_dir: Path
) -> None:
    """One bad record must not make GET /connections (or the next write) fail: unusable records
    are skipped with a log line, a lone surrogate is served as U+FFFD, odd types get defaults."""
    data_dir = short_dir / "k"
    data_dir.mkdir(mode=0o700)
    good = {"id": "good", "name": "Good", "type": "language", "base_url": "http://127.0.0.1:9/v1"}
    records = [
        good,
        {"id": "odd", "name": None, "sort_order": None, "models": "x", "model_settings": []},
        {"id": "lone", "name": "\ud800", "type": "language"},
        {"id": "badurl", "base_url": "http://é/v1", "api_key": "k"},
        {"id": "badkey", "api_key": "clé"},
        {"id": "badtype", "type": "audio"},
        {"name": "no id"},
        "not an object",
    ]
    text = json.dumps(records)  # ensure_ascii: the lone surrogate is written as the escape
    assert "\\ud800" in text
    (data_dir / "connections.json").write_text(text)
    served = unix_kernel(spawn, short_dir, "k")
    with served.client() as client:
        response = client.get("/connections")
        assert response.status_code == 200, response.text
        by_id = {c["id"]: c for c in response.json()}
        assert set(by_id) == {"good", "odd", "lone"}
        assert by_id["lone"]["name"] == "\ufffd"
        assert by_id["odd"]["name"] == "odd" and by_id["odd"]["models"] == []
        assert [c["sort_order"] for c in response.json()] == [0, 1, 2]
        created = client.post("/connections", json={"name": "after"})
        assert created.status_code == 201, created.text
        assert client.get("/connections").status_code == 200
    skipped = [line for line in served.kernel.logs() if "skipped" in line.get("event", "")]
    assert len(skipped) == 5, skipped
