"""Creating a Feishu bot by scanning a QR code: the port its upstream client fits, and the
wire shapes of `/channels/feishu/registrations` (Foya's `FeishuRegistrationInput`/`State`).

A `Registrar` (written in `feishu/`, registered with `Channels.register_registrar`) runs
Feishu's device flow: `begin` answers at once (`starting`); the QR URL comes (`pending`), the
user scans it, the credentials come (`completing`), and the channel is created or updated
(`completed`, with `channel`; an `error` may come with it when the channel was saved but did
not start). Or it ends `denied`, `expired`, `cancelled` (by `cancel`, only from `starting` or
`pending`; otherwise a no-op) or `error`. Finished registrations are kept an hour.

The input is normalised here, before a registrar sees it: the name trimmed (empty: `Feishu`),
the locale and lists as a channel's, an empty approval mode `auto`, which must be `auto` or
`full_access`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NotRequired, Protocol

from typing_extensions import TypedDict

from app.kernel.channels.errors import RegistrationFailed
from app.kernel.channels.records import APPROVAL_MODES, LOCALES, ChannelWire, cleaned

RegistrationStatus = Literal[
    "starting", "pending", "completing", "completed", "denied", "expired", "cancelled", "error"
]


@dataclass(frozen=True)
class RegistrationInput:
    """The settings of the Feishu channel a registration creates (Foya's
    `FeishuRegistrationInput`)."""

    name: str = ""
    locale: str = ""
    connection_id: str = ""
    model: str = ""
    project_id: str = ""
    approval_mode: str = ""
    allowed_users: tuple[str, ...] = ()
    allowed_chats: tuple[str, ...] = ()
    allow_all: bool = False


class FeishuRegistrationState(TypedDict):
    """A registration as clients read it; `qr_code_url` only while `pending`, `expires_at`
    (RFC 3339, UTC, whole seconds) once the QR came, `channel` once `completed`."""

    id: str
    status: RegistrationStatus
    qr_code_url: NotRequired[str]
    expires_at: NotRequired[str]
    channel: NotRequired[ChannelWire]
    error: NotRequired[str]


class Credentials(Protocol):
    """What a finished scan gives (`feishu.registration.FeishuCredentials` fits it)."""

    @property
    def app_id(self) -> str: ...
    @property
    def app_secret(self) -> str: ...
    @property
    def open_id(self) -> str: ...


class Registrar(Protocol):
    """Runs Feishu's QR registrations (ids `feishu-registration-<16 hex>`)."""

    async def begin(self, given: RegistrationInput) -> FeishuRegistrationState:
        """Start one (normalised and valid input); answers at once, normally `starting`."""
        ...

    async def poll(self, registration_id: str) -> FeishuRegistrationState:
        """Its state now; `RegistrationNotFound` ("registration not found") if unknown."""
        ...

    async def cancel(self, registration_id: str) -> None:
        """Cancel it if `starting` or `pending`, else nothing; `RegistrationNotFound` if
        unknown."""
        ...


def normalised(given: RegistrationInput) -> RegistrationInput:
    """`given` normalised; `RegistrationFailed` if its approval mode is neither allowed."""
    locale = given.locale.strip()
    mode = given.approval_mode.strip() or "auto"
    if mode not in APPROVAL_MODES:
        raise RegistrationFailed("Feishu channel approval mode must be auto or full_access")
    return RegistrationInput(
        name=given.name.strip() or "Feishu",
        locale=locale if locale in LOCALES else "zh-CN",
        connection_id=given.connection_id.strip(),
        model=given.model.strip(),
        project_id=given.project_id.strip(),
        approval_mode=mode,
        allowed_users=cleaned(given.allowed_users),
        allowed_chats=cleaned(given.allowed_chats),
        allow_all=given.allow_all,
    )
