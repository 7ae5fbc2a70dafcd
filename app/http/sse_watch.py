"""The timer of an SSE stream (`app.http.sse`): its comment heartbeat and the bound on a send."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Send


class Watch:
    """One timer per stream for the heartbeat and the send bound.

    `asyncio.timeout` around every wait and every send would arm and cancel two timers per
    event (~10 µs each on the 2-core machine, a fifth of a frame's cost); this one is re-armed
    only when it fires or when a wait or a send begins while it is armed beyond that phase's
    deadline: about twice per `send_timeout` while events flow. When it finds the stream
    waiting for `heartbeat`, or one send in flight for `send_timeout`, it cancels the stream's
    task, as `asyncio.timeout` does: the pump's `ours()` tells that cancellation from any
    other, and `send()` turns a stall into `TimeoutError`.
    """

    def __init__(
        self, task: asyncio.Task[Any], send: Send, heartbeat: float, send_timeout: float
    ) -> None:
        self.task = task
        self.heartbeat, self.send_timeout = heartbeat, send_timeout
        self._send = send
        self._loop = task.get_loop()
        self._base = task.cancelling()
        self._sending = False
        self._since = self._loop.time()  # start of the current wait, or of the send in flight
        self._fired = False
        self._timer = self._loop.call_at(self._since + heartbeat, self._check)

    async def send(self, body: bytes, more: bool = True) -> None:
        """Send one chunk; `TimeoutError` when it did not complete within `send_timeout`."""
        self._phase(sending=True)
        try:
            await self._send({"type": "http.response.body", "body": body, "more_body": more})
        except asyncio.CancelledError:
            if self.ours():
                raise TimeoutError("the client stopped reading") from None
            raise
        self._phase(sending=False)

    def ours(self) -> bool:
        """Whether the cancellation being handled is this watch's alone (then it is withdrawn)."""
        if not self._fired:
            return False
        self._fired = False
        self._arm(self._loop.time() + min(self.heartbeat, self.send_timeout))
        return self.task.uncancel() <= self._base

    def _phase(self, sending: bool) -> None:
        # The timer must not be armed later than the new phase's deadline; earlier is fine: it
        # then re-arms itself for that deadline when it fires.
        now = self._loop.time()
        self._sending, self._since = sending, now
        deadline = now + (self.send_timeout if sending else self.heartbeat)
        if self._timer.when() > deadline:
            self._arm(deadline)

    def stop(self) -> None:
        self._timer.cancel()

    def _arm(self, when: float) -> None:
        self._timer.cancel()
        self._timer = self._loop.call_at(when, self._check)

    def _check(self) -> None:
        due = self._since + (self.send_timeout if self._sending else self.heartbeat)
        if self._loop.time() + _EARLY < due:
            self._arm(due)
            return
        self._fired = True
        self.task.cancel()


_EARLY = 0.001  # a timer may run a clock tick before its time: that is not early
