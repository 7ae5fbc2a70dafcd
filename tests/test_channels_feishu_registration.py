"""FeishuRegistrar (the QR "create a bot by scanning" device flow) against the fake accounts
host of tests/support/fake_feishu.py."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support.fake_feishu import FakeFeishu

from app.kernel.channels.errors import RegistrationNotFound
from app.kernel.channels.feishu import FeishuCredentials, FeishuRegistrar, accounts_url_for
from app.kernel.channels.records import ChannelWire
from app.kernel.channels.registration import FeishuRegistrationState, RegistrationInput

CHANNEL: ChannelWire = {
    "id": "ch-1",
    "kind": "feishu",
    "name": "Helper",
    "locale": "zh-CN",
    "enabled": True,
    "app_id": "cli_new",
    "has_app_secret": True,
    "has_token": False,
    "approval_mode": "auto",
    "allowed_users": ["ou_scanner"],
    "allowed_chats": [],
    "allow_all": False,
    "status": "running",
}
PENDING = (400, {"error": "authorization_pending"})
GRANTED = (
    200,
    {
        "client_id": "cli_new",
        "client_secret": "new-app-secret",
        "user_info": {"open_id": "ou_scanner", "tenant_brand": "feishu"},
    },
)


@pytest.fixture
def fake() -> Iterator[FakeFeishu]:
    with FakeFeishu.running() as server:
        server.begin = {
            "device_code": "dc-1",
            "verification_uri_complete": "https://open.feishu.cn/page/register?code=UC1",
            "user_code": "UC1",
            "interval": 0.05,
            "expire_in": 600,
        }
        yield server


class Completer:
    def __init__(self, error: str = "", fails: bool = False) -> None:
        self.calls: list[tuple[RegistrationInput, FeishuCredentials]] = []
        self.error, self.fails = error, fails

    async def __call__(
        self, given: RegistrationInput, credentials: FeishuCredentials
    ) -> tuple[ChannelWire, str]:
        self.calls.append((given, credentials))
        if self.fails:
            raise RuntimeError("app id already used")
        return CHANNEL, self.error


def _registrar(fake: FakeFeishu, complete: Completer) -> FeishuRegistrar:
    return FeishuRegistrar(complete, accounts_url=fake.url, lark_accounts_url=fake.url + "/lark")


async def _until(
    registrar: FeishuRegistrar, rid: str, *statuses: str, timeout: float = 10.0
) -> FeishuRegistrationState:
    async def wait() -> FeishuRegistrationState:
        while True:
            state = await registrar.poll(rid)
            if state["status"] in statuses:
                return state
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(wait(), timeout)


def _run(
    fake: FakeFeishu, complete: Completer, given: RegistrationInput, *statuses: str
) -> tuple[FeishuRegistrationState, FeishuRegistrationState]:
    async def go() -> tuple[FeishuRegistrationState, FeishuRegistrationState]:
        registrar = _registrar(fake, complete)
        try:
            started = await registrar.begin(given)
            return started, await _until(registrar, started["id"], *statuses)
        finally:
            await registrar.close()

    return asyncio.run(go())


def test_a_scan_completes_with_the_channel(fake: FakeFeishu) -> None:
    fake.polls = [PENDING, GRANTED]
    complete = Completer()
    given = RegistrationInput(name="Helper", locale="en-US", allowed_users=("ou_admin",))

    async def go() -> tuple[FeishuRegistrationState, ...]:
        registrar = _registrar(fake, complete)
        try:
            started = await registrar.begin(given)
            rid = started["id"]
            pending = await _until(registrar, rid, "pending", "completed")
            done = await _until(registrar, rid, "completed")
            return started, pending, done
        finally:
            await registrar.close()

    started, pending, done = asyncio.run(go())
    assert re.fullmatch(r"feishu-registration-[0-9a-f]{16}", started["id"])
    assert started["status"] == "starting"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", pending["expires_at"])
    assert done == {
        "id": started["id"],
        "status": "completed",
        "expires_at": pending["expires_at"],
        "channel": CHANNEL,
    }
    ((seen, credentials),) = complete.calls
    assert seen.allowed_users == ("ou_admin", "ou_scanner")
    assert (credentials.app_id, credentials.app_secret) == ("cli_new", "new-app-secret")
    assert "new-app-secret" not in repr(credentials)
    begin = next(r.body for r in fake.requests if r.body.get("action") == "begin")
    assert begin == {
        "action": "begin",
        "archetype": "PersonalAgent",
        "auth_method": "client_secret",
        "request_user_info": "open_id",
    }
    assert fake.polled[0] == {"action": "poll", "device_code": "dc-1", "path": ENDPOINT}


ENDPOINT = "/oauth/v1/app/registration"


def test_the_qr_url_carries_the_name_description_and_addons(fake: FakeFeishu) -> None:
    _, pending = _run(fake, Completer(), RegistrationInput(name="Helper"), "pending")
    url = urlsplit(pending["qr_code_url"])
    query = parse_qs(url.query)
    assert (url.netloc, url.path, query["code"]) == ("open.feishu.cn", "/page/register", ["UC1"])
    assert query["from"] == query["tp"] == ["sdk"]
    assert query["name"] == ["Helper"]
    assert query["desc"] == ["通过 Foya 桌面端运行的飞书智能助手"]
    raw = query["addons"][0]
    addons = json.loads(gzip.decompress(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))))
    assert addons["events"] == {"items": {"tenant": ["im.message.receive_v1"]}}
    assert "im:message:send_as_bot" in addons["scopes"]["tenant"]
    assert addons["preset"] is False
    assert addons["callbacks"] == {"items": ["card.action.trigger"]}


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        ((400, {"error": "access_denied"}), "denied", None),
        ((400, {"error": "expired_token"}), "expired", None),
        (
            (400, {"error": "invalid_grant", "error_description": "bad"}),
            "error",
            "invalid_grant: bad",
        ),
        ((200, {"client_id": "cli_x"}), "error", "飞书未返回应用凭证"),
    ],
)
def test_a_scan_can_end_otherwise(
    fake: FakeFeishu, answer: tuple[int, dict[str, Any]], status: str, error: str | None
) -> None:
    fake.polls = [PENDING, answer]
    complete = Completer()
    _, state = _run(fake, complete, RegistrationInput(), status)
    assert state.get("error") == error
    assert "qr_code_url" not in state and "expires_at" in state
    assert not complete.calls


def test_the_deadline_expires_the_registration(fake: FakeFeishu) -> None:
    fake.begin["expire_in"] = 0.3
    _run(fake, Completer(), RegistrationInput(), "expired")
    assert len(fake.polled) >= 2


def test_slow_down_makes_polling_slower(fake: FakeFeishu) -> None:
    fake.begin["expire_in"] = 1
    fake.polls = [(400, {"error": "slow_down"})]
    _run(fake, Completer(), RegistrationInput(), "expired")
    assert len(fake.polled) == 1  # the next poll would have come 5 s later, past the deadline


def test_a_lark_tenant_switches_host_then_is_refused(fake: FakeFeishu) -> None:
    lark = {"user_info": {"tenant_brand": "lark"}, "error": "authorization_pending"}
    granted = {**GRANTED[1], "user_info": {"open_id": "ou_l", "tenant_brand": "lark"}}
    fake.polls = [(400, lark), (200, granted)]
    _, state = _run(fake, Completer(), RegistrationInput(locale="en-US"), "error")
    assert state["error"] == "Only Feishu accounts are currently supported"
    assert [p["path"] for p in fake.polled] == [ENDPOINT, "/lark" + ENDPOINT]


def test_a_channel_that_did_not_start_completes_with_its_error(fake: FakeFeishu) -> None:
    fake.polls = [GRANTED]
    _, state = _run(fake, Completer(error="connect failed"), RegistrationInput(), "completed")
    assert state["channel"] == CHANNEL and state["error"] == "connect failed"
    fake.polls = [GRANTED]
    _, state = _run(fake, Completer(fails=True), RegistrationInput(), "error")
    assert state["error"] == "app id already used" and "channel" not in state


def test_a_bad_begin_answer_is_an_error(fake: FakeFeishu) -> None:
    fake.begin = {"device_code": "", "verification_uri_complete": ""}
    _, state = _run(fake, Completer(), RegistrationInput(), "error")
    assert state["error"] == "invalid_response"


def test_cancel_stops_a_pending_registration_and_is_a_no_op_after(fake: FakeFeishu) -> None:
    async def go() -> tuple[FeishuRegistrationState, int]:
        registrar = _registrar(fake, Completer())
        try:
            rid = (await registrar.begin(RegistrationInput()))["id"]
            await _until(registrar, rid, "pending")
            await registrar.cancel(rid)
            await asyncio.sleep(0.1)  # a poll already on the wire may still land
            polls = len(fake.polled)
            await asyncio.sleep(0.3)
            await registrar.cancel(rid)  # finished: nothing happens
            assert len(fake.polled) == polls
            return await registrar.poll(rid), polls
        finally:
            await registrar.close()

    state, _ = asyncio.run(go())
    assert state["status"] == "cancelled" and "error" not in state and "qr_code_url" not in state


def test_unknown_registrations_are_not_found(fake: FakeFeishu) -> None:
    async def go() -> tuple[str, str]:
        registrar = _registrar(fake, Completer())
        try:
            with pytest.raises(RegistrationNotFound) as on_poll:
                await registrar.poll("feishu-registration-0")
            with pytest.raises(RegistrationNotFound) as on_cancel:
                await registrar.cancel("feishu-registration-0")
            return on_poll.value.message, on_cancel.value.message
        finally:
            await registrar.close()

    assert asyncio.run(go()) == (
        "registration not found",
        'file does not exist: Feishu registration "feishu-registration-0"',
    )


def test_the_accounts_host_follows_the_api_host() -> None:
    assert accounts_url_for("https://open.feishu.cn") == "https://accounts.feishu.cn"
    assert accounts_url_for("https://open.larksuite.com/") == "https://accounts.larksuite.com"
    assert accounts_url_for("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
