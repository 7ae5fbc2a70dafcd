"""The `getUpdates` offset: advanced over an update only once the runtime acked it.

Telegram confirms every update below the `offset` of a `getUpdates` call, and a confirmed
update is never delivered again. So the next call waits until every update of the batch is
settled (acked, or not for the runtime at all), and an unsettled one keeps the offset at its
id: after a crash (or a `close` with acks missing) it comes again.
"""

from __future__ import annotations

import asyncio


class Cursor:
    """The updates of the current batch, which of them are settled, and the offset."""

    def __init__(self) -> None:
        self._confirmed = 0  # the offset Telegram last saw (0: none sent yet)
        self._last = 0  # the highest update id received
        self._open: set[int] = set()  # ids of the batch not settled yet
        self._settled = asyncio.Event()
        self._settled.set()

    @property
    def offset(self) -> int:
        """What the next `getUpdates` may confirm: up to the first unsettled update."""
        if self._open:
            return min(self._open)
        return self._last + 1 if self._last else 0

    @property
    def unconfirmed(self) -> bool:
        """Some settled updates are not confirmed to Telegram yet."""
        return self.offset > self._confirmed

    def begin(self, ids: list[int]) -> None:
        """A batch arrived (after the previous one was settled)."""
        self._open = {i for i in ids if i >= self.offset}
        self._last = max([self._last, *ids])
        if self._open:
            self._settled.clear()

    def settle(self, update_id: int) -> None:
        """`update_id` is acked, or was nothing to deliver."""
        self._open.discard(update_id)
        if not self._open:
            self._settled.set()

    def confirmed(self, offset: int) -> None:
        """A `getUpdates` with `offset` succeeded."""
        self._confirmed = max(self._confirmed, offset)

    async def wait_settled(self) -> None:
        """Until every update of the batch is settled."""
        await self._settled.wait()
