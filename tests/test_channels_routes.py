"""The channel routes (app.http.routes.channels, app.kernel.channels) through the app the factory
builds (`app.main.create_app`), a real kernel on a real data directory, requests in process.

A test runner fits the `ChannelRunner` port where a channel must be `running` (the platforms'
own runners are tested with them); the pairings' clock is the kernel's, which tests move.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import json
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.streams_helpers import assert_error

import app.main
from app.kernel import Kernel
from app.kernel.channels import Channels
from app.kernel.channels.errors import PairingFailed
from app.kernel.channels.platform import PlatformError
from app.kernel.channels.records import ChannelConfig, Secrets
from app.kernel.channels.registration import FeishuRegistrationState, RegistrationInput
from app.settings import Settings

TOKEN = "123456:telegram-secret-token"
APP_SECRET = "feishu-app-secret-value"
MODE_RULE = "channel approval mode must be auto or full_access"
START = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)


class Clock:
    """Time that moves when the test moves it; a sleep returns at once, noting how long."""

    def __init__(self) -> None:
        self.moment = START
        self.slept: list[float] = []

    def now(self) -> dt.datetime:
        return self.moment

    async def sleep_until(self, moment: dt.datetime) -> None:
        self.slept.append((moment - self.moment).total_seconds())
        await asyncio.sleep(0)

    def move(self, **delta: float) -> None:
        self.moment += dt.timedelta(**delta)


@dataclass
class Runner:
    """A `ChannelRunner` whose bots start at once, or fail `failures` times first."""

    failures: list[Exception] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    async def start(self, channel: ChannelConfig, secrets: Secrets) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.started.append(channel.id)

    async def stop(self, channel_id: str) -> None:
        self.stopped.append(channel_id)


@dataclass
class Rig:
    kernel: Kernel
    client: httpx.AsyncClient
    clock: Clock
    data_dir: Path

    @property
    def channels(self) -> Channels:
        return self.kernel.channels

    async def session(self, approval_mode: str = "auto") -> str:
        response = await self.client.post("/sessions", json={"approval_mode": approval_mode})
        assert response.status_code == 200, response.text
        return str(response.json()["id"])

    async def channel(self, **body: Any) -> dict[str, Any]:
        response = await self.client.post("/channels", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())


class NoPlatforms(Kernel):
    """A kernel whose channels run no platform: the tests register their own runners (and
    registrar), or none."""

    @functools.cached_property
    def channels(self) -> Channels:
        channels = super().channels
        channels.runs.runners.clear()
        channels.register_registrar(None)  # type: ignore[arg-type]
        return channels


@contextlib.asynccontextmanager
async def served(data_dir: Path, clock: Clock | None = None) -> AsyncIterator[Rig]:
    clock = clock or Clock()
    # The factory's own kernel, given the test's clock (as tests/test_startup_budget.py does).
    original = vars(app.main)["Kernel"]
    setattr(app.main, "Kernel", functools.partial(NoPlatforms, clock=clock))  # noqa: B010
    try:
        service = app.main.create_app(Settings(data_dir=data_dir))
    finally:
        setattr(app.main, "Kernel", original)  # noqa: B010
    await service.kernel.start()
    try:
        transport = httpx.ASGITransport(app=service.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://k") as client:
            yield Rig(service.kernel, client, clock, data_dir)
    finally:
        await service.kernel.begin_shutdown()
        await service.kernel.close()


def scenario(test: Callable[[Rig], Awaitable[None]]) -> Callable[[Path], None]:
    """Run an async test against a served kernel on the test's own data directory."""

    def run(tmp_path: Path) -> None:
        async def body() -> None:
            async with served(tmp_path / "data") as rig:
                await test(rig)

        asyncio.run(body())

    run.__name__, run.__qualname__, run.__doc__ = test.__name__, test.__qualname__, test.__doc__
    return run


def telegram(**extra: Any) -> dict[str, Any]:
    return {"kind": "telegram", "name": "TG", "enabled": True, "token": TOKEN, **extra}


def feishu(**extra: Any) -> dict[str, Any]:
    body = {"kind": "feishu", "name": "FS", "enabled": True, "app_id": "cli_1"}
    return {**body, "app_secret": APP_SECRET, **extra}


# ---------------------------------------------------------------------------------- the catalog


@scenario
async def test_an_empty_catalog_and_unknown_channels(rig: Rig) -> None:
    c = rig.client
    listed = await c.get("/channels")
    assert listed.status_code == 200 and listed.json() == []
    for path in ("/channels/nope", "/channels/feishu"):
        error = assert_error(await c.get(path), 404, "channel_not_found")
        assert error["message"] == "channel not found"
    error = assert_error(await c.put("/channels/nope", json={}), 404, "channel_not_found")
    assert error["message"] == "file does not exist"
    error = assert_error(await c.delete("/channels/nope"), 404, "channel_not_found")
    assert error["message"] == "file does not exist"


@scenario
async def test_a_created_channel_reads_without_its_secret(rig: Rig) -> None:
    tg = await rig.channel(**telegram(allowed_users=[" @ada ", "ada", "", "Bob"], locale="fr"))
    assert tg["id"].startswith("telegram-") and len(tg["id"]) == len("telegram-") + 16
    assert tg == {
        "id": tg["id"],
        "kind": "telegram",
        "name": "TG",
        "locale": "zh-CN",
        "enabled": True,
        "has_app_secret": False,
        "has_token": True,
        "approval_mode": "auto",
        "allowed_users": ["ada", "Bob"],
        "allowed_chats": [],
        "allow_all": False,
        "status": "stopped",  # no Telegram runner is registered: stopped, with no error
    }
    fs = await rig.channel(**feishu(locale="en-US", model="m1", approval_mode="full_access"))
    assert list(fs) == [
        *("id", "kind", "name", "locale", "enabled", "app_id", "has_app_secret", "has_token"),
        *("model", "approval_mode", "allowed_users", "allowed_chats", "allow_all", "status"),
    ]
    assert fs["app_id"] == "cli_1" and fs["has_app_secret"] and not fs["has_token"]
    assert fs["locale"] == "en-US" and fs["approval_mode"] == "full_access"
    everything = (await rig.client.get("/channels")).text + json.dumps([tg, fs])
    assert TOKEN not in everything and APP_SECRET not in everything
    # The secrets are kept, in Foya's files, readable by the owner only.
    for name, secret in (("telegram-channels.json", TOKEN), ("feishu-channels.json", APP_SECRET)):
        path = rig.data_dir / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert secret in path.read_text()


@scenario
async def test_invalid_channels_are_refused_with_foyas_messages(rig: Rig) -> None:
    c = rig.client
    refused = [
        ({"name": "x"}, "unsupported channel kind"),
        ({"kind": "slack"}, "unsupported channel kind"),
        (telegram(token=" "), "Telegram bot token is required"),
        (feishu(app_id=""), "Feishu app ID is required"),
        (feishu(app_secret=""), "Feishu app secret is required"),
        (telegram(approval_mode="manual"), f"Telegram {MODE_RULE}"),
        (feishu(approval_mode="manual", enabled=False), f"Feishu {MODE_RULE}"),
    ]
    for body, message in refused:
        error = assert_error(await c.post("/channels", json=body), 400, "channel_create_failed")
        assert error["message"] == message, body
    await rig.channel(**telegram())
    await rig.channel(**feishu())
    for body, message in (
        (telegram(name="again"), "a Telegram channel with this token already exists"),
        (feishu(app_secret="other"), "a Feishu channel with this app ID already exists"),
    ):
        error = assert_error(await c.post("/channels", json=body), 400, "channel_create_failed")
        assert error["message"] == message
    # A disabled channel needs no credentials, and pairing-only access is valid.
    assert (await rig.channel(kind="telegram", enabled=False))["has_token"] is False
    assert (await rig.channel(kind="feishu", enabled=True, app_id="cli_2", app_secret="s"))["id"]
    error = assert_error(
        await c.post("/channels", json={**telegram(), "foo": 1}), 400, "bad_request"
    )
    assert "foo" in error["message"]
    assert_error(await c.post("/channels", content=b""), 400, "bad_request")
    wrong_type = await c.post("/channels", json={"kind": "telegram", "allowed_users": "ada"})
    assert_error(wrong_type, 400, "bad_request")
    assert len((await c.get("/channels")).json()) == 4


@scenario
async def test_feishu_channels_list_first_each_kind_in_creation_order(rig: Rig) -> None:
    made = [
        await rig.channel(kind="telegram"),
        await rig.channel(kind="feishu"),
        await rig.channel(kind="telegram"),
        await rig.channel(kind="feishu", name="Named"),
    ]
    assert [m["name"] for m in made] == ["Telegram 1", "Feishu Bot 1", "Telegram 2", "Named"]
    listed = (await rig.client.get("/channels")).json()
    assert [c["id"] for c in listed] == [made[1]["id"], made[3]["id"], made[0]["id"], made[2]["id"]]
    assert (await rig.client.get(f"/channels/{made[2]['id']}")).json() == made[2]


@scenario
async def test_put_replaces_everything_but_a_blank_secret_or_name(rig: Rig) -> None:
    c = rig.client
    tg = await rig.channel(**telegram(allowed_users=["ada"], model="m", allow_all=True))
    # What the desktop sends to enable a listed channel: no secret at all, `enabled` true.
    answer = await c.put(f"/channels/{tg['id']}", json={"name": "", "token": "  ", "enabled": True})
    assert answer.status_code == 200, answer.text
    put = answer.json()
    assert put["name"] == "TG" and put["has_token"] is True
    assert put["allowed_users"] == [] and put["allow_all"] is False and "model" not in put
    assert TOKEN in (rig.data_dir / "telegram-channels.json").read_text()
    error = assert_error(
        await c.put(f"/channels/{tg['id']}", json={"kind": "feishu"}), 400, "channel_update_failed"
    )
    assert error["message"] == "channel kind cannot be changed"
    other = await rig.channel(kind="telegram", token="999:other")
    error = assert_error(
        await c.put(f"/channels/{other['id']}", json=telegram()), 400, "channel_update_failed"
    )
    assert error["message"] == "a Telegram channel with this token already exists"
    error = assert_error(
        await c.put(f"/channels/{tg['id']}", json={"enabled": True, "approval_mode": "manual"}),
        400,
        "channel_update_failed",
    )
    assert "approval mode" in error["message"]
    assert (await c.get(f"/channels/{tg['id']}")).json() == put  # refused changes change nothing
    renamed = await c.put(f"/channels/{tg['id']}", json={"kind": "telegram", "name": " New "})
    assert renamed.json()["name"] == "New" and renamed.json()["enabled"] is False


@scenario
async def test_delete_stops_a_channel_and_forgets_its_chats(rig: Rig) -> None:
    runner = Runner()
    rig.channels.register_runner("telegram", runner)
    tg = await rig.channel(**telegram())
    session = await rig.session()
    await rig.channels.bindings.bind(tg["id"], "42", session, "Ada")
    deleted = await rig.client.delete(f"/channels/{tg['id']}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert runner.stopped == [tg["id"]]
    assert (await rig.client.get("/channels")).json() == []
    assert await rig.kernel.store.conversation(tg["id"], "chat:42") is None
    assert (await rig.client.get(f"/sessions/{session}/channel-binding")).json() is None


def test_channels_survive_a_restart_and_a_start_without_them_builds_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"

    async def body() -> None:
        async with served(data) as rig:
            assert not rig.kernel.built("channels")
            await rig.client.get("/healthz")
            assert not rig.kernel.built("channels")
            made = [await rig.channel(**telegram()), await rig.channel(**feishu(enabled=False))]
            session = await rig.session()
            await rig.channels.bindings.bind(made[0]["id"], "-7", session, "Group", kind="group")
        async with served(data) as rig:
            assert rig.kernel.built("channels")  # its catalog is on disk: built at start
            listed = (await rig.client.get("/channels")).json()
            assert [c["id"] for c in listed] == [made[1]["id"], made[0]["id"]]
            assert listed[1]["has_token"] and listed[0]["has_app_secret"]
            binding = (await rig.client.get(f"/sessions/{session}/channel-binding")).json()
            assert binding["conversation_key"] == "chat:-7" and binding["kind"] == "group"

    asyncio.run(body())


def test_an_unreadable_catalog_is_kept_aside(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "telegram-channels.json").write_text("{not json")
    entry = {"id": "feishu-1", "name": "ok", "enabled": False, "app_id": "a"}
    bad = {"id": "", "name": "no id"}
    (data / "feishu-channels.json").write_text(json.dumps({"version": 2, "channels": [entry, bad]}))

    async def body() -> None:
        async with served(data) as rig:
            listed = (await rig.client.get("/channels")).json()
            assert [c["id"] for c in listed] == ["feishu-1"]
        aside = sorted(p.name for p in data.iterdir() if ".unreadable-" in p.name)
        assert [a.split(".unreadable-")[0] for a in aside] == [
            "feishu-channels.json",
            "telegram-channels.json",
        ]

    asyncio.run(body())


# ------------------------------------------------------------------------ runs and retries


def test_a_failing_start_is_retried_with_back_off_and_its_secret_hidden(tmp_path: Path) -> None:
    async def body() -> None:
        async with served(tmp_path / "data") as rig:
            failures: list[Exception] = [
                PlatformError(f"https://api.telegram.org/bot{TOKEN}/getMe: timed out")
                for _ in range(3)
            ]
            runner = Runner(failures=failures)
            tg = await rig.channel(**telegram())
            assert tg["status"] == "stopped" and "last_error" not in tg
            rig.channels.register_runner("telegram", runner)
            for _ in range(50):
                await asyncio.sleep(0)
            got = (await rig.client.get(f"/channels/{tg['id']}")).json()
            assert got["status"] == "running" and "last_error" not in got
            assert rig.clock.slept == [1.0, 2.0, 4.0]
            assert runner.started == [tg["id"]]
            # A bot that gives up later is restarted too, after the next back-off.
            rig.channels.report(tg["id"], "error", f"polling failed for {TOKEN}")
            assert rig.channels.get(tg["id"])["last_error"] == "polling failed for [redacted]"
            for _ in range(50):
                await asyncio.sleep(0)
            assert rig.clock.slept[-1] == 8.0 and runner.started == [tg["id"]] * 2
            # A permanent refusal is not retried; a PUT restarts it.
            runner.failures.append(PlatformError("Unauthorized", permanent=True))
            await rig.client.put(f"/channels/{tg['id']}", json={"enabled": True})
            for _ in range(50):
                await asyncio.sleep(0)
            failed = rig.channels.get(tg["id"])
            assert failed["status"] == "error" and failed["last_error"] == "Unauthorized"
            assert len(rig.clock.slept) == 4
            # Disabling stops it and clears the error.
            off = await rig.client.put(f"/channels/{tg['id']}", json={"enabled": False})
            assert off.json()["status"] == "stopped" and "last_error" not in off.json()

    asyncio.run(body())


# ---------------------------------------------------------------------- bindings and pairings


@scenario
async def test_pairing_binds_a_chat_to_its_session(rig: Rig) -> None:
    c = rig.client
    rig.channels.register_runner("telegram", Runner())
    tg = await rig.channel(**telegram())
    session = await rig.session()
    assert (await c.get(f"/sessions/{session}/channel-binding")).json() is None
    answer = await c.post(f"/sessions/{session}/channel-pairings", json={"channel_id": tg["id"]})
    assert answer.status_code == 201, answer.text
    pairing = answer.json()
    code = pairing["code"]
    assert len(code) == 8 and set(code) <= set("23456789ABCDEFGHJKLMNPQRSTUVWXYZ")
    assert len(pairing["id"]) == 32 and pairing["command"] == f"/bind {code}"
    assert pairing["status"] == "pending" and pairing["session_id"] == session
    assert pairing["created_at"] == "2026-01-05T09:00:00Z"
    assert pairing["expires_at"] == "2026-01-05T09:10:00Z"
    assert "conversation" not in pairing and "completed_at" not in pairing

    assert await rig.channels.pair(code.lower(), tg["id"], "42", "Ada") == session
    assert await rig.channels.pair(code, tg["id"], "42", "Ada") == session  # idempotent
    with pytest.raises(PairingFailed, match="already used"):
        await rig.channels.pair(code, tg["id"], "43", "Bob")
    done = (await c.get(f"/channel-pairings/{pairing['id']}")).json()
    assert done["status"] == "completed" and done["completed_at"] == "2026-01-05T09:00:00Z"
    binding = (await c.get(f"/sessions/{session}/channel-binding")).json()
    assert done["conversation"] == binding
    assert {k: binding[k] for k in ("channel_id", "conversation_key", "kind", "external_id")} == {
        "channel_id": tg["id"],
        "conversation_key": "chat:42",
        "kind": "private",
        "external_id": "42",
    }
    assert binding["display_name"] == "Ada" and binding["active_session_id"] == session

    unbound = await c.delete(f"/sessions/{session}/channel-binding")
    assert unbound.status_code == 204
    assert (await c.get(f"/sessions/{session}/channel-binding")).json() is None
    assert (await c.delete(f"/sessions/{session}/channel-binding")).status_code == 204
    assert await rig.channels.bindings.session_of(tg["id"], "42") is None


@scenario
async def test_pairing_refusals_in_foyas_order(rig: Rig) -> None:
    c = rig.client

    async def pair(session: str, channel: str) -> httpx.Response:
        return await c.post(f"/sessions/{session}/channel-pairings", json={"channel_id": channel})

    runner = Runner()
    rig.channels.register_runner("telegram", runner)
    tg = await rig.channel(**telegram())
    auto, manual = await rig.session("auto"), await rig.session("manual")
    error = assert_error(await pair("nope", tg["id"]), 404, "session_not_found")
    assert error["message"] == "session not found"
    error = assert_error(await pair(manual, tg["id"]), 409, "interactive_session")
    assert error["message"] == "channel-bound sessions require auto or full_access approval"
    error = assert_error(await pair(auto, ""), 400, "bad_request")
    assert error["message"] == "channel_id is required"
    error = assert_error(await pair(auto, "telegram-none"), 404, "channel_not_found")
    assert error["message"] == "file does not exist"
    assert (await pair(auto, f" {tg['id']} ")).status_code == 201  # trimmed for the lookup
    off = await rig.channel(kind="telegram", enabled=False)
    error = assert_error(await pair(auto, off["id"]), 409, "channel_pairing_failed")
    assert error["message"] == "messaging channel is disabled"
    fs = await rig.channel(**feishu())  # no Feishu runner: not running
    error = assert_error(await pair(auto, fs["id"]), 409, "channel_pairing_failed")
    assert error["message"] == "messaging channel is not running"
    runner.failures.append(PlatformError("lost", permanent=True))  # the restart fails too
    rig.channels.report(tg["id"], "error", "lost")
    for _ in range(20):
        await asyncio.sleep(0)
    error = assert_error(await pair(auto, tg["id"]), 409, "channel_pairing_failed")
    assert error["message"] == "messaging channel is unavailable: lost"
    empty = await c.post(f"/sessions/{auto}/channel-pairings", json={})
    error = assert_error(empty, 400, "bad_request")
    assert "channel_id" in error["message"]
    for method in ("GET", "DELETE"):
        unknown = await c.request(method, "/channel-pairings/x")
        error = assert_error(unknown, 404, "channel_pairing_not_found")
        assert error["message"] == "channel pairing not found"
    for method in ("GET", "DELETE"):
        missing = await c.request(method, "/sessions/nope/channel-binding")
        assert assert_error(missing, 404, "session_not_found")["message"] == "session not found"


@scenario
async def test_pairings_expire_one_pending_per_session_and_are_pruned(rig: Rig) -> None:
    c = rig.client
    rig.channels.register_runner("telegram", Runner())
    tg = await rig.channel(**telegram())
    other = await rig.channel(kind="telegram", token="2:x", enabled=True)
    session = await rig.session("full_access")
    url = f"/sessions/{session}/channel-pairings"
    first = (await c.post(url, json={"channel_id": tg["id"]})).json()
    second = (await c.post(url, json={"channel_id": other["id"]})).json()
    assert (await c.get(f"/channel-pairings/{first['id']}")).json()["status"] == "cancelled"
    with pytest.raises(PairingFailed, match="not found"):
        await rig.channels.pair(first["code"], tg["id"], "1", "")
    with pytest.raises(PairingFailed, match="another channel"):
        await rig.channels.pair(second["code"], tg["id"], "1", "")
    cancelled = await c.delete(f"/channel-pairings/{second['id']}")
    assert cancelled.status_code == 204
    assert (await c.get(f"/channel-pairings/{second['id']}")).json()["status"] == "cancelled"

    third = (await c.post(url, json={"channel_id": tg["id"]})).json()
    rig.clock.move(minutes=9, seconds=59)
    assert (await c.get(f"/channel-pairings/{third['id']}")).json()["status"] == "pending"
    rig.clock.move(seconds=1)
    assert (await c.get(f"/channel-pairings/{third['id']}")).json()["status"] == "expired"
    assert (await c.delete(f"/channel-pairings/{third['id']}")).status_code == 204
    assert (await c.get(f"/channel-pairings/{third['id']}")).json()["status"] == "expired"
    with pytest.raises(PairingFailed, match="expired"):
        await rig.channels.pair(third["code"], tg["id"], "1", "")
    rig.clock.move(hours=1, seconds=1)
    assert_error(await c.get(f"/channel-pairings/{third['id']}"), 404, "channel_pairing_not_found")


@scenario
async def test_bindings_are_one_to_one_and_go_with_a_deleted_session(rig: Rig) -> None:
    bindings = rig.channels.bindings
    tg = await rig.channel(kind="telegram")
    fs = await rig.channel(kind="feishu")
    one, two = await rig.session(), await rig.session()
    await bindings.bind(tg["id"], "A", one, "A")
    await bindings.bind(fs["id"], "B", one, "B")  # the session leaves chat A
    assert await bindings.session_of(tg["id"], "A") is None
    assert await bindings.session_of(fs["id"], "B") == one
    await bindings.bind(fs["id"], "B", two, "")  # the chat leaves session one
    assert await bindings.binding_of(one) is None
    bound = await bindings.binding_of(two)
    assert bound is not None and bound["display_name"] == "B"  # a blank name keeps the old
    await bindings.bind(tg["id"], "A", one, "A")
    assert (await rig.client.delete(f"/sessions/{two}")).status_code == 204
    assert await bindings.session_of(fs["id"], "B") is None
    row = await rig.kernel.store.conversation(fs["id"], "chat:B")
    assert row is not None and row.active_session_id == ""  # the row stays
    assert await bindings.session_of(tg["id"], "A") == one


# ------------------------------------------------------------- Feishu QR registrations, legacy


@dataclass
class Registrar:
    begun: list[RegistrationInput] = field(default_factory=list)

    async def begin(self, given: RegistrationInput) -> FeishuRegistrationState:
        self.begun.append(given)
        return {"id": "feishu-registration-0123456789abcdef", "status": "starting"}

    async def poll(self, registration_id: str) -> FeishuRegistrationState:
        return {"id": registration_id, "status": "pending", "qr_code_url": "https://q"}

    async def cancel(self, registration_id: str) -> None:
        return None


@scenario
async def test_feishu_registrations(rig: Rig) -> None:
    c, url = rig.client, "/channels/feishu/registrations"
    error = assert_error(await c.post(url, json={}), 400, "feishu_registration_failed")
    assert error["message"] == "Feishu registration is unavailable"
    error = assert_error(await c.get(f"{url}/r1"), 404, "feishu_registration_not_found")
    assert error["message"] == "registration not found"
    error = assert_error(await c.delete(f"{url}/r1"), 404, "feishu_registration_not_found")
    assert error["message"] == 'file does not exist: Feishu registration "r1"'
    registrar = Registrar()
    rig.channels.register_registrar(registrar)
    error = assert_error(
        await c.post(url, json={"approval_mode": "manual"}), 400, "feishu_registration_failed"
    )
    assert error["message"] == "Feishu channel approval mode must be auto or full_access"
    assert_error(await c.post(url, json={"enabled": True}), 400, "bad_request")
    begun = await c.post(url, json={"name": " ", "locale": "en-US", "allowed_users": ["u", "u"]})
    assert begun.status_code == 202 and begun.json()["status"] == "starting"
    assert registrar.begun == [
        RegistrationInput(name="Feishu", locale="en-US", approval_mode="auto", allowed_users=("u",))
    ]
    assert (await c.get(f"{url}/r2")).json()["qr_code_url"] == "https://q"
    assert (await c.delete(f"{url}/r2")).status_code == 204


@scenario
async def test_a_registration_completes_by_creating_then_updating_its_channel(rig: Rig) -> None:
    @dataclass(frozen=True)
    class Scan:
        app_id: str
        app_secret: str
        open_id: str

    given = RegistrationInput(name="Feishu", approval_mode="auto", allowed_chats=("c1",))
    made, error = await rig.channels.complete_registration(given, Scan("cli_9", "s1", "ou_a"))
    assert error == "" and made["enabled"] and made["allowed_users"] == ["ou_a"]
    renamed = await rig.client.put(
        f"/channels/{made['id']}", json={"name": "Mine", "app_id": "cli_9"}
    )
    assert renamed.status_code == 200
    again, _ = await rig.channels.complete_registration(given, Scan("cli_9", "s2", "ou_b"))
    assert again["id"] == made["id"] and again["name"] == "Mine" and again["enabled"]
    assert again["allowed_users"] == ["ou_b"] and again["allowed_chats"] == ["c1"]
    assert "s2" in (rig.data_dir / "feishu-channels.json").read_text()


@scenario
async def test_the_legacy_feishu_bot_settings_are_the_first_feishu_channel(rig: Rig) -> None:
    c = rig.client
    placeholder = (await c.get("/settings/feishu-bot")).json()
    assert placeholder == {
        "id": "",
        "kind": "feishu",
        "name": "Feishu Bot",
        "locale": "zh-CN",
        "enabled": False,
        "app_id": "",
        "has_app_secret": False,
        "approval_mode": "auto",
        "allowed_users": None,
        "allowed_chats": None,
        "allow_all": False,
        "status": "stopped",
    }
    with_kind = await c.put("/settings/feishu-bot", json={"kind": "feishu"})
    error = assert_error(with_kind, 400, "bad_request")
    assert "kind" in error["message"]
    error = assert_error(
        await c.put("/settings/feishu-bot", json={"enabled": True}), 400, "channel_update_failed"
    )
    assert error["message"] == "Feishu app ID is required"
    created = (await c.put("/settings/feishu-bot", json={"model": "m"})).json()
    assert created["name"] == "Feishu Bot" and created["app_id"] == "" and created["model"] == "m"
    assert "has_token" not in created
    listed = (await c.get("/channels")).json()
    assert [ch["id"] for ch in listed] == [created["id"]]
    body = {"name": "", "enabled": True, "app_id": "cli_x", "app_secret": APP_SECRET}
    updated = (await c.put("/settings/feishu-bot", json=body)).json()
    assert updated["id"] == created["id"] and updated["has_app_secret"] is True
    assert list(updated)[:7] == [
        *("id", "kind", "name", "locale", "enabled", "app_id", "has_app_secret")
    ]
    assert (await c.get("/settings/feishu-bot")).json() == updated
