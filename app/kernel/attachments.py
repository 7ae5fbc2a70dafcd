"""Attachments of a turn: `attachments: [{id}]` become the session's committed artifacts.

Input names artifacts by id only; the stored user message carries the full AttachmentRef so the
log explains itself. Committing happens when input is accepted (started or queued): from then on
the artifact is part of the conversation and `DELETE` refuses it (`artifact_committed`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from app.artifacts import MAX_BYTES, Artifacts
from app.errors import BadRequest
from app.kernel.connections import Connections
from app.kernel.sessions import Sessions


def image_input(connections: Connections, row: dict[str, Any]) -> bool:
    """Whether the session's model takes images; only an explicit `image_input: false` in the
    connection's model settings says no (unknown models are given the benefit of the doubt)."""
    cid = row.get("connection_id")
    if not cid or not connections.exists(cid):
        return True
    settings = (connections.get(cid).get("model_settings") or {}).get(row.get("model") or "", {})
    return settings.get("image_input") is not False


async def resolve(
    artifacts: Artifacts, connections: Connections, row: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """`body` with its attachments replaced by committed AttachmentRefs."""
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
