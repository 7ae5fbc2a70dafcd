"""The runner of a kind's bots (`ChannelRunner`): one `Platform` and one conversation task
(`conversation.run_channel`) per running channel.

`start` builds the channel's platform (by the kind's factory, which imports the platform's
library only then) and connects it, so bad credentials fail the start; the conversations then
run as a task until `stop`. A task that ends by itself (the platform gave up: a revoked token,
a network down for good) reports `error` through the service's callback, which retries it
with back-off (app.kernel.channels.runtime).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from app.kernel.channels.conversation import run_channel
from app.kernel.channels.conversation_parts import ConversationParts
from app.kernel.channels.platform import Platform
from app.kernel.channels.records import ChannelConfig, Secrets
from app.kernel.channels.runtime import StatusReport
from app.logs import get_logger

#: A kind's platform for one channel, not yet connected.
MakePlatform = Callable[[ChannelConfig, Secrets], Platform]


class PlatformRunner:
    """Runs the channels of one kind: `make` builds each one's platform; `parts` (read at the
    first start: it builds the turn core) is what the conversations need of the kernel."""

    def __init__(
        self, make: MakePlatform, parts: Callable[[], ConversationParts], report: StatusReport
    ) -> None:
        self.make, self.parts, self.report = make, parts, report
        self._bots: dict[str, tuple[Platform, asyncio.Task[None]]] = {}
        self.log = get_logger("foya.channels")

    async def start(self, channel: ChannelConfig, secrets: Secrets) -> None:
        await self.stop(channel.id)
        platform = self.make(channel, secrets)
        try:
            await platform.start()
        except BaseException:
            await platform.close()
            raise
        task = asyncio.create_task(self._run(channel, platform), name=f"channel:{channel.id}")
        self._bots[channel.id] = (platform, task)

    async def _run(self, channel: ChannelConfig, platform: Platform) -> None:
        try:
            await run_channel(channel, platform, self.parts())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the platform gave up, or the runtime failed: retried
            self._bots.pop(channel.id, None)
            await platform.close()
            self.report(channel.id, "error", str(exc) or type(exc).__name__)

    async def stop(self, channel_id: str) -> None:
        bot = self._bots.pop(channel_id, None)
        if bot is None:
            return
        platform, task = bot
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await platform.close()
