"""A turn's first model request, sent before the turn's opening facts are committed.

The request does not need the commit: it needs the session's messages, read before the commit
is queued, plus the user message the commit stores. So the request is built and sent first,
and the commit and its fsync run while the provider answers; the turn's first step then takes
the reply as it would have opened it. Built first rather than beside the commit: the build is
CPU work, and beside the commit's own it only slows both (one interpreter lock), whereas the
commit's fsync and the provider's answer wait side by side for free. The reply's first item is
read, never published, before the step runs, and the step runs only once the opening facts
are committed: nothing on the wire or in the log moves.

Only a plain text message opens early (no attachments, skill, browser elements or files),
and only when no UserPromptSubmit hook ran: anything else is read back from the store first, as
every later step is. A request that would need compacting is left to the step, and so is one
whose build fails (the step builds it again and reports the failure).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from app.events import Message
from app.kernel.sessionrow import SessionRow
from app.kernel.turns.request import Request, Requests
from app.kernel.turns.run import Run
from app.providers.base import Provider, StreamItem

PLAIN = frozenset({"role", "content", "created_at"})


@dataclass
class Opening:
    """The opened first request of a turn: the row and directory it was built for, the
    request, and the reply (its first item already read, kept for the step)."""

    row: SessionRow
    cwd: Path
    request: Request
    stream: AsyncIterator[StreamItem]
    first: StreamItem | None

    def items(self) -> AsyncIterator[StreamItem]:
        """The whole reply, its first item included."""
        return self.stream if self.first is None else self._replay(self.first)

    async def _replay(self, first: StreamItem) -> AsyncIterator[StreamItem]:
        yield first
        async for item in self.stream:
            yield item

    async def close(self) -> None:
        """Give up the reply (the turn ended before its step read it)."""
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            await aclose()


def plain(user: Message) -> bool:
    """A user message a request can be built from before it is stored."""
    return set(user) <= PLAIN


async def begin(
    requests: Requests, run: Run, row: SessionRow, user: Message
) -> asyncio.Task[Opening] | None:
    """Build the turn's first request from the session's messages and `user`, then send it in
    a task of its own; None when the step must build it itself, or when a cancel came before
    or while it was built. Called before the opening commit is queued, so the read comes before
    it, and the commit (its fsync) then runs while the provider answers. Whatever fails here
    fails again, and is reported, in the step."""
    if run.cancel_reason is not None or not plain(user):
        return None
    try:
        cwd = requests.sessions.workspace(row)
        provider = requests.providers.for_session(row)
        read = await requests.inputs(run.session, row)
        request = await requests.opening(run, row, cwd, read, user)
    except Exception:
        return None
    if request is None or run.cancel_reason is not None:
        return None
    return asyncio.create_task(_reply(provider, row, cwd, request))


async def _reply(provider: Provider, row: SessionRow, cwd: Path, request: Request) -> Opening:
    """Send the request and wait for its reply's first item."""
    stream = provider.stream(request.chat)
    return Opening(row, cwd, request, stream, await anext(stream, None))


async def discard(task: asyncio.Task[Opening] | None) -> None:
    """End an opening the turn will not use, and its reply."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait({task})
    if task.cancelled() or task.exception() is not None:
        return
    await task.result().close()
