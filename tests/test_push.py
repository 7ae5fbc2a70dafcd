"""Web Push through a real `foya serve` and a push service on loopback.

The kernel keeps its VAPID key and the subscriptions in its data directory (mode 0600), and
sends what waits for the user (an approval, a question) and a finished turn, encrypted to each
subscribed browser: the fake browser here decrypts every message as a real one would, and the
VAPID token is checked against the key the kernel publishes. The push service is allow-listed
(FOYA_WEB_FETCH_ALLOW_HOSTS) because it is on loopback; any other private address is refused.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from py_vapid import Vapid02  # type: ignore[import-untyped]
from support.fake_provider import (
    Agent,
    FakeProvider,
    agent_kernel,
    answer,
    call,
    connect,
    reply,
    tools,
)
from support.fake_push import FakeBrowser, FakePushService, Message, b64url, unb64url
from support.helpers import Launcher, base_env
from support.streams_helpers import assert_error, unix_kernel


@pytest.fixture(scope="module")
def service() -> Iterator[FakePushService]:
    with FakePushService.running() as service:
        yield service


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory, service: FakePushService) -> Iterator[Agent]:
    env = base_env(
        FOYA_WEB_FETCH_ALLOW_HOSTS="127.0.0.1", FOYA_PUSH_CONTACT="mailto:me@home.example"
    )
    with agent_kernel(tmp_path_factory.mktemp("push"), env=env) as agent:
        yield agent


def subscribe(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/push/subscriptions", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def unsubscribe_all(client: httpx.Client) -> None:
    for sub in client.get("/push").json()["subscriptions"]:
        assert client.delete(f"/push/subscriptions/{sub['id']}").status_code == 204


def claims(message: Message) -> dict[str, Any]:
    token = message.headers["authorization"].split(" ", 1)[1].split(",")[0].removeprefix("t=")
    return dict(json.loads(unb64url(token.split(".")[1])))


def test_subscriptions_are_kept_private_and_validated(
    agent: Agent, service: FakePushService
) -> None:
    client = agent.client
    first = client.get("/push").json()
    key = unb64url(first["public_key"])
    assert len(key) == 65 and key[0] == 4, "an uncompressed P-256 point"
    assert first["subscriptions"] == []
    pem = agent.data_dir / "push-vapid.pem"
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    assert client.get("/push").json()["public_key"] == first["public_key"], "one key, kept"

    browser = FakeBrowser()
    body = browser.subscription(service.endpoint("private"), label="  My   phone ")
    made = subscribe(client, body)
    assert set(made) == {"id", "label", "origin", "created_at"}
    assert made["label"] == "My phone" and made["origin"] == service.origin
    stored = agent.data_dir / "push-subscriptions.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    listed = client.get("/push").text
    assert body["keys"]["auth"] not in listed and "/push/private" not in listed
    renewed = subscribe(client, FakeBrowser().subscription(service.endpoint("private")))
    assert renewed["id"] == made["id"], "the same endpoint again renews its keys"
    assert len(client.get("/push").json()["subscriptions"]) == 1

    good = browser.subscription(service.endpoint("x"))
    for bad, field in (
        ({**good, "endpoint": "http://10.0.0.1/x"}, "endpoint"),
        ({**good, "endpoint": "ftp://push.example/x"}, "endpoint"),
        ({**good, "endpoint": "https://u:p@push.example/x"}, "endpoint"),
        ({**good, "keys": {**good["keys"], "p256dh": b64url(b"\x04" + b"1" * 10)}}, "p256dh"),
        ({**good, "keys": {**good["keys"], "p256dh": b64url(b"\x02" + b"1" * 64)}}, "p256dh"),
        ({**good, "keys": {**good["keys"], "auth": "***"}}, "auth"),
    ):
        error = assert_error(client.post("/push/subscriptions", json=bad), 400, "bad_request")
        assert field in error["message"], error
    assert_error(client.post("/push/subscriptions", json={"endpoint": "x"}), 400, "bad_request")
    assert len(client.get("/push").json()["subscriptions"]) == 1, "nothing bad was kept"
    assert_error(client.delete("/push/subscriptions/nope"), 404, "push_subscription_not_found")
    assert client.delete(f"/push/subscriptions/{made['id']}").status_code == 204
    assert client.get("/push").json()["subscriptions"] == []
    for n in range(32):
        subscribe(client, browser.subscription(service.endpoint(f"many{n}")))
    full = client.post("/push/subscriptions", json=browser.subscription(service.endpoint("33")))
    assert_error(full, 409, "push_subscriptions_full")
    unsubscribe_all(client)


def test_an_approval_and_the_finished_turn_reach_the_browser(
    agent: Agent, service: FakePushService
) -> None:
    client = agent.client
    browser = FakeBrowser()
    subscribe(client, browser.subscription(service.endpoint("phone"), label="phone"))
    public_key = client.get("/push").json()["public_key"]
    s = agent.session("manual", title="Deploy")
    s.push(tools(call("w", "write", {"path": "out.txt", "content": "ok\n"})), answer("Written."))
    try:
        with s.events() as events:
            s.submit()
            request = events.until_kind("approval_request")[-1].data["payload"]
            (message,) = service.wait("phone", 1)
            notice = browser.open(message.body)
            assert notice == {
                "title": "Deploy: approval needed",
                "body": f"write wants to write: {request['resource']}",
                "tag": f"approval-{request['id']}",
                "hash": f"#/s/{s.id}",
            }
            assert message.headers["content-encoding"] == "aes128gcm"
            assert message.headers["urgency"] == "high"
            assert int(message.headers["ttl"]) > 0
            assert Vapid02.verify(message.headers["authorization"])
            assert message.headers["authorization"].endswith(f"k={public_key}")
            token = claims(message)
            assert token["aud"] == service.origin and token["sub"] == "mailto:me@home.example"
            assert time.time() < token["exp"] <= time.time() + 24 * 3600
            decided = client.post(
                f"/sessions/{s.id}/approvals/{request['id']}", json={"decision": "approved"}
            )
            assert decided.status_code == 204, decided.text
            events.until_kind("turn_complete")
        done = browser.open(service.wait("phone", 2)[1].body)
        assert done == {
            "title": "Deploy",
            "body": "The reply is ready",
            "tag": f"turn-{s.id}",
            "hash": f"#/s/{s.id}",
        }
    finally:
        unsubscribe_all(client)


def test_a_question_is_pushed_and_unattended_turns_push_only_their_end(
    agent: Agent, service: FakePushService
) -> None:
    client = agent.client
    browser = FakeBrowser()
    subscribe(client, browser.subscription(service.endpoint("tablet")))
    s = agent.session("full_access", title="Plan")
    ask = {"questions": [{"id": "q1", "question": "Which scope?"}]}
    s.push(tools(call("a", "ask_user", ask)), answer("Thanks."))
    try:
        with s.events() as events:
            s.submit()
            batch = events.until_kind("question_requested")[-1].data["payload"]
            notice = browser.open(service.wait("tablet", 1)[0].body)
            assert notice["title"] == "Plan: question" and notice["body"] == "Which scope?"
            answers = {"answers": [{"question_id": "q1", "value": "all"}]}
            answered = client.post(f"/sessions/{s.id}/questions/{batch['id']}/answer", json=answers)
            assert answered.status_code in (200, 204), answered.text
            events.until_kind("turn_complete")
        assert browser.open(service.wait("tablet", 2)[1].body)["body"] == "The reply is ready"
        s.push(tools(call("w", "write", {"path": "f.txt", "content": "x"})), answer("Done."))
        s.turn()  # full access: nothing waits for the user, only the end is pushed
        assert [browser.open(m.body)["tag"] for m in service.wait("tablet", 3)][2] == f"turn-{s.id}"
        guarded = agent.session("auto", title="Guarded")
        guarded.push_completion(reply("ALLOW"))  # the guardian decides, nobody is asked
        frames = guarded.turn(
            tools(call("g", "write", {"path": "g.txt", "content": "y"})), answer(".")
        )
        assert any(f.event == "approval_request" for f in frames)
        assert browser.open(service.wait("tablet", 4)[3].body)["title"] == "Guarded"
        time.sleep(1.5)  # longer than the kernel's grace for an approval
        assert len(service.to("tablet")) == 4, [browser.open(m.body) for m in service.to("tablet")]
    finally:
        unsubscribe_all(client)


def test_a_dropped_subscription_is_forgotten_and_private_addresses_are_refused(
    agent: Agent, service: FakePushService
) -> None:
    client = agent.client
    service.answers["/push/gone"] = 410
    kept = subscribe(client, FakeBrowser().subscription(service.endpoint("kept")))
    subscribe(client, FakeBrowser().subscription(service.endpoint("gone")))
    port = service.origin.rsplit(":", 1)[1]
    subscribe(client, FakeBrowser().subscription(f"https://127.0.0.2:{port}/push/private"))
    try:
        result = client.post("/push/test")
        assert result.json() == {"delivered": 1, "failed": 2}, result.text
        assert len(service.to("gone")) == 1 and not service.to("private")
        left = {s["origin"] for s in client.get("/push").json()["subscriptions"]}
        assert left == {service.origin, f"https://127.0.0.2:{port}"}, "the 410 one is gone"
        assert kept["id"] in {s["id"] for s in client.get("/push").json()["subscriptions"]}
    finally:
        unsubscribe_all(client)


def test_subscriptions_survive_a_restart_and_push_starts_with_the_kernel(
    spawn: Launcher, short_dir: Path, service: FakePushService
) -> None:
    """A kernel restarted with a subscription on disk pushes without a /push request first."""
    env = base_env(FOYA_WEB_FETCH_ALLOW_HOSTS="127.0.0.1")
    browser = FakeBrowser()
    with FakeProvider.running() as fake:
        first = unix_kernel(spawn, short_dir, "k", env=env)
        with first.client() as client:
            connection = connect(client, fake)["id"]
            subscribe(client, browser.subscription(service.endpoint("restart")))
            key = client.get("/push").json()["public_key"]
        first.kernel.stop()
        again = unix_kernel(spawn, short_dir, "k", env=env)
        with again.client() as client:
            agent = Agent(again, fake, client, connection)
            agent.session("full_access", title="After restart").turn(answer("Back."))
            (message,) = service.wait("restart", 1)
            assert browser.open(message.body)["title"] == "After restart"
            assert client.get("/push").json()["public_key"] == key
