"""Canvas documents in `<data-dir>/canvases.json` and their assets in `<data-dir>/canvas-assets/`.

The file is Foya's: a JSON array of documents, oldest first, written atomically (0600). Every
document is held in memory; a change is written first and made current only once written, so
a failed write (a full disk) changes nothing.

Images are stored by `app.artifacts` (the session artifacts' validation, re-encoding without
metadata, and checksums), one directory per canvas: `canvas-assets/<canvas>/<asset>.<ext>` and
its `<asset>.json`, directories 0700 and files 0600. Videos are stored as received, in the same
directory (`<asset>.mp4|mov|webm`); their description is the document's asset alone. They are
staged in `canvas-assets/.incoming/` first (app.kernel.canvas.media); what a crash left there
is removed on load.

On load, a node left `running` or `queued` (the kernel stopped or crashed mid-generation)
becomes `error`, as in Foya, with a new revision so clients holding the old one reload it. A
file that cannot be read whole (not JSON, a document that breaks the shapes) is copied aside to
`canvases.json.unreadable-<unix time>` and logged; the documents that could be read are served.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.artifacts import (
    ArtifactCorrupt,
    ArtifactNotFound,
    Artifacts,
    ImageTooLarge,
    InvalidArtifactId,
    UnsupportedImage,
    display_name,
)
from app.files import write_bytes_atomic, write_json_atomic
from app.kernel.canvas.media import EXTENSIONS, Received, place
from app.kernel.canvas.models import (
    Asset,
    AssetTooLarge,
    CanvasNotFound,
    Document,
    UnsupportedMedia,
    now,
)
from app.logs import get_logger

FILE = "canvases.json"
ASSETS = "canvas-assets"
INTERRUPTED = "Generation was interrupted by an application restart"
STAGING = ".incoming"
_UNFINISHED = ("running", "queued")
# Canvas ids name asset directories: they must be plain names (Foya's are 32 hex).
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ASSET_ID = re.compile(r"[0-9a-f]{32}")


class CanvasStore:
    """Every canvas document, and the assets of each."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE
        self.root = data_dir / ASSETS
        self.assets = Artifacts(self.root)
        self.staging = self.root / STAGING
        self._docs: dict[str, Document] = {}

    def load(self) -> None:
        """Read the file (missing: no canvases) and mark interrupted generations `error`."""
        docs, problems = _parse(self.path)
        if problems:
            aside = self.path.with_name(f"{FILE}.unreadable-{int(time.time())}")
            write_bytes_atomic(aside, self.path.read_bytes())
            get_logger("foya.canvas").warning(
                "canvases.json: served what could be read; the file is kept aside",
                kept_at=str(aside),
                problem=problems[0],
                problems=len(problems),
            )
        recovered = {cid: _interrupted(doc) for cid, doc in docs.items()}
        if problems or recovered != docs:
            self._write(recovered)
        self._docs = recovered
        shutil.rmtree(self.staging, ignore_errors=True)  # uploads a crash cut short

    def get(self, canvas_id: str) -> Document:
        try:
            return self._docs[canvas_id]
        except KeyError:
            raise CanvasNotFound(f"canvas {canvas_id} not found") from None

    def find(self, canvas_id: str) -> Document | None:
        return self._docs.get(canvas_id)

    def all(self) -> list[Document]:
        return list(self._docs.values())

    async def put(self, doc: Document) -> None:
        """Write `doc` (new or changed), then make it current."""
        docs = {**self._docs, doc.id: doc}
        await asyncio.to_thread(self._write, docs)
        self._docs = docs

    async def remove(self, canvas_id: str) -> None:
        """Forget the canvas, then delete its assets."""
        docs = {k: v for k, v in self._docs.items() if k != canvas_id}
        await asyncio.to_thread(self._write, docs)
        self._docs = docs
        await asyncio.to_thread(self.drop_assets, canvas_id)

    def add_asset(self, canvas_id: str, name: str, data: bytes) -> Asset:
        """Validate, re-encode and store an image (blocking, CPU bound); not yet in a document."""
        try:
            ref = self.assets.add(canvas_id, name, data)
        except UnsupportedImage as exc:
            raise UnsupportedMedia(f"unsupported canvas media: {exc.message}") from None
        except ImageTooLarge as exc:
            raise AssetTooLarge(f"canvas asset is too large: {exc.message}") from None
        return Asset(**ref, created_at=now())

    def add_video(self, canvas_id: str, name: str, media_type: str, received: Received) -> Asset:
        """Store a staged video (blocking); not yet in a document."""
        asset = Asset(
            id=secrets.token_hex(16),
            name=display_name(name or "video"),
            kind="video",
            media_type=media_type,
            bytes=received.size,
            sha256=received.sha256,
            created_at=now(),
        )
        place(received, self.video_path(canvas_id, asset))
        return asset

    def video_path(self, canvas_id: str, asset: Asset) -> Path:
        """Where a video asset's bytes are (the ids are checked: they name files)."""
        if not (_ID.fullmatch(canvas_id) and _ASSET_ID.fullmatch(asset.id)):
            raise CanvasNotFound(f"canvas asset {asset.id} not found")
        extension = EXTENSIONS.get(asset.media_type)
        if extension is None:  # a document written by another program
            raise ArtifactCorrupt(f"canvas asset {asset.id}: no stored video of that type")
        return self.root / canvas_id / f"{asset.id}.{extension}"

    def open_video(self, canvas_id: str, asset: Asset) -> Path:
        """A video asset's file, checked to be whole by its size (blocking); hashing up to
        500 MiB per read would make seeking useless."""
        path = self.video_path(canvas_id, asset)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            self.get(canvas_id)  # the canvas deleted meanwhile: that is a 404, not damage
            raise ArtifactCorrupt(f"canvas asset {asset.id}: the video file is missing") from None
        if size != asset.bytes:
            raise ArtifactCorrupt(f"canvas asset {asset.id}: the video file is damaged")
        return path

    def drop_assets(self, canvas_id: str) -> None:
        """Delete every asset of a canvas (blocking)."""
        self.assets.remove_session(canvas_id)

    def read_asset(self, canvas_id: str, asset_id: str) -> bytes:
        """An asset's bytes, checked against its SHA-256 (blocking)."""
        try:
            return self.assets.read(canvas_id, asset_id)[0]
        except (ArtifactNotFound, InvalidArtifactId):
            raise CanvasNotFound(f"canvas asset {asset_id} not found") from None

    def _write(self, docs: dict[str, Document]) -> None:
        ordered = sorted(docs.values(), key=lambda d: d.created_at)
        write_json_atomic(self.path, [d.wire() for d in ordered], mode=0o600)


def _parse(path: Path) -> tuple[dict[str, Document], list[str]]:
    """The documents of the file, and what could not be read."""
    try:
        raw: Any = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}, []
    except ValueError as exc:
        return {}, [f"not JSON: {exc}"]
    if not isinstance(raw, list):
        return {}, ["not a JSON array of documents"]
    docs: dict[str, Document] = {}
    problems = []
    for item in raw:
        try:
            doc = Document.model_validate(item)
        except ValidationError as exc:
            problems.append(f"a document breaks the canvas shape: {exc.errors()[0]['msg']}")
            continue
        if not _ID.fullmatch(doc.id) or doc.id in docs:
            problems.append(f"unusable or repeated canvas id {doc.id!r}")
            continue
        docs[doc.id] = doc
    return docs, problems


def _interrupted(doc: Document) -> Document:
    """`doc` with every unfinished node turned `error` (a new revision), or `doc` itself."""
    if not any(n.status in _UNFINISHED for n in doc.nodes):
        return doc
    nodes = [
        n.model_copy(update={"status": "error", "error": INTERRUPTED})
        if n.status in _UNFINISHED
        else n
        for n in doc.nodes
    ]
    return doc.model_copy(
        update={"nodes": nodes, "revision": doc.revision + 1, "updated_at": now()}
    )
