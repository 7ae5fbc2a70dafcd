"""A canvas's event stream (topic `canvas:<id>`): each new document, as Foya sends it.

Events are `canvas_created`, `canvas_updated` and `canvas_deleted`, the envelope's `seq` (the
SSE `id:`) being the document's revision, `session` the canvas id and `payload` the document
(for `canvas_deleted`, the last document with its revision advanced once more).

Beyond Foya, a client that names the last revision it has (`Last-Event-ID` or `?after=N`) is
sent the current document first when it is newer, so a reconnect misses no change; without one
the stream is live only, as Foya's. The document is read after subscribing and live events at
or below a revision already sent are skipped (`ReplayStream`), so there is no gap and no
duplicate.
"""

from __future__ import annotations

from app.broker import Subscription
from app.events import Event
from app.kernel.canvas.models import Document
from app.kernel.canvas.store import CanvasStore
from app.kernel.ids import now_ns
from app.kernel.streams import ReplayStream

CREATED = "canvas_created"
UPDATED = "canvas_updated"
DELETED = "canvas_deleted"


def topic(canvas_id: str) -> str:
    """The broker topic of a canvas's events."""
    return f"canvas:{canvas_id}"


def event(kind: str, doc: Document) -> Event:
    return Event(doc.revision, kind, doc.id, None, now_ns(), doc.wire())


class CanvasStream(ReplayStream):
    """One client's view of a canvas: its current document if newer than `after`, then live."""

    def __init__(
        self, store: CanvasStore, canvas_id: str, sub: Subscription, after: int | None
    ) -> None:
        super().__init__(sub, after)
        self.store = store
        self.canvas_id = canvas_id

    async def _page(self, after: int) -> list[Event]:
        doc = self.store.find(self.canvas_id)
        return [event(UPDATED, doc)] if doc is not None and doc.revision > after else []
