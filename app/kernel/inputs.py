"""A turn's input (`POST …/turns` and the queue): its limits (reference §1), and its
attachments, which `attachments: [{id}]` turn into the session's committed artifacts.

Input names artifacts by id only; the stored user message carries the full AttachmentRef so the
log explains itself. Committing happens when input is accepted (started or queued): from then on
the artifact is part of the conversation and `DELETE` refuses it (`artifact_committed`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from app.artifacts import MAX_BYTES, Artifacts
from app.errors import BadRequest
from app.kernel.connections import Connections
from app.kernel.sessions import Sessions

MAX_ELEMENTS, MAX_ELEMENT_BYTES, MAX_ELEMENTS_BYTES, MAX_FILES = 8, 40 * 1024, 96 * 1024, 16


def validate_turn(body: dict[str, Any]) -> dict[str, Any]:
    """Input limits of `POST …/turns` and the queue (reference §1)."""
    message = body.get("message")
    if not isinstance(message, str) or not message.strip():
        raise BadRequest("message: must be a non-empty string", code="invalid_queue_message")
    elements = body.get("browser_elements") or []
    sizes = [len(json.dumps(e)) for e in elements]
    if len(elements) > MAX_ELEMENTS or any(s > MAX_ELEMENT_BYTES for s in sizes):
        raise BadRequest(
            f"browser_elements: at most {MAX_ELEMENTS}, {MAX_ELEMENT_BYTES // 1024} KiB each",
            code="invalid_queue_message",
        )
    if sum(sizes) > MAX_ELEMENTS_BYTES:
        raise BadRequest("browser_elements: at most 96 KiB in total", code="invalid_queue_message")
    if len(body.get("attachments") or []) > MAX_FILES:
        raise BadRequest(f"attachments: at most {MAX_FILES}", code="invalid_queue_message")
    return body


def image_input(connections: Connections, row: dict[str, Any]) -> bool:
    """Whether the session's model takes images; only an explicit `image_input: false` in the
    connection's model settings says no (unknown models are given the benefit of the doubt)."""
    cid = row.get("connection_id")
    if not cid or not connections.exists(cid):
        return True
    settings = (connections.get(cid).get("model_settings") or {}).get(row.get("model") or "", {})
    return settings.get("image_input") is not False


async def accept(
    artifacts: Artifacts, connections: Connections, row: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """Validated `body`, its attachments replaced by committed AttachmentRefs."""
    validate_turn(body)
    given = body.get("attachments")
    if not given:
        return body
    ids = [a.get("id") if isinstance(a, dict) else None for a in given]
    if not all(isinstance(i, str) and i for i in ids):
        raise BadRequest("attachments: each must be {id}", code="invalid_queue_message")
    if not image_input(connections, row):
        raise BadRequest(
            f"model {row.get('model')} does not accept images", code="image_input_unsupported"
        )
    refs = await asyncio.to_thread(artifacts.commit, str(row["id"]), [str(i) for i in ids])
    return {**body, "attachments": refs}


class SessionArtifacts:
    """The routes' entry to a session's artifacts: the session must exist, and image work runs
    off the event loop, at most `CONCURRENT_ADDS` at a time (re-encoding a large noisy image
    takes seconds of CPU)."""

    CONCURRENT_ADDS = 2
    #: The largest image accepted, and what a multipart request may carry around it.
    MAX_IMAGE_BYTES = MAX_BYTES
    MAX_UPLOAD_BYTES = MAX_BYTES + 64 * 1024

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.store = sessions.artifacts
        self._adds = asyncio.Semaphore(self.CONCURRENT_ADDS)

    async def add(self, session: str, name: str, data: bytes) -> dict[str, Any]:
        await self.sessions.row(session)
        async with self._adds:
            return await asyncio.to_thread(self.store.add, session, name, data)

    async def read(self, session: str, artifact_id: str) -> tuple[bytes, str]:
        await self.sessions.row(session)
        return await asyncio.to_thread(self.store.read, session, artifact_id)

    async def delete(self, session: str, artifact_id: str) -> None:
        await self.sessions.row(session)
        await asyncio.to_thread(self.store.delete, session, artifact_id)
