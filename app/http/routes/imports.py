"""Imports and exports: other tools' histories in (`POST /imports`), portable archives out.

Beyond the Foya reference. `POST /imports` takes multipart/form-data: `file` (the archive or
transcript), `source` (chatbuddy, foya, claude-code, codex), optional `passphrase` (an
encrypted ChatBuddy backup), `with_keys` ("true": providers become connections) and
`project_id`. It answers 200 with the import's summary; a bad archive is a 400 and stores
nothing (app.imports.model lists the codes), one over `FOYA_MAX_IMPORT_MB` a 413.
`GET /sessions/{id}/export` is one session's archive (`?format=markdown`: its transcript
alone); `GET /export` every session's, or those named by repeated `session=`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import IO, Annotated, Literal

import anyio
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.types import Scope

from app.errors import BadRequest
from app.http.routes.artifacts import upload_schema
from app.http.streamed_upload import StreamedFile
from app.imports.model import ImportTooLarge
from app.kernel.api import UPLOADABLE, ImportSummary, Kernel, UploadForm

_UPLOAD_PATH = re.compile(r"/imports")
CHUNK = 1024 * 1024
UPLOAD_SCHEMA = upload_schema(
    {
        "source": {"type": "string", "enum": list(UPLOADABLE)},
        "passphrase": {"type": "string"},
        "with_keys": {"type": "boolean"},
        "project_id": {"type": "string"},
    },
    required=("source",),
)


def is_upload(scope: Scope) -> bool:
    """The import route, which enforces its own (larger) body limit (app.http.guard)."""
    return scope["method"] == "POST" and _UPLOAD_PATH.fullmatch(scope["path"]) is not None


def _flag(fields: dict[str, str], name: str) -> bool:
    value = fields.get(name, "false").strip().lower()
    if value not in ("true", "false", "1", "0", ""):
        raise BadRequest(f"{name} must be true or false")
    return value in ("true", "1")


def _form(fields: dict[str, str]) -> UploadForm:
    return UploadForm(
        fields.get("source", ""),
        passphrase=fields.get("passphrase") or None,
        with_keys=_flag(fields, "with_keys"),
        project_id=fields.get("project_id") or None,
    )


def _archive(file: IO[bytes], name: str) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        try:
            while data := await anyio.to_thread.run_sync(file.read, CHUNK):
                yield data
        finally:
            file.close()

    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(chunks(), media_type="application/zip", headers=headers)


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["imports"])
    limit = kernel.settings.max_import_mb * 1024 * 1024

    @api.post("/imports", openapi_extra=UPLOAD_SCHEMA)
    async def import_archive(request: Request) -> ImportSummary:
        """Import a ChatBuddy backup, a Foya export or one agent-CLI transcript."""
        too_large = ImportTooLarge(
            f"the archive is larger than {limit // (1024 * 1024)} MiB (FOYA_MAX_IMPORT_MB)"
        )
        # Streamed to a temporary file as it arrives: an upload is never held whole in memory.
        upload = StreamedFile(
            request,
            limit + 64 * 1024,
            what="archive",
            too_large=too_large,
            missing=BadRequest("send the archive in a multipart field named file"),
        )
        await upload.open()
        return await kernel.imports.upload_stream(upload.chunks(), lambda: _form(upload.fields))

    @api.get(
        "/sessions/{session_id}/export",
        responses={200: {"content": {"application/zip": {}, "text/markdown": {}}}},
        response_class=Response,
    )
    async def export_session(
        session_id: str, format: Literal["zip", "markdown"] = "zip"
    ) -> Response:
        """One session as a portable archive, or (`format=markdown`) its readable transcript."""
        if format == "markdown":
            text = await kernel.exports.transcript(session_id)
            return Response(text, media_type="text/markdown; charset=utf-8")
        file = await kernel.exports.archive([session_id])
        return _archive(file, f"foya-session-{session_id}.zip")

    @api.get(
        "/export",
        responses={200: {"content": {"application/zip": {}}}},
        response_class=Response,
    )
    async def export_sessions(session: Annotated[list[str] | None, Query()] = None) -> Response:
        """Every top-level session (or those named by `session=`) as a portable archive."""
        file = await kernel.exports.archive(session or None)
        return _archive(file, "foya-export.zip")

    return api
