"""Running the channels: the port a platform's runner fits, and each channel's run state.

A `ChannelRunner` runs the bots of one kind (written in `telegram/` and `feishu/`, registered
with `Channels.register_runner`). It is built with the service's `report` as its status
callback: `report(channel_id, status, last_error)`, called on the kernel's loop, says a bot
went `running` (connected), `error` (it gave up: the text says why) or `stopped`.

Each channel's state is `stopped` (disabled, never started, stopped, or enabled while no runner
of its kind is registered: then with no error), `running` (`start` returned) or `error` (with
`last_error`, secrets replaced). A start that fails, and a bot that reports `error`, is
retried after a back-off doubling from `FIRST_DELAY` to `MAX_DELAY` seconds, reset once a bot
reports `running`; a `PlatformError` marked permanent (a revoked token) is not retried: the
user changes the channel, which restarts it. Stopping a channel clears its error, as in Foya.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from app.kernel.channels.platform import PlatformError
from app.kernel.channels.records import ChannelConfig, ChannelKind, ChannelStatus, Secrets
from app.logs import get_logger

FIRST_DELAY = 1.0
MAX_DELAY = 60.0

#: `report(channel_id, status, last_error)`: a runner's word on one of its bots.
StatusReport = Callable[[str, ChannelStatus, str], None]
Sleep = Callable[[float], Awaitable[None]]


class ChannelRunner(Protocol):
    """Runs the bots of one kind of channel."""

    async def start(self, channel: ChannelConfig, secrets: Secrets) -> None:
        """Start the channel's bot and return once it runs (credentials checked); raise if it
        cannot start (a `PlatformError`, `permanent` if retrying cannot help). The bot then
        runs on its own until `stop`, reporting through its status callback."""
        ...

    async def stop(self, channel_id: str) -> None:
        """Stop the channel's bot and wait for it to end; nothing if it is not running."""
        ...


@dataclass
class _Run:
    config: ChannelConfig
    secrets: Secrets
    status: ChannelStatus = "stopped"
    last_error: str = ""
    task: asyncio.Task[None] | None = None
    started: bool = False  # the runner's `start` returned: `stop` must be called
    delay: float = FIRST_DELAY


class Runs:
    """The run of every enabled channel, its state, and its retries."""

    def __init__(self, sleep: Sleep) -> None:
        self.sleep = sleep
        self.log = get_logger("foya.channels")
        self.runners: dict[ChannelKind, ChannelRunner] = {}
        self._runs: dict[str, _Run] = {}

    def state(self, channel_id: str) -> tuple[ChannelStatus, str]:
        run = self._runs.get(channel_id)
        return ("stopped", "") if run is None else (run.status, run.last_error)

    def register(self, kind: ChannelKind, runner: ChannelRunner) -> None:
        """Run `kind`'s channels with `runner`; those waiting for one start now."""
        self.runners[kind] = runner
        for run in self._runs.values():
            if run.config.kind == kind and run.task is None and not run.started:
                self._launch(run, 0.0)

    async def start(self, config: ChannelConfig, secrets: Secrets) -> None:
        """(Re)start a channel: stop its run, then start it if it is enabled."""
        await self.stop(config.id)
        if not config.enabled:
            return
        run = self._runs[config.id] = _Run(config, secrets)
        if config.kind in self.runners:
            self._launch(run, 0.0)

    async def stop(self, channel_id: str) -> None:
        """Stop a channel's run and wait for it; its state is `stopped` again."""
        run = self._runs.pop(channel_id, None)
        if run is None:
            return
        if run.task is not None:
            run.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run.task
        if run.started:
            try:
                await self.runners[run.config.kind].stop(channel_id)
            except Exception as exc:
                self.log.warning("channel stop failed", channel=channel_id, error=repr(exc))

    async def stop_all(self) -> None:
        for channel_id in list(self._runs):
            await self.stop(channel_id)

    def report(self, channel_id: str, status: ChannelStatus, last_error: str = "") -> None:
        """A runner's word on a bot (the status callback runners are built with)."""
        run = self._runs.get(channel_id)
        if run is None:
            return  # stopped meanwhile
        run.status, run.last_error = status, run.secrets.hide(last_error)
        if status == "running":
            run.delay, run.last_error = FIRST_DELAY, ""
        elif status == "error":
            run.started = False  # the bot gave up: it runs no more
            self.log.warning("channel failed", channel=channel_id, error=run.last_error)
            if run.task is None:
                self._launch(run, self._next_delay(run))

    def _next_delay(self, run: _Run) -> float:
        delay, run.delay = run.delay, min(run.delay * 2, MAX_DELAY)
        return delay

    def _launch(self, run: _Run, delay: float) -> None:
        run.task = asyncio.get_running_loop().create_task(self._keep(run, delay))

    async def _keep(self, run: _Run, delay: float) -> None:
        """Start the channel, after `delay`, until it starts or cannot ever."""
        try:
            while True:
                if delay:
                    await self.sleep(delay)
                try:
                    await self.runners[run.config.kind].start(run.config, run.secrets)
                except Exception as exc:
                    text = run.secrets.hide(str(exc) or type(exc).__name__)
                    run.status, run.last_error = "error", text
                    self.log.warning("channel start failed", channel=run.config.id, error=text)
                    if isinstance(exc, PlatformError) and exc.permanent:
                        return
                    delay = self._next_delay(run)
                    if isinstance(exc, PlatformError) and exc.retry_after:
                        delay = max(delay, min(exc.retry_after, MAX_DELAY))
                    continue
                run.started, run.status, run.last_error = True, "running", ""
                return
        finally:
            run.task = None
