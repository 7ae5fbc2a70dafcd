"""Canvases (Foya's `/canvases` routes): documents, their event stream, assets, generation.

A stale `expected_revision` is answered 409 with the current document: Foya's body (the
document's fields) plus `code` `canvas_revision_conflict` and `message`. Uploads are multipart
(field `file`), read as they arrive (app.http.streamed_upload): a video (MP4, QuickTime, WebM
by its bytes) up to 500 MiB is streamed to disk, anything else must be an image (up to 20 MiB,
validated and re-encoded like session artifacts). The body cap of this route is its own
(`UPLOAD_LIMIT`: the largest video plus room for the multipart framing); the request guard
leaves it to the route (`is_upload`). Asset bytes never change, so they are served with an
immutable cache policy, their SHA-256 as the ETag (304 for a matching `If-None-Match`), and
byte ranges (app.http.ranges) so a player can seek.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from starlette.types import Scope

from app.errors import FoyaError
from app.http import ranges
from app.http.errors import error_response
from app.http.models.canvas import AssetCreated
from app.http.models.common import NonNegative
from app.http.routes.artifacts import IMMUTABLE, UPLOAD_SCHEMA
from app.http.sse import EventStreamResponse, StreamRoute, cursor
from app.http.streamed_upload import StreamedFile
from app.kernel.api import (
    MAX_VIDEO_BYTES,
    AssetTooLarge,
    CanvasChanges,
    Document,
    GenerationRequest,
    Kernel,
    MissingAsset,
    NewCanvas,
)

#: The asset upload's body cap: the largest video, and 1 MiB for the multipart framing.
UPLOAD_LIMIT = MAX_VIDEO_BYTES + 1024 * 1024
_UPLOAD_PATH = re.compile(r"/canvases/[^/]+/assets")
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"description": "A stale expected_revision: the current document."}
}


def is_upload(scope: Scope) -> bool:
    """The asset upload, which enforces its own (larger) body limit (app.http.guard)."""
    return scope["method"] == "POST" and _UPLOAD_PATH.fullmatch(scope["path"]) is not None


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`, in the order the API document lists them. Each handler asks
    `kernel.canvases` when called, so building the routes does not build the canvas service."""
    api = APIRouter(tags=["canvases"])
    _documents(api, kernel)
    _events(api, kernel)
    _assets(api, kernel)
    _generation(api, kernel)
    return api


def _documents(api: APIRouter, kernel: Kernel) -> None:
    """List, create, read, change and delete kernel.canvases."""

    @api.get("/canvases", response_model_exclude_none=True)
    async def list_canvases(session_id: str = "") -> list[Document]:
        """Every canvas (of `session_id`, if given), last changed first."""
        return kernel.canvases.listing(session_id)

    @api.post("/canvases", status_code=201, response_model_exclude_none=True)
    async def create_canvas(body: NewCanvas | None = None) -> Document:
        """A new, empty canvas (revision 1); a session's canvas takes the session's project."""
        return await kernel.canvases.create(body or NewCanvas())

    @api.get("/canvases/{canvas_id}", response_model_exclude_none=True)
    async def get_canvas(canvas_id: str) -> Document:
        return kernel.canvases.get(canvas_id)

    @api.patch("/canvases/{canvas_id}", response_model_exclude_none=True, responses=_CONFLICT)
    async def update_canvas(canvas_id: str, body: CanvasChanges) -> Document:
        """Replace the fields given, if the canvas is still at `expected_revision`."""
        return await kernel.canvases.update(canvas_id, body)

    @api.delete("/canvases/{canvas_id}", status_code=204)
    async def delete_canvas(canvas_id: str) -> Response:
        """Delete the canvas and its assets; its event streams end after `canvas_deleted`."""
        await kernel.canvases.delete(canvas_id)
        return Response(status_code=204)


def _events(api: APIRouter, kernel: Kernel) -> None:
    """A canvas's event stream."""

    @api.get(
        "/canvases/{canvas_id}/events",
        response_class=Response,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def canvas_events(
        request: Request,
        canvas_id: str,
        after: Annotated[
            NonNegative | None,
            Query(description="The revision the client has: a newer document is sent first."),
        ] = None,
        last_event_id: str | None = Header(None),
    ) -> Response:
        """SSE: each new document (`canvas_updated`, `canvas_deleted`; `id:` its revision)."""
        start = cursor(after, last_event_id, "a canvas revision")
        kernel.canvases.get(canvas_id)  # 404 before the stream starts
        slots = request.app.state.stream_slots  # None on the Unix socket: its one user
        return StreamRoute(
            EventStreamResponse(lambda: kernel.canvases.events(canvas_id, start), slots)
        )


def _assets(api: APIRouter, kernel: Kernel) -> None:
    """Upload an asset, read one back (cached, ranged)."""

    @api.post(
        "/canvases/{canvas_id}/assets",
        status_code=201,
        response_model=AssetCreated,
        response_model_exclude_none=True,
        openapi_extra=UPLOAD_SCHEMA,
    )
    async def upload_asset(canvas_id: str, request: Request) -> AssetCreated | Response:
        """Add a video (MP4, QuickTime or WebM, up to 500 MiB, stored as sent) or an image
        (PNG, JPEG, WebP or GIF, up to 20 MiB, re-encoded without metadata) to the assets."""
        try:
            kernel.canvases.get(canvas_id)
            upload = StreamedFile(
                request,
                UPLOAD_LIMIT,
                what="asset",
                too_large=AssetTooLarge(f"the upload is larger than {MAX_VIDEO_BYTES >> 20} MiB"),
                missing=MissingAsset('multipart field "file" is required'),
            )
            name = await upload.open()
            asset, doc = await kernel.canvases.add_upload(canvas_id, name, upload.chunks())
        except FoyaError as exc:
            # Refused with the body (partly) unread: hypercorn closes the connection after
            # the response, so tell the client not to reuse it.
            return error_response(exc.status, exc.code, exc.message, {"Connection": "close"})
        return AssetCreated(asset=asset, canvas=doc)

    @api.get(
        "/canvases/{canvas_id}/assets/{asset_id}",
        response_class=Response,
        responses={
            200: {"content": {"image/*": {}, "video/*": {}}},
            206: {"description": "The byte range asked for (`Range: bytes=a-b`)"},
            304: {"description": "Not modified"},
            416: {"description": "The range starts beyond the end (`range_not_satisfiable`)"},
        },
    )
    async def read_asset(
        canvas_id: str,
        asset_id: str,
        if_none_match: str | None = Header(None),
        range_: str | None = Header(None, alias="range"),
        if_range: str | None = Header(None),
    ) -> Response:
        """The asset's bytes, whole or a byte range; they never change, so clients may cache
        them for good."""
        asset = kernel.canvases.asset(canvas_id, asset_id)
        headers = {
            "Cache-Control": IMMUTABLE,
            "ETag": f'"{asset.sha256}"',
            "Accept-Ranges": "bytes",
        }
        if if_none_match and headers["ETag"] in re.split(r"\s*,\s*", if_none_match.strip()):
            return Response(status_code=304, headers=headers)
        body, asset = await kernel.canvases.read_asset(canvas_id, asset_id)
        return ranges.ranged(body.chunks, body.size, asset.media_type, headers, range_, if_range)


def _generation(api: APIRouter, kernel: Kernel) -> None:
    """Generate an output node's image or video."""

    @api.post(
        "/canvases/{canvas_id}/generate-image",
        response_model_exclude_none=True,
        responses=_CONFLICT,
    )
    async def generate_image(canvas_id: str, body: GenerationRequest) -> Document:
        """Generate the output node's image with the image connection; answers the document
        once done (both nodes `success`), or 502 `generation_provider_failed` (both `error`)."""
        return await kernel.canvases.generate_image(canvas_id, body)

    @api.post(
        "/canvases/{canvas_id}/generate-video",
        response_model_exclude_none=True,
        responses=_CONFLICT,
    )
    async def generate_video(canvas_id: str, body: GenerationRequest) -> Document:
        """Generate the output node's video with the video connection's task API (both nodes
        `queued`, then `running`, on the canvas stream); answers the document once the video
        is stored (both `success`), or 502 `generation_provider_failed` (both `error`)."""
        return await kernel.canvases.generate_video(canvas_id, body)
