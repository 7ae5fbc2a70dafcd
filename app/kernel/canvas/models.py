"""Canvas documents as Foya stores and sends them, and the errors of the canvas routes.

A document is a visual workspace: nodes (images, videos, text, generation settings), edges
between them, the assets (images and videos) its nodes show, a viewport and a background.
`revision` counts its changes from 1; every write names the revision it saw.

Fields Foya leaves out when empty (`omitempty`) are `None` here and dropped on output
(`exclude_none`); an empty string or a zero sent for one of them is taken as absent, so they
round-trip as Foya writes them. Unknown fields are refused, as Foya's decoder does.

Exception map (status, code — Foya's):

- `CanvasNotFound` 404 `canvas_not_found` (an unknown canvas, asset, or session to attach to)
- `RevisionConflict` 409 `canvas_revision_conflict`, the body being the current document plus
  `code` and `message`
- `CanvasFailed` 400 `canvas_failed`: a rule of the document or of a generation request broken
- `MissingAsset` 400 `missing_asset`: an asset upload without its multipart field `file`
- `UnsupportedMedia` 415 `unsupported_canvas_media`, `AssetTooLarge` 413 `canvas_asset_too_large`
- `GenerationFailed` 502 `generation_provider_failed`: the image or video provider failed (or
  its result could not be downloaded or used)
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, FiniteFloat

from app.bodies import Strict
from app.errors import BadRequest, Conflict, FoyaError, NotFound

#: Go's int64/uint64 range, which Foya's documents hold.
Int64 = Annotated[int, Field(ge=-(2**63), lt=2**63)]
Revision = Annotated[int, Field(ge=0, lt=2**63)]


def _absent_if_empty(value: Any) -> Any:
    return None if value == "" or (type(value) in (int, float) and value == 0) else value


Text = Annotated[str | None, BeforeValidator(_absent_if_empty)]
OptionalFloat = Annotated[FiniteFloat | None, BeforeValidator(_absent_if_empty)]
OptionalInt = Annotated[Int64 | None, BeforeValidator(_absent_if_empty)]


class Wire(Strict):
    """A part of a document: unknown fields refused, as Foya's canvas handlers do."""

    def wire(self) -> dict[str, Any]:
        """As JSON values, Foya's empty fields left out."""
        return self.model_dump(mode="json", exclude_none=True)


class GenerationSpec(Wire):
    """What a `generation` node generates, and with which connection and model."""

    connection_id: Text = None
    mode: str = ""
    model: Text = None
    aspect_ratio: Text = None
    quality: Text = None
    count: OptionalInt = None
    duration: OptionalInt = None


class Node(Wire):
    id: str
    type: str
    title: Text = None
    asset_id: Text = None
    text: Text = None
    prompt: Text = None
    parent_id: Text = None
    status: Text = None
    error: Text = None
    generation: GenerationSpec | None = None
    x: FiniteFloat = 0
    y: FiniteFloat = 0
    width: FiniteFloat = 0
    height: FiniteFloat = 0
    rotation: OptionalFloat = None
    z_index: Int64 = 0


class Edge(Wire):
    id: str
    from_node_id: str
    to_node_id: str
    kind: Text = None


class Viewport(Wire):
    x: FiniteFloat = 0
    y: FiniteFloat = 0
    zoom: FiniteFloat = 0


class Asset(Wire):
    """An image or video a canvas holds (`kind`); its bytes are served by the asset route.
    Videos have no `width` and `height`, as in Foya."""

    id: str
    name: str
    kind: str
    media_type: str
    bytes: Int64
    width: OptionalInt = None
    height: OptionalInt = None
    sha256: str
    created_at: dt.datetime


class Document(Wire):
    id: str
    title: str
    session_id: Text = None
    project_id: Text = None
    revision: Revision
    nodes: list[Node] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    assets: list[Asset] = Field(default_factory=list)
    viewport: Viewport = Viewport(x=160, y=120, zoom=1)
    background: str = "dots"
    created_at: dt.datetime
    updated_at: dt.datetime

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def asset(self, asset_id: str) -> Asset | None:
        return next((a for a in self.assets if a.id == asset_id), None)


class NewCanvas(Wire):
    """`POST /canvases` (an empty body is allowed): a session's canvas takes its project."""

    title: str = ""
    session_id: str = ""
    project_id: str = ""


class CanvasChanges(Wire):
    """`PATCH /canvases/{id}`: the fields given replace the document's, if the canvas is still
    at `expected_revision`."""

    expected_revision: Revision
    title: str | None = None
    nodes: list[Node] | None = None
    edges: list[Edge] | None = None
    viewport: Viewport | None = None
    background: str | None = None


class GenerationRequest(Wire):
    """`POST /canvases/{id}/generate-image` and `…/generate-video`: generate what the
    `generation` node `config_node_id` describes into node `output_node_id`."""

    expected_revision: Revision
    config_node_id: str
    output_node_id: str
    connection_id: str = ""


class CanvasNotFound(NotFound):
    """An unknown canvas, asset, or session to attach a canvas to."""

    code = "canvas_not_found"


class RevisionConflict(Conflict):
    """A write named a revision that is not the current one; carries the current document."""

    code = "canvas_revision_conflict"

    def __init__(self, current: Document, expected: int) -> None:
        super().__init__(
            f"canvas revision conflict: expected revision {expected}, the canvas is at "
            f"{current.revision}; the current document is in this answer"
        )
        self.extra = current.wire()


class CanvasFailed(BadRequest):
    code = "canvas_failed"


class MissingAsset(BadRequest):
    """An asset upload without its multipart field `file`."""

    code = "missing_asset"


class UnsupportedMedia(FoyaError):
    """A canvas asset that is not an MP4, QuickTime or WebM video, nor a PNG, JPEG, WebP or GIF
    image."""

    status = 415
    code = "unsupported_canvas_media"


class AssetTooLarge(FoyaError):
    """A canvas asset upload over its size limit (500 MiB for a video, 20 MiB for an image)."""

    status = 413
    code = "canvas_asset_too_large"


class GenerationFailed(FoyaError):
    status = 502
    code = "generation_provider_failed"


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
