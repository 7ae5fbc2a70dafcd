"""Messaging channels (Foya's `/channels`, the session's channel binding and pairings, and the
legacy `/settings/feishu-bot`).

Answers are Foya's `Channel`, `ConversationBinding` (or `null`), `ConversationPairing` and
`FeishuRegistrationState`; errors: app.kernel.channels.errors. The literal
`/channels/feishu/registrations…` routes come before `/channels/{channel_id}` (so `GET
/channels/feishu` is a channel id, `channel_not_found`). `/settings/feishu-bot` is what Foya's
Feishu-only versions served, a view onto the first Feishu channel. One difference from Foya:
a pairing's body is decoded before its session is checked (400 before 404 or 409).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.channels import ChannelBody, FeishuBotBody, PairingBody, RegistrationBody
from app.kernel.api import (
    ChannelWire,
    ConversationBindingWire,
    FeishuBotWire,
    FeishuRegistrationState,
    Kernel,
    PairingWire,
)

CHANNEL = "/channels/{channel_id}"
REGISTRATION = "/channels/feishu/registrations/{registration_id}"
PAIRING = "/channel-pairings/{pairing_id}"
BINDING = "/sessions/{session_id}/channel-binding"


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel` (its channels are built with the first request)."""
    api = APIRouter(tags=["channels"])

    @api.get("/channels")
    async def list_channels() -> list[ChannelWire]:
        """Every Feishu channel, then every Telegram one, each kind in creation order."""
        return kernel.channels.all()

    @api.post("/channels", status_code=201)
    async def create_channel(body: ChannelBody) -> ChannelWire:
        """A new channel of `kind`; enabled, it starts."""
        return await kernel.channels.create(body.input())

    @api.post("/channels/feishu/registrations", status_code=202)
    async def start_feishu_registration(body: RegistrationBody) -> FeishuRegistrationState:
        """Start creating a Feishu bot by scanning a QR code; poll it until it ends."""
        return await kernel.channels.begin_registration(body.input())

    @api.get(REGISTRATION)
    async def get_feishu_registration(registration_id: str) -> FeishuRegistrationState:
        return await kernel.channels.registration(registration_id)

    @api.delete(REGISTRATION, status_code=204)
    async def cancel_feishu_registration(registration_id: str) -> Response:
        """Cancel it while `starting` or `pending` (later: nothing happens)."""
        await kernel.channels.cancel_registration(registration_id)
        return Response(status_code=204)

    @api.get(CHANNEL)
    async def get_channel(channel_id: str) -> ChannelWire:
        return kernel.channels.get(channel_id)

    @api.put(CHANNEL)
    async def replace_channel(channel_id: str, body: ChannelBody) -> ChannelWire:
        """Replace every setting (a blank secret or name keeps the stored one); restarts it."""
        return await kernel.channels.replace(channel_id, body.input())

    @api.delete(CHANNEL, status_code=204)
    async def delete_channel(channel_id: str) -> Response:
        """Stop it and forget its conversations."""
        await kernel.channels.delete(channel_id)
        return Response(status_code=204)

    @api.get(BINDING)
    async def get_channel_binding(session_id: str) -> ConversationBindingWire | None:
        """The chat bound to the session, or `null`."""
        return await kernel.channels.binding(session_id)

    @api.delete(BINDING, status_code=204)
    async def delete_channel_binding(session_id: str) -> Response:
        """Unbind the session's chat (204 also when none is bound)."""
        await kernel.channels.unbind(session_id)
        return Response(status_code=204)

    @api.post("/sessions/{session_id}/channel-pairings", status_code=201)
    async def start_channel_pairing(session_id: str, body: PairingBody) -> PairingWire:
        """A code that binds a chat of the channel to the session when sent there as
        `/bind CODE`; valid 10 minutes, and cancels the session's previous pending one."""
        return await kernel.channels.start_pairing(session_id, body.channel_id)

    @api.get(PAIRING)
    async def get_channel_pairing(pairing_id: str) -> PairingWire:
        return await kernel.channels.pairing(pairing_id)

    @api.delete(PAIRING, status_code=204)
    async def cancel_channel_pairing(pairing_id: str) -> Response:
        """Cancel it if pending (204 whatever its status)."""
        await kernel.channels.cancel_pairing(pairing_id)
        return Response(status_code=204)

    @api.get("/settings/feishu-bot")
    async def get_feishu_bot() -> FeishuBotWire:
        """Legacy: the first Feishu channel, or a placeholder when there is none."""
        return kernel.channels.feishu_bot()

    @api.put("/settings/feishu-bot")
    async def update_feishu_bot(body: FeishuBotBody) -> FeishuBotWire:
        """Legacy: create the first Feishu channel, or replace its settings."""
        return await kernel.channels.set_feishu_bot(body.input())

    return api
