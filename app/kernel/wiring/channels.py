"""The composition root's part for the messaging channels (app.kernel.channels).

Built on first use, and at start only when a channel catalog is on disk (`ondisk.channels`):
a start with no channel imports none of the channel modules. Its record starts the enabled
channels, stops them at shutdown (before the turns stop: the list runs teardown backwards), and
unbinds a deleted session's chat. It registers a runner per platform
(app.kernel.channels.runners), whose factory imports the platform's library only when a
channel of that kind starts, and the Feishu QR registrar.
"""

from __future__ import annotations

import datetime as dt
from functools import cached_property
from typing import TYPE_CHECKING

from app.kernel.wiring import ondisk
from app.kernel.wiring.capability import Capability
from app.kernel.wiring.plugged import Plugged

if TYPE_CHECKING:
    from app.kernel.channels import Channels
    from app.kernel.channels.conversation_parts import ConversationParts
    from app.kernel.channels.platform import Platform
    from app.kernel.channels.records import ChannelConfig, Secrets


class ChannelWiring(Plugged):
    """Builds `channels` and declares its part in the kernel's life."""

    @cached_property
    def channels(self) -> Channels:
        from app.kernel.channels import Channels

        channels = Channels(
            self.settings.data_dir, self.store, self.sessions, self.clock.now, self._sleep
        )
        channels.load()  # blocking, as the other catalogs: a few small files
        from app.kernel.channels.feishu.registration import FeishuRegistrar, accounts_url_for
        from app.kernel.channels.runners import PlatformRunner

        parts, report = self._conversation_parts, channels.runs.report
        channels.register_runner("telegram", PlatformRunner(self._telegram, parts, report))
        channels.register_runner("feishu", PlatformRunner(self._feishu, parts, report))
        accounts = accounts_url_for(self.settings.feishu_api_url)
        channels.register_registrar(
            FeishuRegistrar(channels.complete_registration, accounts_url=accounts)
        )
        return channels

    def _telegram(self, channel: ChannelConfig, secrets: Secrets) -> Platform:
        from app.kernel.channels.telegram import TelegramPlatform

        return TelegramPlatform(secrets.token, self.settings.telegram_api_url)

    def _feishu(self, channel: ChannelConfig, secrets: Secrets) -> Platform:
        from app.kernel.channels.feishu import FeishuPlatform

        return FeishuPlatform(channel.app_id, secrets.app_secret, self.settings.feishu_api_url)

    def _conversation_parts(self) -> ConversationParts:
        from app.kernel.channels.conversation_parts import ConversationParts

        channels = self.channels
        return ConversationParts(
            store=self.store,
            broker=self.broker,
            sessions=self.sessions,
            turns=self.turns,
            queues=self.queues,
            approvals=self.approvals,
            questions=self.questions,
            bindings=channels.bindings,
            pairings=channels.pairings,
            metrics=self.metrics,
        )

    async def _sleep(self, seconds: float) -> None:
        await self.clock.sleep_until(self.clock.now() + dt.timedelta(seconds=seconds))

    def channels_capability(self) -> Capability:
        """The channels' record in the kernel's life."""
        return Capability(
            "channels",
            start=self._start_channels,
            shutdown=self._stop_channels,
            close=self._stop_channels,
            removed=self._unbind_channels,
        )

    def _channels_built(self) -> bool:
        return "channels" in self.__dict__  # the cached_property ran

    def _channels_present(self) -> bool:
        return self._channels_built() or ondisk.channels(self.settings.data_dir)

    async def _start_channels(self) -> None:
        if self._channels_present():
            await self.channels.start()

    async def _stop_channels(self) -> None:
        if self._channels_built():
            await self.channels.stop()

    async def _unbind_channels(self, session: str) -> None:
        # Only the channel service binds chats, and it is built whenever a catalog exists.
        if self._channels_built():
            await self.channels.session_removed(session)
