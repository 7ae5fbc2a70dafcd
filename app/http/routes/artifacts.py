"""Artifacts: images uploaded for a session's turns."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.types import Scope

from app.artifacts import ImageTooLarge
from app.errors import BadRequest, FoyaError
from app.http.errors import error_response
from app.http.models.artifacts import Attachment, AttachmentCreated
from app.kernel.api import Kernel

IMMUTABLE = "private, max-age=31536000, immutable"
_UPLOAD_PATH = re.compile(r"/sessions/[^/]+/artifacts")


def upload_schema(
    fields: dict[str, Any] | None = None, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The OpenAPI request body of a multipart upload: the field `file`, and `fields`."""
    properties = {"file": {"type": "string", "format": "binary"}, **(fields or {})}
    schema = {"type": "object", "required": ["file", *required], "properties": properties}
    return {
        "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}
    }


UPLOAD_SCHEMA = upload_schema()


def is_upload(scope: Scope) -> bool:
    """The upload route, which enforces its own (larger) body limit instead of the boundary's
    (app.http.guard)."""
    return scope["method"] == "POST" and _UPLOAD_PATH.fullmatch(scope["path"]) is not None


def _too_large(limit: int) -> FoyaError:
    return ImageTooLarge(f"the upload is larger than {limit // (1024 * 1024)} MiB")


async def _body(request: Request, limit: int, too_large: FoyaError) -> bytes:
    """The request body, refused with `too_large` as soon as it passes `limit` (never spooled
    whole)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def multipart_file(
    request: Request, limit: int, *, what: str, too_large: FoyaError, missing: FoyaError
) -> tuple[str, bytes]:
    """(file name, bytes) of the multipart field `file` of an upload of `what` (an image, an
    asset), at most `limit` bytes in all (`too_large`); `missing` when there is no such field.
    Session artifacts and canvas assets are uploaded this way."""
    name, data, _ = await multipart_upload(
        request, limit, what=what, too_large=too_large, missing=missing
    )
    return name or "image", data


async def multipart_upload(
    request: Request, limit: int, *, what: str, too_large: FoyaError, missing: FoyaError
) -> tuple[str, bytes, dict[str, str]]:
    """`multipart_file`, also returning the form's text fields."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise BadRequest(f"send the {what} as multipart/form-data with a field named file")
    body = await _body(request, limit, too_large)

    async def stream() -> AsyncGenerator[bytes, None]:
        yield body

    try:
        form = await MultiPartParser(request.headers, stream(), max_files=1, max_fields=8).parse()
    except MultiPartException as exc:
        raise BadRequest(f"malformed multipart body: {exc.message}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise missing
        fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        return upload.filename or "", await upload.read(), fields
    finally:
        await form.close()


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["artifacts"])
    artifacts = kernel.artifacts

    @api.post(
        "/sessions/{session_id}/artifacts",
        status_code=201,
        response_model=AttachmentCreated,
        response_model_exclude_none=True,
        openapi_extra=UPLOAD_SCHEMA,
    )
    async def upload(session_id: str, request: Request) -> Any:
        """Store a PNG, JPEG, WebP or GIF (re-encoded without metadata) for a later turn."""
        try:
            limit = artifacts.MAX_UPLOAD_BYTES
            name, data = await multipart_file(
                request,
                limit,
                what="image",
                too_large=_too_large(limit),
                missing=BadRequest("the multipart field file is missing"),
            )
        except FoyaError as exc:
            # Refused with the body (partly) unread: hypercorn closes the connection after
            # the response, so tell the client not to reuse it.
            return error_response(exc.status, exc.code, exc.message, {"Connection": "close"})
        if len(data) > artifacts.MAX_IMAGE_BYTES:
            raise _too_large(artifacts.MAX_IMAGE_BYTES)
        ref = await artifacts.add(session_id, name, data)
        return AttachmentCreated(attachment=Attachment(**ref))

    @api.get(
        "/sessions/{session_id}/artifacts/{artifact_id}",
        response_class=Response,
        responses={200: {"content": {"image/*": {}}}},
    )
    async def read(session_id: str, artifact_id: str) -> Response:
        """The stored image; its content never changes, so clients may cache it for good."""
        data, media_type = await artifacts.read(session_id, artifact_id)
        return Response(data, media_type=media_type, headers={"Cache-Control": IMMUTABLE})

    @api.delete("/sessions/{session_id}/artifacts/{artifact_id}", status_code=204)
    async def delete(session_id: str, artifact_id: str) -> Response:
        """Remove an artifact no turn has used (409 `artifact_committed` otherwise)."""
        await artifacts.delete(session_id, artifact_id)
        return Response(status_code=204)

    return api
