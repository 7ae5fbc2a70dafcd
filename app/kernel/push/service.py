"""Push subscriptions and the sending of push messages (`Push`).

Facts come from `Facts.observe` (every stored event of every session): an `approval_request`
is pushed after `GRACE` seconds if it still waits (a hook or the guardian may decide first) and
its session's approval mode asks a person; a `question_requested` at once; a `turn_complete`
of a top-level session unless the user cancelled it. Each goes, through one worker task, to
every subscription at once; a push service that answers 404 or 410 has dropped the
subscription, and so do we. Nothing is retried: a notice is a hint, the chat holds the fact.
Logs name an endpoint's origin only (its URL is a capability).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.errors import FoyaError
from app.events import Event
from app.files import read_versioned_list, write_json_atomic
from app.kernel.ids import iso_now, new_id
from app.kernel.lifecycle import cancel_and_wait
from app.kernel.push import notices
from app.kernel.push.records import (
    FILE,
    MAX_SUBSCRIPTIONS,
    VERSION,
    Subscription,
    SubscriptionNotFound,
    SubscriptionWire,
    TooMany,
    checked,
    loaded,
)
from app.kernel.push.vapid import Vapid
from app.kernel.sessionrow import SessionRow
from app.kernel.web.errors import FetchError
from app.kernel.web.fetch import Fetcher
from app.logs import get_logger

GRACE = 1.0
SEND_TIMEOUT = 10.0
TTL = 12 * 3600  # kept this long by a push service while the phone is off; stale after
_QUEUE = 64  # notices waiting for the worker; more are dropped (a hint, not a fact)
_REMEMBER = 512  # resolved approvals remembered: far more than wait at once
_GONE = (404, 410)

Rows = Callable[[str], Awaitable[SessionRow]]


class Push:
    """The subscriptions file, and the worker that sends notices to them."""

    def __init__(self, data_dir: Path, fetcher: Fetcher, vapid: Vapid, rows: Rows) -> None:
        self.path = data_dir / FILE
        self.fetcher, self.vapid, self.rows = fetcher, vapid, rows
        self.log = get_logger("foya.push")
        self._subs: list[Subscription] = []
        self._write = asyncio.Lock()
        self._queue: asyncio.Queue[Event] = asyncio.Queue(_QUEUE)
        self._worker: asyncio.Task[None] | None = None
        self._waiting: set[asyncio.Task[None]] = set()
        self._resolved: OrderedDict[str, None] = OrderedDict()  # ids of decided approvals

    # -- subscriptions ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read the file (blocking; once, at start); invalid entries are dropped."""
        items, problem = read_versioned_list(self.path, VERSION, "subscriptions", FILE)
        if problem:
            self.log.warning("push subscriptions unreadable", problem=problem)
        found = [loaded(raw, self.fetcher.allow) for raw in items]
        self._subs = [s for s in found if s is not None][:MAX_SUBSCRIPTIONS]

    def all(self) -> list[SubscriptionWire]:
        return [s.wire() for s in self._subs]

    async def public_key(self) -> str:
        return await asyncio.to_thread(self.vapid.public_key)

    async def subscribe(
        self, endpoint: str, p256dh: str, auth: str, label: str
    ) -> SubscriptionWire:
        """Add a browser's subscription, or renew the keys of one with the same endpoint."""
        parts = checked(endpoint, p256dh, auth, label, self.fetcher.allow)
        async with self._write:
            same = next((s for s in self._subs if s.endpoint == parts[0]), None)
            if same is None:
                if len(self._subs) >= MAX_SUBSCRIPTIONS:
                    raise TooMany(f"at most {MAX_SUBSCRIPTIONS} push subscriptions; remove one")
                sub = Subscription(new_id(), *parts, iso_now())
                await self._save([*self._subs, sub])
            else:
                sub = Subscription(same.id, *parts, same.created_at)
                await self._save([sub if s is same else s for s in self._subs])
        return sub.wire()

    async def remove(self, sub_id: str) -> None:
        async with self._write:
            if not any(s.id == sub_id for s in self._subs):
                raise SubscriptionNotFound(f"push subscription {sub_id} not found")
            await self._save([s for s in self._subs if s.id != sub_id])

    async def _save(self, subs: list[Subscription]) -> None:
        value = {"version": VERSION, "subscriptions": [s.stored() for s in subs]}
        await asyncio.to_thread(write_json_atomic, self.path, value)
        self._subs = subs

    # -- notices ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._work(), name="push")

    async def stop(self) -> None:
        for task in [*self._waiting, self._worker]:
            await cancel_and_wait(task)
        self._worker = None
        await self.fetcher.close()

    def observe(self, event: Event) -> None:
        """A stored fact (`Facts.observe`): queue what may be a notice. Never blocks."""
        if event.kind == "approval_resolved":
            _remember(self._resolved, str(event.payload.get("id")))
        elif event.kind == "approval_request":
            task = asyncio.get_running_loop().create_task(self._after_grace(event))
            self._waiting.add(task)
            task.add_done_callback(self._waiting.discard)
        elif event.kind in ("question_requested", "turn_complete"):
            self._enqueue(event)

    async def _after_grace(self, event: Event) -> None:
        await asyncio.sleep(GRACE)
        if str(event.payload.get("id")) not in self._resolved:
            self._enqueue(event)

    def _enqueue(self, event: Event) -> None:
        if self._subs:
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(event)

    async def _work(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                notice = await self._notice(event)
                if notice is not None:
                    await self.send(notice)
            except Exception as exc:  # one notice's failure never ends the worker
                self.log.warning("push failed", kind=event.kind, error=repr(exc))

    async def _notice(self, event: Event) -> notices.Notice | None:
        payload: dict[str, Any] = event.payload if isinstance(event.payload, dict) else {}
        session = str(payload.get("session") or event.session)
        try:
            row = await self.rows(session)
        except FoyaError:  # deleted meanwhile
            return None
        name = row["title"] or "Foya"
        if event.kind == "approval_request":
            unattended = row["approval_mode"] in notices.UNATTENDED
            return None if unattended else notices.approval(name, session, payload)
        if event.kind == "question_requested":
            return notices.question(name, session, payload)
        if row["parent_id"] or payload.get("status") == "cancelled":
            return None
        return notices.finished(name, session, payload)

    async def send_test(self) -> tuple[int, int]:
        return await self.send(notices.TEST)

    async def send(self, notice: notices.Notice) -> tuple[int, int]:
        """Send `notice` to every subscription: (delivered, failed)."""
        results = await asyncio.gather(*(self._one(s, notice) for s in list(self._subs)))
        return sum(results), len(results) - sum(results)

    async def _one(self, sub: Subscription, notice: notices.Notice) -> bool:
        origin = sub.wire()["origin"]
        body, headers = await asyncio.to_thread(self.vapid.seal, sub.info(), notice.payload())
        headers |= {
            "TTL": str(TTL),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "Urgency": notice.urgency,
            # A newer message of the same topic replaces one still undelivered.
            "Topic": hashlib.sha256(notice.tag.encode()).hexdigest()[:32],
        }
        try:
            status = await self.fetcher.post(sub.endpoint, body, headers, time_limit=SEND_TIMEOUT)
        except FetchError as exc:
            self.log.warning("push not delivered", origin=origin, error=str(exc))
            return False
        if status in _GONE:
            self.log.info("push subscription expired", origin=origin, status=status)
            with contextlib.suppress(SubscriptionNotFound):
                await self.remove(sub.id)
        elif not 200 <= status < 300:
            self.log.warning("push refused", origin=origin, status=status)
        return 200 <= status < 300


def _remember(seen: OrderedDict[str, None], key: str) -> None:
    seen[key] = None
    if len(seen) > _REMEMBER:
        seen.popitem(last=False)
