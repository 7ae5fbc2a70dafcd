"""Automations (Foya's `internal/automation`): prompts that run as new sessions on a cron
schedule, and the scheduler that starts them.

Runs (app.kernel.automations.runs, followed by app.kernel.automations.following): a run is a
new session whose first turn is the prompt; it lasts until that turn ends. An automation runs
once at a time: `run` while a run is going is 409 `automation_running`, and a due time that
comes while one is going is skipped, not queued.
Deleting an automation stops following its run (the session and its turn go on, as in Foya);
pausing or editing it does not.

The scheduler (app.kernel.automations.scheduler) runs passes. A pass starts every enabled
automation whose `next_run_at` has come, then moves `next_run_at` to the first due time after
now, so however many due times went by, one run starts. The clock is injected (`Clock`), so
tests move time instead of waiting for it.

Restart: an enabled automation whose stored `next_run_at` went by while the kernel was down
runs once, right after start (never once per missed time); the others resume at their next due
time. A run the kernel was stopped in the middle of (`last_status` still `running` in the file)
is recorded `failed`, "interrupted"; nothing is re-run for it.

Settings: app.kernel.automations.rules. Errors: app.kernel.automations.errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.broker import Broker
from app.kernel.automations import runs
from app.kernel.automations.clock import Clock
from app.kernel.automations.errors import (
    AutomationNotFound,
    AutomationRunning,
    InvalidAutomation,
    InvalidAutomationUpdate,
)
from app.kernel.automations.following import Following
from app.kernel.automations.rules import restored, validated
from app.kernel.automations.schedule import schedule_of
from app.kernel.automations.scheduler import Scheduler
from app.kernel.automations.store import (
    LISTING_ORDER,
    Automation,
    AutomationFile,
    AutomationInput,
    AutomationWire,
)
from app.kernel.sessions import Sessions
from app.logs import get_logger
from app.metrics import Metrics

if TYPE_CHECKING:
    from app.kernel.turns.control import TurnControl

Change = Callable[[dict[str, Automation]], bool]
PASS_SLICE = 50  # next due times computed between two yields to the loop (~3 ms)


class Automations:
    """The automations, their runs and their scheduler."""

    def __init__(
        self,
        data_dir: Path,
        sessions: Sessions,
        turns: TurnControl,
        broker: Broker,
        metrics: Metrics,
        clock: Clock,
        unanswerable: runs.Unanswerable = runs.no_questions,
    ) -> None:
        """`unanswerable` cancels a question a run's turn asks (nobody is there to answer)."""
        self.file = AutomationFile(data_dir)
        self.sessions = sessions
        self.clock = clock
        self.log = get_logger("foya.automations")
        self._items: dict[str, Automation] = {}  # in creation order, as stored
        self._running = Following(sessions, turns, broker, metrics, unanswerable, self._record)
        self._lock = asyncio.Lock()  # one change (and its file write) at a time
        self.scheduler = Scheduler(clock, self._pass, self._next_due)

    # -- lifecycle -----------------------------------------------------------------------------

    async def load(self) -> None:
        """Read the file; mark interrupted runs; keep the due times missed while down."""
        now = self.clock.now()
        records, problems = self.file.load()
        items: dict[str, Automation] = {}
        for record in records:
            try:
                schedule = schedule_of(record.spec.cron, record.spec.timezone)
            except InvalidAutomation as exc:
                problems.append(f"{record.id}: {exc.message}")
                continue
            items[record.id] = restored(record, schedule, now)
        if problems:
            self.file.keep_aside(problems)
        if problems or items != {r.id: r for r in records}:
            await self.file.save(items.values())
        self._items = items

    def start(self) -> None:
        """Start the scheduler; its first pass runs the automations missed while down."""
        self.scheduler.start()

    async def stop(self) -> None:
        """Stop the scheduler (runs going on are left to end with their turns)."""
        await self.scheduler.stop()

    async def close(self) -> None:
        """Stop the scheduler and stop following runs (after a graceful stop their turns have
        ended; any still followed is recorded `cancelled`). The state is stored once more: a
        cancel can cut a run's own write short."""
        await self.stop()
        if not await self._running.cancel_all():
            return
        async with self._lock:
            await self.file.save(self._items.values())

    # -- reads ---------------------------------------------------------------------------------

    def all(self) -> list[AutomationWire]:
        """Enabled first, then by next due time, then most recently changed (Foya's order)."""
        return [a.wire() for a in sorted(self._items.values(), key=LISTING_ORDER)]

    def get(self, automation_id: str) -> AutomationWire:
        return self._get(self._items, automation_id).wire()

    # -- writes --------------------------------------------------------------------------------

    async def create(self, given: AutomationInput) -> AutomationWire:
        """A new automation (`enabled` ones are scheduled at once)."""
        spec, schedule = validated(given, InvalidAutomation, self.sessions)
        now = self.clock.now()
        item = Automation(
            id=f"automation-{secrets.token_hex(8)}",
            spec=spec,
            created_at=now,
            updated_at=now,
            next_run_at=schedule.next_after(now) if spec.enabled else None,
        )

        def add(items: dict[str, Automation]) -> bool:
            items[item.id] = item
            return True

        await self._change(add)
        self.scheduler.wake()
        return item.wire()

    async def replace(self, automation_id: str, given: AutomationInput) -> AutomationWire:
        """`PUT`: every setting is `given`'s (Foya's update)."""
        return await self.update(automation_id, dataclasses.asdict(given))

    async def update(self, automation_id: str, fields: dict[str, Any]) -> AutomationWire:
        """`PATCH`: set `fields` (of `AutomationInput`), keep the other settings. The next due
        time is computed afresh; the last run's fields are kept."""

        def put(items: dict[str, Automation]) -> bool:
            current = self._get(items, automation_id)
            merged = dataclasses.replace(current.spec, **fields)
            spec, schedule = validated(merged, InvalidAutomationUpdate, self.sessions)
            now = self.clock.now()
            items[automation_id] = dataclasses.replace(
                current,
                spec=spec,
                updated_at=now,
                next_run_at=schedule.next_after(now) if spec.enabled else None,
            )
            return True

        await self._change(put)
        self.scheduler.wake()
        return self._items[automation_id].wire()

    async def delete(self, automation_id: str) -> None:
        """Remove the automation and stop following its run, if one is going."""

        def remove(items: dict[str, Automation]) -> bool:
            self._get(items, automation_id)
            del items[automation_id]
            return True

        await self._change(remove)
        self._running.forget(automation_id)
        self.scheduler.wake()

    async def run_now(self, automation_id: str) -> AutomationWire:
        """Start a run now, enabled or not (`POST /automations/{id}/run`, answered 202)."""

        def start(items: dict[str, Automation]) -> bool:
            current = self._get(items, automation_id)
            if automation_id in self._running:
                raise AutomationRunning("automation is already running")
            items[automation_id] = self._running.start(current, self.clock.now())
            return True

        await self._change(start, durable=False)
        return self._items[automation_id].wire()

    # -- rules ---------------------------------------------------------------------------------

    @staticmethod
    def _get(items: dict[str, Automation], automation_id: str) -> Automation:
        try:
            return items[automation_id]
        except KeyError:
            raise AutomationNotFound("automation not found") from None

    async def _change(self, change: Change, *, durable: bool = True) -> None:
        """Apply `change` to a copy of the automations and store them. A `durable` change
        takes effect only once stored (a failed write raises and changes nothing); the
        bookkeeping of runs takes effect at once, and a failed write is logged."""
        async with self._lock:
            items = dict(self._items)
            if not change(items):
                return
            if not durable:
                self._items = items
            try:
                await self.file.save(items.values())
            except OSError:
                if durable:
                    raise
                self.log.warning("automations.json could not be saved", exc_info=True)
                return
            self._items = items

    # -- runs ----------------------------------------------------------------------------------

    async def _record(self, automation_id: str, **fields: Any) -> None:
        """Bookkeeping of a run, if its automation still exists."""

        def note(items: dict[str, Automation]) -> bool:
            if automation_id not in items:
                return False
            now = self.clock.now()
            items[automation_id] = dataclasses.replace(
                items[automation_id], **fields, updated_at=now
            )
            return True

        await self._change(note, durable=False)

    # -- scheduler passes -----------------------------------------------------------------------

    async def _pass(self, now: dt.datetime) -> None:
        """Start what is due at `now`. The next due times are computed first, in slices with
        the loop free between them (croniter takes ~65 µs each), then applied in one change."""
        due = [a for a in self._items.values() if _is_due(a, now)]
        following: dict[str, tuple[Automation, dt.datetime | None]] = {}
        for count, item in enumerate(due, 1):
            schedule = schedule_of(item.spec.cron, item.spec.timezone)
            following[item.id] = (item, schedule.next_after(now))
            if count % PASS_SLICE == 0:
                await asyncio.sleep(0)
        if following:
            fire = functools.partial(self._fire_due, following=following, now=now)
            await self._change(fire, durable=False)

    def _next_due(self) -> dt.datetime | None:
        dues = [a.next_run_at for a in self._items.values() if a.spec.enabled and a.next_run_at]
        return min(dues, default=None)

    def _fire_due(
        self,
        items: dict[str, Automation],
        *,
        following: dict[str, tuple[Automation, dt.datetime | None]],
        now: dt.datetime,
    ) -> bool:
        """Start each due automation that is not running and move its next due time. One that
        changed since its next time was computed is left to the next pass (an edit computed
        its own next time; a finished run's bookkeeping leaves it due)."""
        fired = False
        for automation_id, (seen, next_run_at) in following.items():
            item = items.get(automation_id)
            if item is not seen:
                continue
            if automation_id in self._running:
                self._running.skipped()
            else:
                item = self._running.start(item, now)
            items[automation_id] = dataclasses.replace(item, next_run_at=next_run_at)
            fired = True
        return fired


def _is_due(item: Automation, now: dt.datetime) -> bool:
    return item.spec.enabled and item.next_run_at is not None and item.next_run_at <= now
