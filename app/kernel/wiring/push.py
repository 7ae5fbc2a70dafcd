"""The composition root's part for Web Push (app.kernel.push).

Built on first use (the first `/push` request), and at start only when a browser subscribed
(`ondisk.push`): a start with no subscription imports none of the push modules. Once built it
watches every stored fact (`Facts.observe`) and its worker runs until shutdown.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from app.kernel.wiring import ondisk
from app.kernel.wiring.capability import Capability
from app.kernel.wiring.channels import ChannelWiring

if TYPE_CHECKING:
    from app.kernel.push import Push


class PushWiring(ChannelWiring):
    """Builds `push` and declares its part in the kernel's life."""

    @cached_property
    def push(self) -> Push:
        from app.kernel.push import Push
        from app.kernel.push.vapid import Vapid
        from app.kernel.web.fetch import Fetcher
        from app.kernel.web.guard import AllowList

        s = self.settings
        fetcher = Fetcher(AllowList.parse(s.web_fetch_allow_hosts), max_bytes=64 * 1024)
        push = Push(s.data_dir, fetcher, Vapid(s.data_dir, s.push_contact), self.sessions.row)
        push.load()  # blocking, as the other catalogs: one small file
        self.facts.observe(push.observe)
        self._when_serving(push.start)
        return push

    def push_capability(self) -> Capability:
        """Push's record in the kernel's life: started if subscribed, stopped at shutdown."""
        return Capability("push", start=self._start_push, shutdown=self._stop_push)

    def _push_built(self) -> bool:
        return "push" in self.__dict__  # the cached_property ran

    async def _start_push(self) -> None:
        if self._push_built() or ondisk.push(self.settings.data_dir):
            self.push.start()

    async def _stop_push(self) -> None:
        if self._push_built():
            await self.push.stop()
