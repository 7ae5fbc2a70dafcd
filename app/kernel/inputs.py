"""A turn's input (`POST …/turns` and the queue): its limits (reference §1), and its
attachments, which `attachments: [{id}]` turn into the session's committed artifacts.

Input names artifacts by id only; the stored user message carries the full AttachmentRef so the
log explains itself. Committing happens when input is accepted (started or queued): from then on
the artifact is part of the conversation and `DELETE` refuses it (`artifact_committed`).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from app.artifacts import MAX_BYTES, Artifacts
from app.errors import BadRequest
from app.kernel.connections import Connections
from app.kernel.sessions import Sessions
from app.text import has_lone_surrogate

MAX_ELEMENTS, MAX_ELEMENT_BYTES, MAX_ELEMENTS_BYTES, MAX_FILES = 8, 40 * 1024, 96 * 1024, 16
ELEMENT_FIELDS = ("page_url", "page_title", "tag", "selector", "text", "html")


class InvalidInput(BadRequest):
    """A turn or queue body outside the reference's input rules."""

    code = "invalid_queue_message"


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field}: must be a string")
    if has_lone_surrogate(value):
        raise InvalidInput(f"{field}: not valid Unicode text (lone surrogate)")
    return value


def _element(raw: Any) -> dict[str, Any]:
    """One browser element, trimmed as Foya stores it; its page must be an http(s) URL."""
    if not isinstance(raw, dict):
        raise InvalidInput("browser_elements: each must be an object")
    element = dict(raw)
    for key in ELEMENT_FIELDS:
        if element.get(key) is not None:
            element[key] = _text(element[key], f"browser_elements.{key}").strip()
    url = urlsplit(str(element.get("page_url") or ""))
    if url.scheme not in ("http", "https") or not url.netloc:
        raise InvalidInput("browser_elements.page_url: must be an http or https URL")
    if not element.get("tag") or not element.get("selector"):
        raise InvalidInput("browser_elements: tag and selector are required")
    element["tag"] = element["tag"].lower()
    return element


def validate_turn(body: dict[str, Any]) -> dict[str, Any]:
    """`body` checked against the input limits of `POST …/turns` and the queue (reference §1)
    and normalised: text may be empty only when attachments or browser elements carry the
    input; browser elements are trimmed and must point at an http(s) page."""
    message = _text(body.get("message", ""), "message")
    raw_elements = body.get("browser_elements") or []
    if not isinstance(raw_elements, list) or len(raw_elements) > MAX_ELEMENTS:
        raise InvalidInput(f"browser_elements: at most {MAX_ELEMENTS}")
    elements = [_element(e) for e in raw_elements]
    sizes = [sum(len(str(e.get(k) or "").encode()) for k in ELEMENT_FIELDS) for e in elements]
    if any(s > MAX_ELEMENT_BYTES for s in sizes):
        raise InvalidInput(f"browser_elements: at most {MAX_ELEMENT_BYTES // 1024} KiB each")
    if sum(sizes) > MAX_ELEMENTS_BYTES:
        raise InvalidInput("browser_elements: at most 96 KiB in total")
    attachments = body.get("attachments") or []
    if not isinstance(attachments, list) or len(attachments) > MAX_FILES:
        raise InvalidInput(f"attachments: at most {MAX_FILES}")
    if not message.strip() and not attachments and not elements:
        raise InvalidInput("message: must not be empty without attachments or browser elements")
    out = {**body, "message": message.strip()}
    if elements:
        out["browser_elements"] = elements
    return out


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
    body = validate_turn(body)
    given = body.get("attachments")
    if not given:
        return body
    ids = [a.get("id") if isinstance(a, dict) else None for a in given]
    if not all(isinstance(i, str) and i for i in ids):
        raise InvalidInput("attachments: each must be {id}")
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
