"""`FeishuRegistrar`: Feishu's "create a bot by scanning" device flow (the `Registrar` of
`app.kernel.channels.registration`), reimplemented from the SDK's `scene/registration`.

Upstream (`POST {accounts}/oauth/v1/app/registration`, form-encoded; errors may come with HTTP
400 and an OAuth `error`): `action=begin` answers `{device_code, verification_uri_complete,
interval (5), expire_in (600)}`; the QR URL is that URI plus `from`, `tp`, `source`, `name`,
`desc` and `addons` (gzip+base64url of the scopes and events the bot needs); `action=poll`
is repeated, at once and then every `interval` s within `expire_in` s: `authorization_pending`
keeps polling, `slow_down` adds 5 s, `access_denied` is `denied`, `expired_token` (or the
deadline) `expired`, `{client_id, client_secret, user_info: {open_id, tenant_brand}}` the
credentials. A `tenant_brand` of `lark` on the Feishu host switches polling to the Lark host
once; a tenant of the other brand than the kernel's is refused (`unsupported_account`).

With the credentials (`completing`) the scanner's `open_id` joins the input's
`allowed_users`, and `complete` (the channel service: create, or update the channel of the
same app id) gives the channel, and an error if it was saved but did not start.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.kernel.channels.errors import NOT_EXIST, RegistrationNotFound
from app.kernel.channels.feishu.api import Transport, http_client
from app.kernel.channels.records import ChannelWire, cleaned
from app.kernel.channels.registration import (
    FeishuRegistrationState,
    RegistrationInput,
    RegistrationStatus,
)

ENDPOINT = "/oauth/v1/app/registration"
FEISHU_ACCOUNTS = "https://accounts.feishu.cn"
LARK_ACCOUNTS = "https://accounts.larksuite.com"
_KEEP = 3600.0  # finished registrations are dropped this long after, when the next begins
_ADDONS = {
    "preset": False,
    "scopes": {
        "tenant": [
            "application:bot.basic_info:read",
            "im:message:send_as_bot",
            "im:message.group_at_msg:readonly",
            "im:message.p2p_msg:readonly",
            "im:message.reactions:write_only",
            "im:resource",
        ]
    },
    "events": {"items": {"tenant": ["im.message.receive_v1"]}},
    # Not in Foya's (it sent no cards): our buttons come back as this callback.
    "callbacks": {"items": ["card.action.trigger"]},
}
_TEXTS = {
    "app_description": (
        "通过 Foya 桌面端运行的飞书智能助手",
        "A Feishu assistant powered by the Foya desktop app",
    ),
    "missing_credentials": ("飞书未返回应用凭证", "Feishu did not return application credentials"),
    "unsupported_account": ("当前仅支持飞书账号", "Only Feishu accounts are currently supported"),
}


@dataclass(frozen=True)
class FeishuCredentials:
    """What a finished scan gives: the new app's id and secret, and who scanned."""

    app_id: str
    app_secret: str = field(repr=False)
    open_id: str
    tenant_brand: str


#: Creates (or updates) the channel: the channel, and an error text if it did not start.
Complete = Callable[[RegistrationInput, FeishuCredentials], Awaitable[tuple[ChannelWire, str]]]


def accounts_url_for(api_url: str) -> str:
    """The accounts host beside an OpenAPI host (`open.x` → `accounts.x`)."""
    parts = urlsplit(api_url.rstrip("/"))
    host = parts.hostname or ""
    if host.startswith("open."):
        return urlunsplit((parts.scheme, "accounts." + host[5:], "", "", ""))
    return api_url.rstrip("/")


@dataclass
class _Registration:
    id: str
    status: RegistrationStatus = "starting"
    qr_code_url: str = ""
    expires_at: str = ""
    channel: ChannelWire | None = None
    error: str = ""
    updated: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None

    def set(self, status: RegistrationStatus, error: str = "") -> None:
        self.status, self.error, self.updated = status, error, time.monotonic()
        if status != "pending":
            self.qr_code_url = ""

    def wire(self) -> FeishuRegistrationState:
        out = FeishuRegistrationState(id=self.id, status=self.status)
        if self.qr_code_url:
            out["qr_code_url"] = self.qr_code_url
        if self.expires_at:
            out["expires_at"] = self.expires_at
        if self.channel is not None:
            out["channel"] = self.channel
        if self.error:
            out["error"] = self.error
        return out


class _Ended(Exception):
    def __init__(self, status: RegistrationStatus, error: str = "") -> None:
        super().__init__(error)
        self.status, self.error = status, error


class FeishuRegistrar:
    """The QR registrations of one kernel, in memory."""

    def __init__(
        self,
        complete: Complete,
        *,
        accounts_url: str = FEISHU_ACCOUNTS,
        lark_accounts_url: str = LARK_ACCOUNTS,
        transport: Transport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._complete = complete
        self._base, self._lark = accounts_url.rstrip("/"), lark_accounts_url.rstrip("/")
        self._brand = "lark" if "larksuite" in self._base else "feishu"
        self._client = http_client(timeout=15.0, transport=transport)
        self._clock = clock
        self._all: dict[str, _Registration] = {}

    async def begin(self, given: RegistrationInput) -> FeishuRegistrationState:
        now = time.monotonic()
        for key, old in list(self._all.items()):
            if old.task is not None and old.task.done() and now - old.updated >= _KEEP:
                del self._all[key]
        reg = _Registration(id="feishu-registration-" + secrets.token_hex(8))
        self._all[reg.id] = reg
        reg.task = asyncio.create_task(self._run(reg, given), name=reg.id)
        return reg.wire()

    async def poll(self, registration_id: str) -> FeishuRegistrationState:
        reg = self._all.get(registration_id)
        if reg is None:
            raise RegistrationNotFound("registration not found")
        return reg.wire()

    async def cancel(self, registration_id: str) -> None:
        reg = self._all.get(registration_id)
        if reg is None:
            raise RegistrationNotFound(f'{NOT_EXIST}: Feishu registration "{registration_id}"')
        if reg.status in ("starting", "pending"):
            reg.set("cancelled")
            if reg.task is not None:
                reg.task.cancel()

    async def close(self) -> None:
        """Cancel the running registrations (shutdown) and release the HTTP client."""
        tasks = [r.task for r in self._all.values() if r.task is not None]
        for reg in self._all.values():
            if reg.status in ("starting", "pending"):
                reg.set("cancelled")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.aclose()

    async def _run(self, reg: _Registration, given: RegistrationInput) -> None:
        try:
            credentials = await self._scan(reg, given)
            zh = given.locale != "en-US"
            if not credentials.app_id or not credentials.app_secret:
                raise _Ended("error", _TEXTS["missing_credentials"][0 if zh else 1])
            brand = credentials.tenant_brand
            if brand and brand != self._brand:
                raise _Ended("error", _TEXTS["unsupported_account"][0 if zh else 1])
            if reg.status == "cancelled":
                return
            reg.set("completing")
            users = cleaned((*given.allowed_users, credentials.open_id))
            try:
                channel, error = await self._complete(
                    replace(given, allowed_users=users), credentials
                )
            except Exception as exc:
                raise _Ended("error", str(exc) or type(exc).__name__) from None
            reg.channel = channel
            reg.set("completed", error)
        except _Ended as end:
            if reg.status != "cancelled":
                reg.set(end.status, end.error)
        except Exception as exc:  # a network failure, or an answer of an unexpected shape
            if reg.status != "cancelled":
                reg.set("error", f"Feishu registration: {type(exc).__name__}")

    async def _scan(self, reg: _Registration, given: RegistrationInput) -> FeishuCredentials:
        base = self._base
        begun = await self._post(
            base,
            {
                "action": "begin",
                "archetype": "PersonalAgent",
                "auth_method": "client_secret",
                "request_user_info": "open_id",
            },
        )
        code, uri = str(begun.get("device_code") or ""), begun.get("verification_uri_complete")
        if not code or not isinstance(uri, str) or not uri:
            raise _Ended("error", "invalid_response")
        interval = _number(begun.get("interval"), 5.0)
        expire_in = _number(begun.get("expire_in", begun.get("expires_in")), 600.0)
        expires = datetime.fromtimestamp(int(self._clock() + expire_in), UTC)
        reg.expires_at = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
        reg.qr_code_url = _qr_url(uri, given)
        reg.set("pending")
        deadline, switched = time.monotonic() + expire_in, False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Ended("expired")
            polled = await self._post(base, {"action": "poll", "device_code": code})
            info = polled.get("user_info") if isinstance(polled.get("user_info"), dict) else {}
            assert isinstance(info, dict)
            if polled.get("client_id") or polled.get("client_secret"):
                return FeishuCredentials(
                    app_id=str(polled.get("client_id") or ""),
                    app_secret=str(polled.get("client_secret") or ""),
                    open_id=str(info.get("open_id") or ""),
                    tenant_brand=str(info.get("tenant_brand") or ""),
                )
            if info.get("tenant_brand") == "lark" and not switched and base != self._lark:
                base, switched = self._lark, True
                continue
            error = str(polled.get("error") or "")
            if error == "slow_down":
                interval += 5.0
            elif error == "access_denied":
                raise _Ended("denied")
            elif error == "expired_token":
                raise _Ended("expired")
            elif error not in ("", "authorization_pending"):
                described = str(polled.get("error_description") or "")
                raise _Ended("error", f"{error}: {described}" if described else error)
            await asyncio.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))

    async def _post(self, base: str, form: dict[str, str]) -> dict[str, Any]:
        response = await self._client.post(base + ENDPOINT, data=form)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise _Ended("error", f"Feishu registration: HTTP {response.status_code}")
        return body


def _qr_url(uri: str, given: RegistrationInput) -> str:
    parts = urlsplit(uri)
    zh = given.locale != "en-US"
    payload = json.dumps(_ADDONS, ensure_ascii=False, separators=(",", ":")).encode()
    addons = base64.urlsafe_b64encode(gzip.compress(payload, mtime=0)).decode().rstrip("=")
    query = [
        *parse_qsl(parts.query, keep_blank_values=True),
        ("from", "sdk"),
        ("tp", "sdk"),
        ("source", "python-sdk/foya"),
        ("name", given.name or "Feishu"),
        ("desc", _TEXTS["app_description"][0 if zh else 1]),
        ("addons", addons),
    ]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, int | float) and value > 0 else default
