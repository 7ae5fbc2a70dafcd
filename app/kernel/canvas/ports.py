"""What image and video generation need of the canvases, declared below both.

`Canvases` (the service) builds `Generations`, which runs jobs that read a canvas and write
their result back into it. So that neither imports the other, the jobs name what they use as
`Board`, which `Canvases` fits by its shape, and an edit of a document is an `Edit` returning
`DocumentChanges`: the fields of the document it replaces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from typing_extensions import TypedDict

from app.kernel.canvas.media import Received
from app.kernel.canvas.models import Asset, Document, Edge, Node, Viewport
from app.kernel.canvas.store import CanvasStore


class DocumentChanges(TypedDict, total=False):
    """The fields of a document an edit replaces (the revision and time are the service's)."""

    title: str
    nodes: list[Node]
    edges: list[Edge]
    viewport: Viewport
    background: str
    assets: list[Asset]


#: A change: the fields to replace, computed from the current document (may raise to refuse).
Edit = Callable[[Document], DocumentChanges]


class Board(Protocol):
    """The canvases as a generation job sees them."""

    @property
    def store(self) -> CanvasStore: ...

    def get(self, canvas_id: str) -> Document:
        """The canvas's current document (`CanvasNotFound` if it is gone)."""
        ...

    def asset(self, canvas_id: str, asset_id: str) -> Asset:
        """One asset of the canvas (`CanvasNotFound` if it is gone)."""
        ...

    async def change(self, canvas_id: str, edit: Edit, expected: int | None = None) -> Document:
        """Apply `edit` as a new revision of the canvas."""
        ...

    async def store_image(self, canvas_id: str, name: str, data: bytes) -> Asset:
        """An image stored among the canvas's assets but not yet in its document."""
        ...

    async def store_video(
        self, canvas_id: str, name: str, media_type: str, received: Received
    ) -> Asset:
        """A staged video stored among the canvas's assets but not yet in its document."""
        ...
