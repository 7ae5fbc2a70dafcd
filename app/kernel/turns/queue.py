"""Per-session input queues, in memory while the kernel runs.

Every change is reported by the caller as a stored, must-delivered `queue_updated{items}`, so
each session's last one is its queue: a start puts it back (`restore_all`), where Foya's
restart loses it. `restored` keeps the seq of the fact each queue came back from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from app.errors import BadRequest, NotFound
from app.events import QueueItem, input_context
from app.kernel.ids import iso_now, new_id
from app.kernel.turns.inputs import Accepted, InvalidInput


class QueueItemNotFound(NotFound):
    """No such queued message."""


@dataclass
class SessionQueue:
    items: list[QueueItem] = field(default_factory=list)
    paused: bool = False


def _renumber(queue: SessionQueue) -> None:
    for position, item in enumerate(queue.items):
        item["position"] = position


class Queues:
    """All sessions' queues."""

    def __init__(self) -> None:
        self._queues: dict[str, SessionQueue] = {}
        self.restored: dict[str, int] = {}  # session → seq of the `queue_updated` restored

    def restore_all(self, waiting: Iterable[tuple[str, int, list[QueueItem]]]) -> list[str]:
        """Put back the queues a stop left (session, seq, items); returns their sessions."""
        for session, seq, items in waiting:
            queue = self.of(session)
            queue.items = [item.copy() for item in items]
            _renumber(queue)
            self.restored[session] = seq
        return list(self.restored)

    def of(self, session: str) -> SessionQueue:
        return self._queues.setdefault(session, SessionQueue())

    def items(self, session: str) -> list[QueueItem]:
        return [item.copy() for item in self.of(session).items]

    def add(self, session: str, turn: Accepted) -> QueueItem:
        """Append an accepted input; returns the new item."""
        stamp = iso_now()
        item: QueueItem = {
            "id": new_id(),
            "session_id": session,
            "text": turn["message"],
            "position": 0,
            "created_at": stamp,
            "updated_at": stamp,
            **input_context(turn),
        }
        queue = self.of(session)
        queue.items.append(item)
        _renumber(queue)
        return item.copy()

    def _find(self, session: str, item_id: str) -> QueueItem:
        for item in self.of(session).items:
            if item["id"] == item_id:
                return item
        raise QueueItemNotFound(f"queued message {item_id} not found")

    def update(
        self, session: str, item_id: str, text: str | None, position: int | None
    ) -> QueueItem:
        queue = self.of(session)
        item = self._find(session, item_id)
        if text is not None:
            if not text.strip():
                raise InvalidInput("message: must not be empty")
            item["text"] = text
        if position is not None:
            if position < 0:
                raise BadRequest("position: must be 0 or more")
            queue.items.remove(item)
            queue.items.insert(min(position, len(queue.items)), item)
        item["updated_at"] = iso_now()
        _renumber(queue)
        return item.copy()

    def remove(self, session: str, item_id: str) -> None:
        queue = self.of(session)
        queue.items.remove(self._find(session, item_id))
        _renumber(queue)

    def to_head(self, session: str, item_id: str) -> None:
        self.update(session, item_id, None, 0)

    def pop(self, session: str) -> QueueItem | None:
        queue = self.of(session)
        if not queue.items:
            return None
        item = queue.items.pop(0)
        _renumber(queue)
        return item

    def restore(self, session: str, item: QueueItem) -> None:
        """Put a popped item back at the head (its turn could not start)."""
        queue = self.of(session)
        queue.items.insert(0, item)
        _renumber(queue)

    def drop(self, session: str) -> None:
        self._queues.pop(session, None)
        self.restored.pop(session, None)


def as_input(item: QueueItem) -> Accepted:
    """The accepted input a queued item holds (its text possibly edited since)."""
    return {"message": item["text"], **input_context(item)}
