"""Foya's desktop client against the channel routes: every channel operation the desktop
performs, its request exactly as the desktop's host and views build it, its answer checked
against the desktop's TypeScript interface and the status the host needs (`kernel.rs` treats any
2xx as success and hands the body to `JSON.parse`, any other status as an error whose body
`localizeError` reads as `{code, message}`).

Sources (`freesoulcode/foya`, newest stored versions): `apps/desktop/src-tauri/src/commands/
settings.rs` (method, path, body of each command), `apps/desktop/src/lib/api.ts`
(`MessagingChannelSettings`, `ChannelCreate`, `TelegramChannelUpdate`, `ChannelConversation`,
`ChannelPairing`, `FeishuRegistrationInput`, `FeishuRegistrationState`),
`src/components/chat/ChannelBindingButton.vue` (the "connect external conversation" dialog) with
`src/lib/channelConnection.ts` (`isConfiguredChannel`), and, for the desktops before Telegram,
`src/components/settings/channels/FeishuChannelSettings.vue` and the `FeishuBotSettings` /
`FeishuBotUpdate` of their `api.ts` (`/settings/feishu-bot`, the Feishu-only settings page).

The requests go as the host sends them in remote mode (tests/support/desktop_world.py): a bearer
token, `content-type: application/json` always, compact JSON or an empty body. A JavaScript
`undefined` never reaches the wire (Tauri serialises the arguments with `JSON.stringify`): the
bodies here drop those keys (`js`). No SSE event carries channel state to the desktop; the
dialog polls.

A real kernel from the app factory, in process (tests/test_channels_routes.py's `NoPlatforms`:
no real Telegram or Feishu is reached); a channel that must be `running` gets a test runner, and
the Feishu QR registration runs the real `FeishuRegistrar` against tests/support/fake_feishu.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from support.desktop_shapes import (
    BOOL,
    ERROR,
    STR,
    ArrayOf,
    Nullable,
    Obj,
    check,
    extend,
    obj,
    one_of,
    opt,
)
from support.desktop_world import JSON, compact
from support.fake_feishu import FakeFeishu
from support.helpers import sha256_hex
from test_channels_routes import NoPlatforms, Runner

import app.main
from app.kernel import Kernel
from app.kernel.channels import Channels
from app.kernel.channels.feishu import FeishuRegistrar
from app.kernel.channels.platform import PlatformError
from app.kernel.channels.records import ChannelConfig, ChannelKind, Secrets
from app.settings import Settings

TOKEN = secrets.token_hex(32)  # remote mode wants at least 32 characters
TG_TOKEN = "123456:desktop-telegram-token"
APP_SECRET = "desktop-feishu-app-secret"

# ----------------------------------------------------------------- api.ts shapes (channels)

LOCALE = one_of("zh-CN", "en-US")
MODE = one_of("auto", "full_access")
CHANNEL_BASE = obj(  # MessagingChannelBase
    "MessagingChannelBase",
    id=STR,
    kind=one_of("feishu", "telegram"),
    name=STR,
    locale=LOCALE,
    enabled=BOOL,
    connection_id=opt(STR),
    model=opt(STR),
    project_id=opt(STR),
    approval_mode=MODE,
    allowed_users=ArrayOf(STR),
    allowed_chats=ArrayOf(STR),
    allow_all=BOOL,
    status=one_of("stopped", "running", "error"),
    last_error=opt(STR),
)
FEISHU_CHANNEL = extend(
    CHANNEL_BASE, "FeishuChannelSettings", kind=one_of("feishu"), app_id=STR, has_app_secret=BOOL
)
TELEGRAM_CHANNEL = extend(
    CHANNEL_BASE, "TelegramChannelSettings", kind=one_of("telegram"), has_token=BOOL
)
#: A Feishu channel without an app id: Foya's `channelhub.State` omits an empty `app_id`
#: (`omitempty`), so only the desktop's `isConfiguredChannel` reads it, where absent is falsy.
UNCONFIGURED_FEISHU = extend(FEISHU_CHANNEL, "FeishuChannelSettings", app_id=opt(STR))
CONVERSATION = obj(
    "ChannelConversation",
    channel_id=STR,
    conversation_key=STR,
    kind=STR,
    external_id=STR,
    display_name=opt(STR),
    active_session_id=opt(STR),
    last_seen_at=STR,
    updated_at=STR,
)
PAIRING = obj(
    "ChannelPairing",
    id=STR,
    code=STR,
    command=STR,
    channel_id=STR,
    session_id=STR,
    status=one_of("pending", "completed", "expired", "cancelled"),
    conversation=opt(CONVERSATION),
    created_at=STR,
    expires_at=STR,
    completed_at=opt(STR),
)
REGISTRATION = obj(
    "FeishuRegistrationState",
    id=STR,
    status=one_of(
        "starting", "pending", "completing", "completed", "denied", "expired", "cancelled", "error"
    ),
    qr_code_url=opt(STR),
    expires_at=opt(STR),
    channel=opt(FEISHU_CHANNEL),
    error=opt(STR),
)
#: The Feishu-only desktops' `FeishuBotSettings` (`/settings/feishu-bot`, `/channels` then).
FEISHU_BOT = extend(FEISHU_CHANNEL, "FeishuBotSettings")  # the same fields
#: Foya's placeholder while there is no Feishu bot has `null` lists (Go nil slices); the view
#: reads them as `value.allowed_users ?? []`.
FEISHU_BOT_PLACEHOLDER = extend(
    FEISHU_BOT,
    "FeishuBotSettings",
    allowed_users=Nullable(ArrayOf(STR)),
    allowed_chats=Nullable(ArrayOf(STR)),
)


def channel_shape(channel: Any) -> Obj:
    """`MessagingChannelSettings` is a union discriminated by `kind`."""
    if isinstance(channel, dict) and channel.get("kind") == "telegram":
        return TELEGRAM_CHANNEL
    if isinstance(channel, dict) and not channel.get("app_id"):
        return UNCONFIGURED_FEISHU
    return FEISHU_CHANNEL


def assert_shape(shape: Obj | ArrayOf | Nullable, value: Any) -> None:
    problems = check(shape, value)
    assert not problems, problems


def assert_channel(value: Any) -> dict[str, Any]:
    assert_shape(channel_shape(value), value)
    assert "token" not in value and "app_secret" not in value  # write-only
    return dict(value)


def is_configured(channel: dict[str, Any]) -> bool:
    """`isConfiguredChannel` (src/lib/channelConnection.ts)."""
    if channel["kind"] == "feishu":
        return bool(channel.get("app_id") and channel["has_app_secret"])
    return bool(channel["has_token"])


def js(**fields: Any) -> dict[str, Any]:
    """An object literal as `JSON.stringify` writes it: `undefined` (None here) is left out."""
    return {key: value for key, value in fields.items() if value is not None}


def enc(part: str) -> str:
    """The host's `encode_query_component`."""
    return quote(part, safe="")


# ---------------------------------------------------------------------------------- harness


@dataclass
class Desktop:
    """The kernel, and a client that sends requests as the desktop's host does."""

    kernel: Kernel
    client: httpx.AsyncClient
    data_dir: Path

    @property
    def channels(self) -> Channels:
        return self.kernel.channels

    async def send(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """`kernel::request(method, path, Some(&body.to_string()))`, or `None`: an empty body,
        with `content-type: application/json` all the same."""
        content = b"" if body is None else compact(body)
        headers = {"content-type": JSON}
        return await self.client.request(method, path, content=content, headers=headers)

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        """A request that must succeed with `status`; its body as `JSON.parse` reads it (a
        command the host maps to `()` reads none)."""
        response = await self.send(method, path, body)
        assert response.status_code == status, (method, path, response.status_code, response.text)
        if status == 204:
            assert response.content == b""
            return None
        assert response.headers["content-type"].startswith("application/json")
        return response.json()

    async def error(self, method: str, path: str, body: Any, status: int, code: str) -> str:
        """A refusal as `localizeError` reads it: `{code, message}`; its message."""
        response = await self.send(method, path, body)
        assert response.status_code == status, (response.status_code, response.text)
        payload = response.json()
        assert_shape(ERROR, payload)
        assert payload["code"] == code, payload
        return str(payload["message"])

    async def session(self, approval_mode: str = "auto") -> dict[str, Any]:
        """A chat as the desktop holds it (`Session`); the dialog reads `id`, `approval_mode`,
        `connection_id`, `model`, `project_id`."""
        row = await self.ok("POST", "/sessions", {"approval_mode": approval_mode})
        return dict(row)

    def run(self, kind: ChannelKind, *failures: Exception) -> Connecting:
        """Channels of `kind` connect, as a reachable platform does, in a moment (after
        `failures`, one per start)."""
        runner = Connecting(failures=list(failures))
        self.channels.register_runner(kind, runner)
        return runner


@dataclass
class Connecting(Runner):
    """A runner whose start takes a round trip (Telegram's `getMe`, Feishu's token and long
    connection), not no time at all."""

    latency: float = 0.2

    async def start(self, channel: ChannelConfig, secrets: Secrets) -> None:
        await asyncio.sleep(self.latency)
        await super().start(channel, secrets)  # raises the next failure, if any


@contextlib.asynccontextmanager
async def desktop(data_dir: Path) -> AsyncIterator[Desktop]:
    original = vars(app.main)["Kernel"]
    setattr(app.main, "Kernel", NoPlatforms)  # noqa: B010
    try:
        service = app.main.create_app(Settings(data_dir=data_dir), token_sha256=sha256_hex(TOKEN))
    finally:
        setattr(app.main, "Kernel", original)  # noqa: B010
    await service.kernel.start()
    try:
        transport = httpx.ASGITransport(app=service.app)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://k", headers=auth
        ) as client:
            yield Desktop(service.kernel, client, data_dir)
    finally:
        await service.kernel.begin_shutdown()
        await service.kernel.close()


def named(run: Callable[[Path], None], test: Callable[..., Any]) -> Callable[[Path], None]:
    """`run` under `test`'s name and docstring (not `functools.wraps`: pytest would read the
    coroutine's parameters as fixtures)."""
    run.__name__, run.__qualname__, run.__doc__ = test.__name__, test.__qualname__, test.__doc__
    return run


def scenario(test: Callable[[Desktop], Awaitable[None]]) -> Callable[[Path], None]:
    """Run an async test against its own kernel and data directory."""

    def run(tmp_path: Path) -> None:
        async def body() -> None:
            async with desktop(tmp_path / "data") as d:
                await test(d)

        asyncio.run(body())

    return named(run, test)


def telegram_input(session: dict[str, Any], token: str = TG_TOKEN) -> dict[str, Any]:
    """`connectTelegram`'s `TelegramChannelUpdate` (the dialog's locale is the app's)."""
    return js(
        name="Telegram",
        locale="en-US",
        enabled=True,
        token=token,
        connection_id=session.get("connection_id") or None,
        model=session.get("model") or None,
        project_id=session.get("project_id") or None,
        approval_mode="full_access" if session.get("approval_mode") == "full_access" else "auto",
        allowed_users=[],
        allowed_chats=[],
        allow_all=False,
    )


def enable_input(channel: dict[str, Any]) -> dict[str, Any]:
    """`enableChannel`: the listed channel sent back with `enabled: true` and no secret (a
    Telegram one without `app_id`, neither with `kind`)."""
    fields: dict[str, Any] = {
        "name": channel["name"],
        "locale": channel["locale"],
        "enabled": True,
    }
    if channel["kind"] == "feishu":
        fields["app_id"] = channel.get("app_id")
    return js(
        **fields,
        connection_id=channel.get("connection_id"),
        model=channel.get("model"),
        project_id=channel.get("project_id"),
        approval_mode=channel["approval_mode"],
        allowed_users=channel["allowed_users"],
        allowed_chats=channel["allowed_chats"],
        allow_all=channel["allow_all"],
    )


def feishu_update(**extra: Any) -> dict[str, Any]:
    """`FeishuChannelSettings.vue`'s `buildUpdate()` (the secret only when typed)."""
    return js(
        **{
            "name": "Feishu Bot",
            "locale": "zh-CN",
            "enabled": True,
            "app_id": "cli_desk",
            "app_secret": APP_SECRET,
            "connection_id": None,
            "model": None,
            "project_id": None,
            "approval_mode": "auto",
            "allowed_users": ["ou_admin"],
            "allowed_chats": [],
            "allow_all": False,
            **extra,
        }
    )


# ------------------------------------------------------------------ list_channels, dialog


@scenario
async def test_list_channels_answers_an_array(d: Desktop) -> None:
    # list_channels: GET /channels → `(JSON.parse(r) as MessagingChannelSettings[]) ?? []`
    assert await d.ok("GET", "/channels") == []
    d.run("telegram")
    made = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input({})}, 201)
    listed = await d.ok("GET", "/channels")
    assert_shape(ArrayOf(TELEGRAM_CHANNEL), listed)
    assert [c["id"] for c in listed] == [made["id"]]


@scenario
async def test_opening_the_dialog_deletes_unconfigured_channels_and_enables_one(
    d: Desktop,
) -> None:
    """`loadData()`: list the channels and the chat's binding together, delete every channel
    `isConfiguredChannel` rejects, then enable the chosen platform's channel if it is off."""
    d.run("telegram")
    # What an older desktop or the legacy page left behind: no credentials.
    await d.ok("PUT", "/settings/feishu-bot", {"name": "Feishu Bot", "enabled": False})
    await d.ok("POST", "/channels", {"kind": "telegram", "name": "Empty", "enabled": False}, 201)
    ready = await d.ok(
        "POST", "/channels", {**telegram_input({}), "kind": "telegram", "enabled": False}, 201
    )
    chat = await d.session()

    listed = await d.ok("GET", "/channels")
    binding = await d.ok("GET", f"/sessions/{chat['id']}/channel-binding")
    assert binding is None  # `JSON.parse("null")`
    for channel in listed:
        assert_channel(channel)
    incomplete = [c for c in listed if not is_configured(c)]
    assert [c["name"] for c in incomplete] == ["Feishu Bot", "Empty"]
    assert "app_id" not in incomplete[0]  # Foya omits an empty app id; falsy for the desktop
    for channel in incomplete:
        await d.ok("DELETE", f"/channels/{channel['id']}", status=204)
    configured = [c for c in listed if is_configured(c)]
    assert [c["id"] for c in configured] == [ready["id"]]

    # `configuredChannels.find(item => item.enabled)?.kind ?? selectedKind` → still Feishu,
    # none: the user picks Telegram (`selectPlatform`), whose channel is off → `enableChannel`.
    enabled = assert_channel(await d.ok("PUT", f"/channels/{ready['id']}", enable_input(ready)))
    assert enabled["enabled"] is True and enabled["has_token"] is True
    # `upsertChannel(enabled)`: the dialog's `channelReady` (enabled and running) is read from
    # this answer, and offers "Generate pairing code" only then.
    assert enabled["status"] == "running"
    pairing = await d.ok(
        "POST", f"/sessions/{chat['id']}/channel-pairings", {"channel_id": ready["id"]}, 201
    )
    assert_shape(PAIRING, pairing)
    assert [c["id"] for c in await d.ok("GET", "/channels")] == [ready["id"]]


# --------------------------------------------------------------- create_channel, update_channel


@scenario
async def test_connect_telegram_creates_the_channel(d: Desktop) -> None:
    """`connectTelegram` with no Telegram channel yet: `createChannel({kind, ...input})`."""
    d.run("telegram")
    chat = await d.session("full_access")
    body = {"kind": "telegram", **telegram_input(chat)}
    saved = assert_channel(await d.ok("POST", "/channels", body, 201))
    assert saved["kind"] == "telegram"  # the dialog throws "Unexpected channel type" otherwise
    assert saved["has_token"] is True and saved["approval_mode"] == "full_access"
    assert saved["name"] == "Telegram" and saved["locale"] == "en-US"
    assert saved.get("connection_id") == (chat.get("connection_id") or None)
    assert saved["status"] == "running"  # Foya's answer says so: its bot starts in the call
    # `loadData("telegram")` then `startPairing(saved.id)`, straight away.
    listed = await d.ok("GET", "/channels")
    assert await d.ok("GET", f"/sessions/{chat['id']}/channel-binding") is None
    assert [c["status"] for c in listed] == ["running"]
    pairing = await d.ok(
        "POST", f"/sessions/{chat['id']}/channel-pairings", {"channel_id": saved["id"]}, 201
    )
    assert_shape(PAIRING, pairing)


@scenario
async def test_a_refused_token_answers_why(d: Desktop) -> None:
    """A token Telegram refuses: the answer says `error` and `last_error`, which the dialog
    shows under the token field (`platformChannel.last_error && !channelReady`); a pairing is
    refused with the same reason."""
    d.run("telegram", PlatformError("Unauthorized", permanent=True))
    chat = await d.session()
    saved = assert_channel(
        await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input(chat)}, 201)
    )
    assert saved["status"] == "error" and saved["last_error"] == "Unauthorized"
    url = f"/sessions/{chat['id']}/channel-pairings"
    message = await d.error("POST", url, {"channel_id": saved["id"]}, 409, "channel_pairing_failed")
    assert message == "messaging channel is unavailable: Unauthorized"


@scenario
async def test_reconnect_telegram_replaces_the_token(d: Desktop) -> None:
    """`connectTelegram` with a Telegram channel: `updateChannel(existing.id, input)`, no
    `kind`, the new token."""
    d.run("telegram")
    chat = await d.session()
    old = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input(chat)}, 201)
    body = telegram_input(chat, token="654321:another-token")
    saved = assert_channel(await d.ok("PUT", f"/channels/{old['id']}", body))
    assert saved["id"] == old["id"] and saved["kind"] == "telegram" and saved["has_token"]
    assert "654321:another-token" in (d.data_dir / "telegram-channels.json").read_text()


@scenario
async def test_save_a_feishu_bot_creates_then_updates_it(d: Desktop) -> None:
    """The settings page's `save()`: `createChannel({kind: "feishu", ...update})`, then
    `updateChannel(id, update)`."""
    d.run("feishu")
    created = assert_channel(
        await d.ok("POST", "/channels", {"kind": "feishu", **feishu_update()}, 201)
    )
    assert created["app_id"] == "cli_desk" and created["has_app_secret"] is True
    assert created["allowed_users"] == ["ou_admin"]
    # The Feishu-only desktops sent no `locale`.
    older = {k: v for k, v in feishu_update(app_id="cli_old").items() if k != "locale"}
    assert_channel(await d.ok("POST", "/channels", {"kind": "feishu", **older}, 201))
    renamed = feishu_update(name="Helper", model="m-1", allowed_chats=["oc_1"])
    updated = assert_channel(await d.ok("PUT", f"/channels/{created['id']}", renamed))
    assert updated["name"] == "Helper" and updated["model"] == "m-1"
    assert updated["allowed_chats"] == ["oc_1"]


@scenario
async def test_an_update_without_the_secret_keeps_it(d: Desktop) -> None:
    """Neither view sends a stored secret back: `enableChannel` never, `buildUpdate` only when
    typed. `has_token` / `has_app_secret` stay true and the secret stays stored."""
    d.run("telegram")
    d.run("feishu")
    chat = await d.session()
    tg = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input(chat)}, 201)
    fs = await d.ok("POST", "/channels", {"kind": "feishu", **feishu_update()}, 201)

    tg_put = assert_channel(await d.ok("PUT", f"/channels/{tg['id']}", enable_input(tg)))
    no_secret = {k: v for k, v in feishu_update(name="Renamed").items() if k != "app_secret"}
    fs_put = assert_channel(await d.ok("PUT", f"/channels/{fs['id']}", no_secret))
    assert tg_put["has_token"] is True and fs_put["has_app_secret"] is True
    assert fs_put["name"] == "Renamed"
    assert TG_TOKEN in (d.data_dir / "telegram-channels.json").read_text()
    assert APP_SECRET in (d.data_dir / "feishu-channels.json").read_text()
    # And the list the dialog reads still counts them configured.
    assert all(is_configured(c) for c in await d.ok("GET", "/channels"))


@scenario
async def test_disable_and_enable_a_channel(d: Desktop) -> None:
    """The settings page's checkbox, saved: `enabled` false stops it, true starts it again."""
    runner = d.run("feishu")
    fs = await d.ok("POST", "/channels", {"kind": "feishu", **feishu_update()}, 201)
    assert fs["status"] == "running"
    off_body = {k: v for k, v in feishu_update(enabled=False).items() if k != "app_secret"}
    off = assert_channel(await d.ok("PUT", f"/channels/{fs['id']}", off_body))
    assert off["enabled"] is False and off["status"] == "stopped" and off["has_app_secret"]
    assert runner.stopped == [fs["id"]]
    on = assert_channel(await d.ok("PUT", f"/channels/{fs['id']}", enable_input(off)))
    assert on["enabled"] is True and on["status"] == "running"
    assert runner.started == [fs["id"], fs["id"]]


# ------------------------------------------------------------------------------ delete_channel


@scenario
async def test_delete_a_channel(d: Desktop) -> None:
    """`deleteChannel`: DELETE, no body read; a second one is an error the dialog ignores."""
    tg = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input({})}, 201)
    await d.ok("DELETE", f"/channels/{tg['id']}", status=204)
    assert await d.ok("GET", "/channels") == []
    await d.error("DELETE", f"/channels/{tg['id']}", None, 404, "channel_not_found")


# ------------------------------------------------------------------ pairings and the binding


@scenario
async def test_pair_a_chat_then_read_and_unbind_it(d: Desktop) -> None:
    """`startPairing` → `start_session_channel_pairing` (`{"channel_id"}` built by the host),
    polled with `get_channel_pairing` until `completed`, whose `conversation` becomes the
    current binding; then `get_session_channel_binding` and `unbind_session_channel`."""
    d.run("telegram")
    chat = await d.session()
    tg = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input(chat)}, 201)
    pairing = await d.ok(
        "POST", f"/sessions/{chat['id']}/channel-pairings", {"channel_id": tg["id"]}, 201
    )
    assert_shape(PAIRING, pairing)
    assert pairing["status"] == "pending" and pairing["command"] == f"/bind {pairing['code']}"
    assert pairing["channel_id"] == tg["id"] and pairing["session_id"] == chat["id"]
    polled = await d.ok("GET", f"/channel-pairings/{enc(pairing['id'])}")
    assert_shape(PAIRING, polled)
    assert polled["status"] == "pending"

    # Someone sends `/bind CODE` in a Telegram group.
    await d.channels.pair(pairing["code"], tg["id"], "-100", "Team", kind="supergroup")
    done = await d.ok("GET", f"/channel-pairings/{enc(pairing['id'])}")
    assert_shape(PAIRING, done)
    assert done["status"] == "completed" and "completed_at" in done
    conversation = done["conversation"]
    assert conversation["channel_id"] == tg["id"] and conversation["kind"] == "supergroup"
    assert conversation["display_name"] == "Team"

    binding = await d.ok("GET", f"/sessions/{chat['id']}/channel-binding")
    assert_shape(CONVERSATION, binding)
    assert binding["channel_id"] == tg["id"] and binding["active_session_id"] == chat["id"]
    await d.ok("DELETE", f"/sessions/{chat['id']}/channel-binding", status=204)
    assert await d.ok("GET", f"/sessions/{chat['id']}/channel-binding") is None


@scenario
async def test_cancel_a_pairing(d: Desktop) -> None:
    """`cancelPairing`: DELETE while `pending` (closing the dialog, another code, another
    platform); a newer pairing of the chat cancels the older one too."""
    d.run("telegram")
    chat = await d.session()
    tg = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input(chat)}, 201)
    url = f"/sessions/{chat['id']}/channel-pairings"
    first = await d.ok("POST", url, {"channel_id": tg["id"]}, 201)
    await d.ok("DELETE", f"/channel-pairings/{enc(first['id'])}", status=204)
    cancelled = await d.ok("GET", f"/channel-pairings/{enc(first['id'])}")
    assert_shape(PAIRING, cancelled)
    assert cancelled["status"] == "cancelled"
    second = await d.ok("POST", url, {"channel_id": tg["id"]}, 201)
    third = await d.ok("POST", url, {"channel_id": tg["id"]}, 201)
    assert (await d.ok("GET", f"/channel-pairings/{second['id']}"))["status"] == "cancelled"
    assert (await d.ok("GET", f"/channel-pairings/{third['id']}"))["status"] == "pending"


@scenario
async def test_pairing_refusals_read_as_errors(d: Desktop) -> None:
    """The dialog shows `String(cause)`: each refusal is `{code, message}` (the desktop also
    disables pairing for a manual chat, `canPair`)."""
    d.run("telegram")
    manual = await d.session("manual")
    tg = await d.ok("POST", "/channels", {"kind": "telegram", **telegram_input(manual)}, 201)
    url = f"/sessions/{manual['id']}/channel-pairings"
    await d.error("POST", url, {"channel_id": tg["id"]}, 409, "interactive_session")
    off = await d.ok("POST", "/channels", {"kind": "telegram", "enabled": False}, 201)
    auto = await d.session()
    url = f"/sessions/{auto['id']}/channel-pairings"
    await d.error("POST", url, {"channel_id": off["id"]}, 409, "channel_pairing_failed")
    await d.error("GET", "/channel-pairings/nope", None, 404, "channel_pairing_not_found")


# ----------------------------------------------------------------- Feishu QR registrations


def scanned(test: Callable[[Desktop, FakeFeishu], Awaitable[None]]) -> Callable[[Path], None]:
    """Run an async test with the kernel's registrar pointed at a fake Feishu."""

    def run(tmp_path: Path) -> None:
        with FakeFeishu.running() as fake:
            fake.begin = {
                "device_code": "dc-1",
                "verification_uri_complete": "https://open.feishu.cn/page/register?code=UC1",
                "user_code": "UC1",
                "interval": 0.05,
                "expire_in": 600,
            }

            async def body() -> None:
                async with desktop(tmp_path / "data") as d:
                    registrar = FeishuRegistrar(
                        d.channels.complete_registration,
                        accounts_url=fake.url,
                        lark_accounts_url=fake.url + "/lark",
                    )
                    d.channels.register_registrar(registrar)
                    try:
                        await test(d, fake)
                    finally:
                        await registrar.close()

            asyncio.run(body())

    return named(run, test)


def registration_input(session: dict[str, Any]) -> dict[str, Any]:
    """`connectFeishu`'s `FeishuRegistrationInput`."""
    return js(
        name="Feishu",
        locale="zh-CN",
        connection_id=session.get("connection_id") or None,
        model=session.get("model") or None,
        project_id=session.get("project_id") or None,
        approval_mode="auto",
        allowed_users=[],
        allowed_chats=[],
        allow_all=False,
    )


async def poll_until(d: Desktop, registration_id: str, *statuses: str) -> dict[str, Any]:
    """`pollRegistration`, every few milliseconds rather than 800."""
    path = f"/channels/feishu/registrations/{enc(registration_id)}"
    for _ in range(500):
        state = await d.ok("GET", path)
        assert_shape(REGISTRATION, state)
        if state["status"] in statuses:
            return dict(state)
        await asyncio.sleep(0.01)
    raise AssertionError(f"registration never reached {statuses}: {state}")


@scanned
async def test_connect_feishu_by_scanning(d: Desktop, fake: FakeFeishu) -> None:
    """`connectFeishu`: begin (202), poll while `starting`/`pending`/`completing` (the QR from
    `qr_code_url`), and on `completed` take `channel`, reload, pair with it."""
    d.run("feishu")
    chat = await d.session()
    started = await d.ok(
        "POST", "/channels/feishu/registrations", registration_input(chat), status=202
    )
    assert_shape(REGISTRATION, started)
    assert started["status"] == "starting"
    pending = await poll_until(d, started["id"], "pending")
    assert pending["qr_code_url"].startswith("https://open.feishu.cn/page/register?code=UC1")
    assert "expires_at" in pending

    grant = {
        "client_id": "cli_scanned",
        "client_secret": "scanned-secret",
        "user_info": {"open_id": "ou_scanner", "tenant_brand": "feishu"},
    }
    fake.polls.append((200, grant))
    done = await poll_until(d, started["id"], "completed", "error")
    assert done["status"] == "completed", done
    channel = done["channel"]
    assert channel["app_id"] == "cli_scanned" and channel["has_app_secret"] is True
    assert channel["allowed_users"] == ["ou_scanner"] and channel["enabled"] is True
    assert "qr_code_url" not in done

    assert channel["status"] == "running"
    # `loadData("feishu")` then `startPairing(next.channel.id)`.
    listed = await d.ok("GET", "/channels")
    assert [c["id"] for c in listed if is_configured(c)] == [channel["id"]]
    pairing = await d.ok(
        "POST", f"/sessions/{chat['id']}/channel-pairings", {"channel_id": channel["id"]}, 201
    )
    assert_shape(PAIRING, pairing)


@scanned
async def test_cancel_a_feishu_registration(d: Desktop, fake: FakeFeishu) -> None:
    """`cancelRegistration`: DELETE while `starting` or `pending`; later polls say
    `cancelled`. An unknown one is an error the desktop swallows (`.catch`)."""
    chat = await d.session()
    started = await d.ok(
        "POST", "/channels/feishu/registrations", registration_input(chat), status=202
    )
    await poll_until(d, started["id"], "pending")
    await d.ok("DELETE", f"/channels/feishu/registrations/{enc(started['id'])}", status=204)
    cancelled = await poll_until(d, started["id"], "cancelled")
    assert "qr_code_url" not in cancelled
    path = "/channels/feishu/registrations/feishu-registration-0000000000000000"
    await d.error("DELETE", path, None, 404, "feishu_registration_not_found")
    await d.error("GET", path, None, 404, "feishu_registration_not_found")


# ------------------------------------------------------------------ legacy /settings/feishu-bot


@scenario
async def test_the_legacy_feishu_bot_settings(d: Desktop) -> None:
    """`get_feishu_bot_settings` / `update_feishu_bot_settings` of the Feishu-only desktops:
    the first Feishu channel, its `FeishuBotUpdate` body (no `kind`, no `locale` in the oldest
    ones)."""
    placeholder = await d.ok("GET", "/settings/feishu-bot")
    assert_shape(FEISHU_BOT_PLACEHOLDER, placeholder)
    update = {k: v for k, v in feishu_update(name="飞书 Bot").items() if k != "locale"}
    saved = await d.ok("PUT", "/settings/feishu-bot", update)
    assert_shape(FEISHU_BOT, saved)
    assert saved["name"] == "飞书 Bot" and saved["has_app_secret"] is True
    assert saved["app_id"] == "cli_desk" and "app_secret" not in saved
    without_secret = {k: v for k, v in update.items() if k != "app_secret"}
    again = await d.ok("PUT", "/settings/feishu-bot", {**without_secret, "enabled": False})
    assert_shape(FEISHU_BOT, again)
    assert again["id"] == saved["id"] and again["has_app_secret"] is True
    assert await d.ok("GET", "/settings/feishu-bot") == again
    listed = await d.ok("GET", "/channels")
    assert [c["id"] for c in listed] == [saved["id"]]
    assert_shape(ArrayOf(FEISHU_BOT), listed)  # what those desktops cast `/channels` to
