"""Requests a running tool makes of a client, waiting for the client's answer.

A tool registers its request under a fresh id, records `<kind>_requested` (stored,
must-deliver) with the turn's `emit`, and waits. Exactly one party *takes* a pending request and
records how it ended, `<kind>_resolved {id, status}`: the client (an answer, a result or a
cancel, through the kernel), or the tool itself when it stops waiting (its timeout, or its
turn or tool call being cancelled). Taking is synchronous, so of two answers only one wins; the
other finds no such request.

A client's answer is recorded before it reaches the tool, so the resolved event precedes the
tool's `tool_end`; if recording fails, the request is put back and nothing changed. Pending
requests live in memory only: a restart ends their turns, so none survives one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from typing_extensions import TypedDict

from app.events import Kind, Record, RequestResolved
from app.tools.base import Emit, settled

T = TypeVar("T")
Status = Literal["answered", "cancelled", "done", "error"]


class Resolved(TypedDict):
    """`question_resolved` and `browser_action_resolved`."""

    id: str
    status: Status


@dataclass(frozen=True)
class Ended:
    """What a tool gets instead of an answer: the request was cancelled or timed out."""

    reason: str


@dataclass
class Waiter(Generic[T]):
    """One pending request: whose it is, what was asked, where its events go, and the
    answer to come (never cancelled by the waiting side, so a late answer has a home)."""

    session: str
    request: Any
    emit: Emit
    answer: asyncio.Future[T | Ended]
    waiting: bool = field(default=True)


class Waiters(Generic[T]):
    """Pending requests of one kind, by id."""

    def __init__(self, requested: Kind[Record], resolved: Kind[RequestResolved]) -> None:
        self._requested = requested
        self._resolved = resolved
        self._pending: dict[str, Waiter[T]] = {}

    def get(self, session: str, request_id: str) -> Waiter[T] | None:
        """`session`'s pending request `request_id` (None if unknown, over, or another's)."""
        waiter = self._pending.get(request_id)
        return waiter if waiter is not None and waiter.session == session else None

    async def wait(
        self, request_id: str, session: str, request: Any, emit: Emit, within: float | None
    ) -> T | Ended:
        """Record `request` and wait for its answer (`Ended` if it was cancelled by a client or
        not answered `within` seconds). Cancelling the caller records it cancelled."""
        answer: asyncio.Future[T | Ended] = asyncio.get_running_loop().create_future()
        waiter = Waiter(session, request, emit, answer)
        self._pending[request_id] = waiter  # before the event: a quick client finds it
        try:
            await emit(self._requested, request)
            return await self._answer(request_id, waiter, within)
        except asyncio.CancelledError:
            if self._take(request_id, waiter):
                # Shielded: the record survives the cancellation, as an approval's does.
                resolved = Resolved(id=request_id, status="cancelled")
                await asyncio.shield(emit(self._resolved, resolved))
            raise
        finally:
            waiter.waiting = False
            self._take(request_id, waiter)  # recording the request failed

    async def _answer(self, request_id: str, waiter: Waiter[T], within: float | None) -> T | Ended:
        try:
            async with asyncio.timeout(within):
                return await asyncio.shield(waiter.answer)
        except TimeoutError:
            if not self._take(request_id, waiter):
                return await waiter.answer  # a client took it just now: its answer is coming
            await waiter.emit(self._resolved, Resolved(id=request_id, status="cancelled"))
            return Ended(f"no answer within {within:g} s")

    async def resolve(
        self, request_id: str, waiter: Waiter[T], status: Status, answer: T | Ended
    ) -> bool:
        """Take `waiter` (from `get`), record `status`, then hand `answer` to the tool. False if
        it is no longer pending (answered, cancelled or timed out meanwhile)."""
        if not self._take(request_id, waiter):
            return False
        try:
            await settled(waiter.emit(self._resolved, Resolved(id=request_id, status=status)))
        except asyncio.CancelledError:
            self._deliver(waiter, answer)  # recorded: `settled` waited for the write
            raise
        except BaseException:
            if waiter.waiting:  # not recorded: nothing changed
                self._pending[request_id] = waiter
            raise
        self._deliver(waiter, answer)
        return True

    def _take(self, request_id: str, waiter: Waiter[T]) -> bool:
        if self._pending.get(request_id) is not waiter:
            return False
        del self._pending[request_id]
        return True

    @staticmethod
    def _deliver(waiter: Waiter[T], answer: T | Ended) -> None:
        if not waiter.answer.done():
            waiter.answer.set_result(answer)
