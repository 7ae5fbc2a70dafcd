"""A channel as a record, as a client sends it, and as clients read it (Foya's
`channelhub.UpdateInput` and `State`).

Normalisation (on every create, update and load): text fields trimmed; a locale other than
`en-US` or `zh-CN` becomes `zh-CN`; an empty approval mode `auto`; allow-lists trimmed, emptied
entries and repeats dropped, first-seen order kept (Telegram also strips one leading `@`).
Validation: the approval mode is `auto` or `full_access`; an enabled Telegram channel needs its
token, an enabled Feishu channel its app id and secret; a disabled one needs nothing. An
enabled channel with no allow-list and `allow_all` false is valid ("pairing-only").

The wire never holds a secret: `has_token` and `has_app_secret` (both always present, also on
the other kind) say whether one is stored.
"""

from __future__ import annotations

import secrets as random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, NotRequired, cast

from typing_extensions import TypedDict

from app.kernel.channels.redaction import MASK

ChannelKind = Literal["feishu", "telegram"]
#: Listing order: Foya's hub walks its providers in sorted kind order.
KINDS: tuple[ChannelKind, ...] = ("feishu", "telegram")
ChannelStatus = Literal["stopped", "running", "error"]
LOCALES = ("zh-CN", "en-US")
APPROVAL_MODES = ("auto", "full_access")
LABELS: dict[ChannelKind, str] = {"feishu": "Feishu", "telegram": "Telegram"}
_DEFAULT_NAME: dict[ChannelKind, str] = {"feishu": "Feishu Bot", "telegram": "Telegram"}


@dataclass(frozen=True)
class ChannelInput:
    """What a client sends (absent fields are their zero values, as Go decodes them)."""

    kind: str = ""
    name: str = ""
    locale: str = ""
    enabled: bool = False
    app_id: str = ""
    app_secret: str = ""
    token: str = ""
    connection_id: str = ""
    model: str = ""
    project_id: str = ""
    approval_mode: str = ""
    allowed_users: tuple[str, ...] = ()
    allowed_chats: tuple[str, ...] = ()
    allow_all: bool = False


@dataclass(frozen=True)
class Secrets:
    """A channel's credentials: the Telegram bot token, the Feishu app secret. Never shown."""

    token: str = field(default="", repr=False)
    app_secret: str = field(default="", repr=False)

    def hide(self, text: str) -> str:
        """`text` with every secret replaced (error texts may quote a URL holding one)."""
        for secret in (self.token, self.app_secret):
            if secret:
                text = text.replace(secret, MASK)
        return text


@dataclass(frozen=True)
class ChannelConfig:
    """One channel's settings, normalised; its secrets are kept apart (`Secrets`)."""

    id: str
    kind: ChannelKind
    name: str
    locale: str = "zh-CN"
    enabled: bool = False
    app_id: str = ""
    connection_id: str = ""
    model: str = ""
    project_id: str = ""
    approval_mode: str = "auto"
    allowed_users: tuple[str, ...] = ()
    allowed_chats: tuple[str, ...] = ()
    allow_all: bool = False


class ChannelWire(TypedDict):
    """A channel as clients read it (Foya's `channelhub.State`); empty optionals omitted."""

    id: str
    kind: str
    name: str
    locale: str
    enabled: bool
    app_id: NotRequired[str]
    has_app_secret: bool
    has_token: bool
    connection_id: NotRequired[str]
    model: NotRequired[str]
    project_id: NotRequired[str]
    approval_mode: str
    allowed_users: list[str]
    allowed_chats: list[str]
    allow_all: bool
    status: str
    last_error: NotRequired[str]


class FeishuBotWire(TypedDict):
    """The legacy `/settings/feishu-bot` answer (Foya's Feishu-only `feishu.State`): `app_id`
    always present, no `has_token`; its placeholder's lists are `null`."""

    id: str
    kind: str
    name: str
    locale: str
    enabled: bool
    app_id: str
    has_app_secret: bool
    connection_id: NotRequired[str]
    model: NotRequired[str]
    project_id: NotRequired[str]
    approval_mode: str
    allowed_users: list[str] | None
    allowed_chats: list[str] | None
    allow_all: bool
    status: str
    last_error: NotRequired[str]


def wire(
    config: ChannelConfig, secrets: Secrets, status: ChannelStatus, last_error: str
) -> ChannelWire:
    """The channel as clients read it, in Foya's field order (Go's declaration order)."""
    out: dict[str, object] = {
        "id": config.id,
        "kind": config.kind,
        "name": config.name,
        "locale": config.locale,
        "enabled": config.enabled,
    }
    if config.app_id:
        out["app_id"] = config.app_id
    out["has_app_secret"] = bool(secrets.app_secret)
    out["has_token"] = bool(secrets.token)
    for key in ("connection_id", "model", "project_id"):
        if value := getattr(config, key):
            out[key] = value
    out["approval_mode"] = config.approval_mode
    out["allowed_users"] = list(config.allowed_users)
    out["allowed_chats"] = list(config.allowed_chats)
    out["allow_all"] = config.allow_all
    out["status"] = status
    if last_error:
        out["last_error"] = last_error
    return cast(ChannelWire, out)


def new_id(kind: ChannelKind) -> str:
    return f"{kind}-{random.token_hex(8)}"


def kind_of(text: str) -> ChannelKind | None:
    for kind in KINDS:
        if text == kind:
            return kind
    return None


def default_name(kind: ChannelKind, existing: int) -> str:
    """`Telegram N` / `Feishu Bot N`, N one more than the channels of that kind."""
    return f"{_DEFAULT_NAME[kind]} {existing + 1}"


def cleaned(entries: Iterable[str], *, strip_at: bool = False) -> tuple[str, ...]:
    """Trimmed, empty entries and repeats dropped, in first-seen order."""
    out: dict[str, None] = {}
    for entry in entries:
        entry = entry.strip()
        if strip_at:
            entry = entry.removeprefix("@")
        if entry:
            out.setdefault(entry)
    return tuple(out)


def normalised(
    channel_id: str, kind: ChannelKind, given: ChannelInput
) -> tuple[ChannelConfig, Secrets]:
    """`given` as a record of `kind` (the other kind's fields dropped); not yet validated."""
    telegram = kind == "telegram"
    locale = given.locale.strip()
    config = ChannelConfig(
        id=channel_id.strip(),
        kind=kind,
        name=given.name.strip(),
        locale=locale if locale in LOCALES else "zh-CN",
        enabled=given.enabled,
        app_id="" if telegram else given.app_id.strip(),
        connection_id=given.connection_id.strip(),
        model=given.model.strip(),
        project_id=given.project_id.strip(),
        approval_mode=given.approval_mode.strip() or "auto",
        allowed_users=cleaned(given.allowed_users, strip_at=telegram),
        allowed_chats=cleaned(given.allowed_chats, strip_at=telegram),
        allow_all=given.allow_all,
    )
    token, secret = given.token.strip(), given.app_secret.strip()
    return config, Secrets(token if telegram else "", "" if telegram else secret)


def problem(config: ChannelConfig, secrets: Secrets) -> str | None:
    """What is wrong with a normalised channel, in Foya's words; None if nothing."""
    label = LABELS[config.kind]
    if config.approval_mode not in APPROVAL_MODES:
        return f"{label} channel approval mode must be auto or full_access"
    if not config.enabled:
        return None
    if config.kind == "telegram":
        return None if secrets.token else "Telegram bot token is required"
    if not config.app_id:
        return "Feishu app ID is required"
    return None if secrets.app_secret else "Feishu app secret is required"
