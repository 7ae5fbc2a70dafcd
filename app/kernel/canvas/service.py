"""The canvas service: documents, their assets, their event stream, their generations.

Every change is made under one lock, written, then must-delivered on `canvas:<id>`, so each
canvas's events go out in revision order. A change names the revision it was made against; a
stale one is refused with the current document (`RevisionConflict`). Image work (validating
and re-encoding an upload) runs off the event loop, at most `CONCURRENT_ADDS` at a time, and
outside the lock.

An upload is told apart by its first bytes (`add_upload`): a video (app.kernel.canvas.media)
is streamed to disk as it arrives, up to 500 MiB; anything else is read as an image, up to
the image limit (20 MiB), and validated as one (415 `unsupported_canvas_media` otherwise).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.artifacts import MAX_BYTES as MAX_IMAGE_BYTES
from app.broker import Broker
from app.errors import NotFound
from app.kernel.canvas import media, rules
from app.kernel.canvas.generation import Generations
from app.kernel.canvas.models import (
    Asset,
    CanvasChanges,
    CanvasNotFound,
    Document,
    GenerationRequest,
    NewCanvas,
    RevisionConflict,
    now,
)
from app.kernel.canvas.ports import DocumentChanges, Edit
from app.kernel.canvas.store import CanvasStore
from app.kernel.canvas.stream import CREATED, DELETED, UPDATED, CanvasStream, event, topic
from app.kernel.connections import Connections
from app.kernel.projects import Projects, UnknownProject
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
from app.metrics import Metrics

if TYPE_CHECKING:
    from app.kernel.web.fetch import Fetcher

DEFAULT_TITLE = "Untitled canvas"


class Canvases:
    """Canvases: CRUD, assets, events and image generation."""

    CONCURRENT_ADDS = 2

    def __init__(
        self,
        data_dir: Path,
        broker: Broker,
        sessions: Sessions,
        projects: Projects,
        connections: Connections,
        providers: Providers,
        metrics: Metrics,
        fetcher: Callable[[], Fetcher],
    ) -> None:
        self.store = CanvasStore(data_dir)
        self.broker = broker
        self.sessions = sessions
        self.projects = projects
        self.generations = Generations(self, connections, providers, metrics, fetcher)
        self._lock = asyncio.Lock()
        self._adds = asyncio.Semaphore(self.CONCURRENT_ADDS)

    def load(self) -> None:
        """Read the documents; generations a stop or crash interrupted become `error`."""
        self.store.load()

    async def stop(self) -> None:
        """End running generations (their nodes become `error` at the next start)."""
        await self.generations.stop()

    def get(self, canvas_id: str) -> Document:
        return self.store.get(canvas_id)

    def listing(self, session_id: str = "") -> list[Document]:
        """Every canvas (of `session_id`, if given), last changed first."""
        docs = [d for d in self.store.all() if not session_id or d.session_id == session_id]
        return sorted(docs, key=lambda d: d.updated_at, reverse=True)

    async def create(self, new: NewCanvas) -> Document:
        project_id = new.project_id
        if new.session_id:
            try:
                row = await self.sessions.row(new.session_id)
            except NotFound:
                raise CanvasNotFound(f"session {new.session_id} not found") from None
            project_id = project_id or str(row.get("project_id") or "")
        if project_id and not self.projects.exists(project_id):
            raise UnknownProject(f"project {project_id} not found")
        stamp = now()
        doc = Document(
            id=secrets.token_hex(16),
            title=new.title.strip() or DEFAULT_TITLE,
            session_id=new.session_id or None,
            project_id=project_id or None,
            revision=1,
            created_at=stamp,
            updated_at=stamp,
        )
        async with self._lock:
            await self.store.put(doc)
            await self.broker.deliver(topic(doc.id), event(CREATED, doc))
        return doc

    async def update(self, canvas_id: str, changes: CanvasChanges) -> Document:
        """Replace the fields given, checked by Foya's rules, as one new revision."""

        def edit(doc: Document) -> DocumentChanges:
            fields: DocumentChanges = {}
            if changes.title is not None:
                fields["title"] = rules.title(changes.title)
            nodes = doc.nodes
            if changes.nodes is not None:
                rules.nodes(changes.nodes, doc.assets)
                fields["nodes"] = nodes = changes.nodes
            if changes.edges is not None:
                rules.edges(changes.edges, nodes)
                fields["edges"] = changes.edges
            if changes.viewport is not None:
                rules.viewport(changes.viewport)
                fields["viewport"] = changes.viewport
            if changes.background is not None:
                fields["background"] = rules.background(changes.background)
            return fields

        return await self.change(canvas_id, edit, changes.expected_revision)

    async def change(self, canvas_id: str, edit: Edit, expected: int | None = None) -> Document:
        """Apply `edit` to the current document (at revision `expected`, if given) as a new
        revision: written, then delivered to the canvas's subscribers."""
        async with self._lock:
            current = self.store.get(canvas_id)
            if expected is not None and expected != current.revision:
                raise RevisionConflict(current, expected)
            fields = edit(current)
            doc = current.model_copy(
                update={**fields, "revision": current.revision + 1, "updated_at": now()}
            )
            await self.store.put(doc)
            await self.broker.deliver(topic(canvas_id), event(UPDATED, doc))
            return doc

    async def delete(self, canvas_id: str) -> None:
        """Stop its generations, forget it and its assets; `canvas_deleted` ends its streams."""
        self.store.get(canvas_id)
        await self.generations.cancel(canvas_id)
        async with self._lock:
            doc = self.store.get(canvas_id)
            await self.store.remove(canvas_id)
            gone = doc.model_copy(update={"revision": doc.revision + 1, "updated_at": now()})
            await self.broker.deliver(topic(canvas_id), event(DELETED, gone))
        self.broker.end_topic(topic(canvas_id))

    async def add_upload(
        self, canvas_id: str, name: str, chunks: AsyncIterator[bytes]
    ) -> tuple[Asset, Document]:
        """Store an uploaded video or image arriving as `chunks` (see the module docstring) and
        add it to the canvas's assets, as a new revision."""
        self.store.get(canvas_id)
        head = await media.peek(chunks)
        media_type = media.video_type(head)
        if media_type is None:
            return await self.add_asset(
                canvas_id, name, await media.collect(head, chunks, MAX_IMAGE_BYTES)
            )
        received = await media.receive(self.store.staging, chunks, head)
        asset = await self.store_video(canvas_id, name, media_type, received)
        doc = await self.change(canvas_id, lambda d: {"assets": [*d.assets, asset]})
        return asset, doc

    async def store_video(
        self, canvas_id: str, name: str, media_type: str, received: media.Received
    ) -> Asset:
        """A staged video stored among the canvas's assets but not yet in its document."""
        try:
            self.store.get(canvas_id)
            asset = await asyncio.to_thread(
                self.store.add_video, canvas_id, name, media_type, received
            )
        except BaseException:
            await asyncio.to_thread(received.path.unlink, missing_ok=True)
            raise
        if self.store.find(canvas_id) is None:  # deleted meanwhile: leave nothing behind
            await asyncio.to_thread(self.store.drop_assets, canvas_id)
            raise CanvasNotFound(f"canvas {canvas_id} not found")
        return asset

    async def add_asset(self, canvas_id: str, name: str, data: bytes) -> tuple[Asset, Document]:
        """Store an uploaded image (validated and re-encoded like session artifacts) and add it
        to the canvas's assets, as a new revision."""
        asset = await self.store_image(canvas_id, name, data)
        doc = await self.change(canvas_id, lambda d: {"assets": [*d.assets, asset]})
        return asset, doc

    async def store_image(self, canvas_id: str, name: str, data: bytes) -> Asset:
        """An image stored among the canvas's assets but not yet in its document."""
        self.store.get(canvas_id)
        async with self._adds:
            asset = await asyncio.to_thread(self.store.add_asset, canvas_id, name, data)
        if self.store.find(canvas_id) is None:  # deleted meanwhile: leave nothing behind
            await asyncio.to_thread(self.store.drop_assets, canvas_id)
            raise CanvasNotFound(f"canvas {canvas_id} not found")
        return asset

    async def read_asset(self, canvas_id: str, asset_id: str) -> tuple[media.AssetBody, Asset]:
        """An asset's bytes to serve (an image's checked against its SHA-256, a video's file
        against its size) and its description."""
        asset = self.asset(canvas_id, asset_id)
        if asset.kind == "video":
            path = await asyncio.to_thread(self.store.open_video, canvas_id, asset)
            return media.AssetBody(asset.bytes, path=path), asset
        data = await asyncio.to_thread(self.store.read_asset, canvas_id, asset_id)
        return media.AssetBody(len(data), data=data), asset

    def asset(self, canvas_id: str, asset_id: str) -> Asset:
        found = self.store.get(canvas_id).asset(asset_id)
        if found is None:
            raise CanvasNotFound(f"canvas asset {asset_id} not found")
        return found

    async def generate_image(self, canvas_id: str, request: GenerationRequest) -> Document:
        return await self.generations.image(canvas_id, request)

    async def generate_video(self, canvas_id: str, request: GenerationRequest) -> Document:
        return await self.generations.video(canvas_id, request)

    @contextlib.asynccontextmanager
    async def events(self, canvas_id: str, after: int | None) -> AsyncIterator[CanvasStream]:
        """The canvas's events: its current document first if newer than `after` (when
        given), then each new one. A revision beyond the current one (none a client could
        have) counts as the current one, so no later change is skipped."""
        current = self.store.get(canvas_id).revision
        with self.broker.subscribe(topic(canvas_id)) as sub:
            yield CanvasStream(
                self.store, canvas_id, sub, None if after is None else min(after, current)
            )
