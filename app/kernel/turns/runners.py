"""The runner of each busy session and the queue it drains: one task that runs the opened turn,
then the next queued input, until the queue is empty or a cancel pauses it. The moment it has
nothing left to run the session is idle again, before the task itself winds down; input queued
while it was ending starts a new runner. Every change of a queue is a `queue_updated` fact.
"""

from __future__ import annotations

import asyncio

from app import events as k
from app.events import EventDraft, QueueItem, QueueUpdated
from app.kernel.sessions import Sessions
from app.kernel.turns.activity import Activities, Activity
from app.kernel.turns.inputs import Accepted
from app.kernel.turns.queue import Queues, as_input
from app.kernel.turns.run import Run
from app.kernel.turns.turn import TurnCycle
from app.logs import get_logger
from app.store.channel_ledger import Receipt

#: Cancel reasons that end the runner (the others, like queue_dispatch, only end one turn).
ENDING = ("user_stop", "session_deleted", "context_cancelled")


class Runners:
    """The runner of every busy session, and what the session's state says of it."""

    def __init__(self, sessions: Sessions, queues: Queues, cycle: TurnCycle) -> None:
        self.sessions = sessions
        self.queues = queues
        self.cycle = cycle
        self.activities = Activities()
        self.runs: dict[str, Run] = {}  # the runner of each session in `turn`
        self.log = get_logger("foya.turns")

    def claim(self, session: str) -> Run:
        """Make a new runner the session's (the session must be idle)."""
        self.activities.begin(session, Activity.TURN)
        run = Run(session)
        self.runs[session] = run
        return run

    def release(self, run: Run) -> None:
        """The runner has nothing left to run: the session is idle from now on."""
        if self.runs.get(run.session) is run:
            del self.runs[run.session]
            self.activities.end(run.session, Activity.TURN)

    def resume(self, session: str) -> None:
        """Start the queue's next input if the session is idle and its queue is not paused."""
        queue = self.queues.of(session)
        if queue.items and not queue.paused and not self.activities.busy(session):
            run = self.claim(session)
            run.task = asyncio.create_task(self.drain(run), name=f"runner:{session}")

    async def drain(self, run: Run, *, opened: bool = False) -> None:
        """Run the opened turn (if any), then queued input, until there is none to run."""
        try:
            if opened:
                await self._run_turn(run)
            while run.cancel_reason is None and self.runs.get(run.session) is run:
                queue = self.queues.of(run.session)
                item = None if queue.paused else self.queues.pop(run.session)
                if item is None:
                    return
                try:
                    # The queue it left is stored with the turn's opening: a crash between
                    # the two could otherwise lose the input, or run it twice after a restart.
                    left = self._queue_fact(run.session)
                    await self.cycle.open(run, as_input(item), before=[left])
                except Exception:
                    # The turn never started (nothing of it is stored): keep the input queued
                    # and paused, so it is neither lost nor retried in a loop.
                    self.log.exception("a queued turn could not start", session=run.session)
                    self.queues.restore(run.session, item)
                    queue.paused = True
                    return
                await self._run_turn(run)
        except Exception:
            self.log.exception("runner failed", session=run.session)
        finally:
            self.release(run)
            if run.cancel_reason not in ENDING:
                self.resume(run.session)  # input queued while this runner was ending

    async def _run_turn(self, run: Run) -> None:
        """Run the opened turn to its `turn_complete` in its own task (so cancel reaches only
        the turn, not the runner). When nothing runnable is queued behind it, the session is
        idle as soon as `turn_complete` is stored."""
        run.turn = asyncio.create_task(self._turn(run))
        await asyncio.shield(run.turn)
        if run.cancel_reason not in ENDING:
            run.cancel_reason = None  # completed, failed, or dispatched: go on

    async def _turn(self, run: Run) -> None:
        await self.cycle.run(run)
        # Still in the turn's task, right after `turn_complete` was stored and published: a
        # client that reacts to it must find the session idle, not a runner winding down.
        queue = self.queues.of(run.session)
        if run.cancel_reason in ENDING or queue.paused or not queue.items:
            self.release(run)

    # -- the queue it drains ---------------------------------------------------------------------

    async def queue_changed(self, session: str, receipt: Receipt | None = None) -> None:
        """Store and publish `queue_updated` (with the `receipt` of the chat item queued)."""
        draft = self._queue_fact(session)
        # `Facts.commit` around our own append (not `emit`): the receipt must be a statement of
        # the same transaction as the fact, so the chat item is recorded iff it is queued.
        store = self.sessions.store
        await self.sessions.facts.commit(session, lambda: store.append(draft, receipt=receipt))

    def _queue_fact(self, session: str) -> EventDraft:
        changed: QueueUpdated = {"items": self.queues.items(session)}
        return EventDraft(session, k.QUEUE_UPDATED, changed)

    async def add(
        self, session: str, accepted: Accepted, receipt: Receipt | None = None
    ) -> QueueItem:
        """Queue the input; if the `queue_updated` fact cannot be stored the item is taken out
        again, so an input is never kept after an error answer. `receipt` is recorded with
        that fact."""
        item = self.queues.add(session, accepted)
        try:
            await self.queue_changed(session, receipt)
        except BaseException:
            self.queues.remove(session, item["id"])
            raise
        return item

    async def update(
        self, session: str, item_id: str, text: str | None, position: int | None
    ) -> QueueItem:
        item = self.queues.update(session, item_id, text, position)
        await self.queue_changed(session)
        return item

    async def remove(self, session: str, item_id: str) -> None:
        self.queues.remove(session, item_id)
        await self.queue_changed(session)

    async def to_head(self, session: str, item_id: str) -> QueueItem:
        """Put the item first and unpause the queue; the item."""
        self.queues.to_head(session, item_id)
        await self.queue_changed(session)
        queue = self.queues.of(session)
        queue.paused = False
        return queue.items[0].copy()
