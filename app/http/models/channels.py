"""Request bodies of the channel routes (Foya's `channelhub.UpdateInput`,
`FeishuRegistrationInput` and the pairing request).

Every body is decoded as Foya's handlers decode them, with `DisallowUnknownFields`: an unknown
field is 400 `bad_request`. An absent field (or `null`) is its zero value: `enabled` false, an
empty allow-list, `approval_mode` `auto`. The values are checked by the kernel (400
`channel_create_failed` / `channel_update_failed` / `feishu_registration_failed`). `token` and
`app_secret` are write-only: reads say `has_token` and `has_app_secret`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from app.http.models.common import Strict, one_of
from app.kernel.api import ChannelInput, RegistrationInput

ApprovalMode = Annotated[str | None, one_of("auto", "full_access")]
Locale = Annotated[str | None, one_of("zh-CN", "en-US")]
Secret = Annotated[
    str | None, Field(description="Write-only; blank keeps the stored one on a `PUT`.")
]


class _Settings(Strict):
    """The settings every channel has."""

    name: str | None = None
    locale: Locale = None
    connection_id: str | None = None
    model: str | None = None
    project_id: str | None = None
    approval_mode: ApprovalMode = None
    allowed_users: list[str] | None = None
    allowed_chats: list[str] | None = None
    allow_all: bool | None = None

    def _given(self) -> dict[str, Any]:
        out = {k: v for k, v in self.model_dump().items() if v is not None}
        for key in ("allowed_users", "allowed_chats"):
            if key in out:
                out[key] = tuple(out[key])
        return out


class FeishuBotBody(_Settings):
    """The legacy `PUT /settings/feishu-bot`: a Feishu channel's settings (no `kind`)."""

    enabled: bool | None = None
    app_id: str | None = None
    app_secret: Secret = None

    def input(self) -> ChannelInput:
        return ChannelInput(**self._given())


class ChannelBody(FeishuBotBody):
    """A channel's settings; `kind` is needed to create one, and cannot change."""

    kind: Annotated[str | None, one_of("feishu", "telegram")] = None
    token: Secret = None


class RegistrationBody(_Settings):
    """The Feishu channel a QR registration creates (its name defaults to `Feishu`)."""

    def input(self) -> RegistrationInput:
        return RegistrationInput(**self._given())


class PairingBody(Strict):
    """Which channel a session's pairing is for."""

    channel_id: str
