"""A turn's input (`POST …/turns`, the queue, a command run): its limits, its
attachments, which `attachments: [{id}]` turn into the session's committed artifacts, and its
workspace files.

Input names artifacts by id only; the stored user message carries the full AttachmentRef so the
log explains itself. Committing happens when input is accepted (started or queued): from then on
the artifact is part of the conversation and `DELETE` refuses it (`artifact_committed`).

`workspace_files` names files of the session's workspace the user picked (Foya's composer
references): at most 16, each an existing regular file inside the workspace, not a symbolic
link and not protected (`app.kernel.workspace.existing_file`). They are stored canonical
(relative, cleaned, without duplicates) on the queue item and the user message; the model is
told of each file by its path and reads it with its tools (`app.kernel.turns.context`), as in Foya:
its content is never copied into the log. A path that does not pass is 400
`invalid_queue_message`, Foya's code, and nothing is stored.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal, NotRequired
from urllib.parse import urlsplit

from typing_extensions import TypedDict

from app.artifacts import MAX_BYTES, Artifacts
from app.bodies import Lenient
from app.errors import BadRequest, FoyaError
from app.events import InputContext, QueueItem
from app.files import ProtectedPaths
from app.kernel.connections import Connections
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.kernel.workspace import existing_file
from app.text.surrogates import has_lone_surrogate

MAX_ELEMENTS, MAX_ELEMENT_BYTES, MAX_ELEMENTS_BYTES, MAX_FILES = 8, 40 * 1024, 96 * 1024, 16


class InvalidInput(BadRequest):
    """A turn or queue body outside the reference's input rules."""

    code = "invalid_queue_message"


class ImageInputUnsupported(BadRequest):
    """A turn with attachments for a model that does not accept images."""

    code = "image_input_unsupported"


class AttachmentId(Lenient):
    """An artifact a turn names; the stored message carries the artifact's full ref."""

    id: str = ""


class BrowserElement(Lenient):
    """A page element the user pointed at."""

    page_url: str | None = None
    page_title: str | None = None
    tag: str | None = None
    selector: str | None = None
    text: str | None = None
    html: str | None = None


class TurnInput(Lenient):
    """`POST …/turns` and `POST …/queue`, as the HTTP layer decodes it: a field
    of the wrong JSON type is a decode failure (400 `bad_request`), unknown fields are dropped,
    as Foya's decoder does. `accept` then applies the input rules (400 `invalid_queue_message`)."""

    message: str = ""
    skill_ref: str | None = None
    attachments: list[AttachmentId] | None = None
    browser_elements: list[BrowserElement] | None = None
    workspace_files: list[str] | None = None


class Accepted(InputContext):
    """A turn's input once accepted: its text, and the context its message and queue item
    carry."""

    message: str


class TurnAccepted(TypedDict):
    """`POST …/turns`' answer: the turn started, or its input was queued behind another."""

    run_id: str
    status: Literal["started", "queued"]
    queued: NotRequired[QueueItem]


def _text(value: str, field: str) -> str:
    if has_lone_surrogate(value):
        raise InvalidInput(f"{field}: not valid Unicode text (lone surrogate)")
    return value


def _element(element: BrowserElement) -> dict[str, str]:
    """One browser element, trimmed as Foya stores it; its page must be an http(s) URL."""
    fields = {
        key: _text(value, f"browser_elements.{key}").strip()
        for key, value in element.model_dump(exclude_none=True).items()
    }
    url = urlsplit(fields.get("page_url", ""))
    if url.scheme not in ("http", "https") or not url.netloc:
        raise InvalidInput("browser_elements.page_url: must be an http or https URL")
    if not fields.get("tag") or not fields.get("selector"):
        raise InvalidInput("browser_elements: tag and selector are required")
    fields["tag"] = fields["tag"].lower()
    return fields


def validate_turn(turn: TurnInput) -> Accepted:
    """`turn` checked against the input limits of `POST …/turns` and the queue
    and normalised: text may be empty only when attachments or browser elements carry the
    input; browser elements are trimmed and must point at an http(s) page."""
    message = _text(turn.message, "message")
    if len(turn.browser_elements or ()) > MAX_ELEMENTS:
        raise InvalidInput(f"browser_elements: at most {MAX_ELEMENTS}")
    elements = [_element(e) for e in turn.browser_elements or ()]
    sizes = [sum(len(value.encode()) for value in e.values()) for e in elements]
    if any(s > MAX_ELEMENT_BYTES for s in sizes):
        raise InvalidInput(f"browser_elements: at most {MAX_ELEMENT_BYTES // 1024} KiB each")
    if sum(sizes) > MAX_ELEMENTS_BYTES:
        raise InvalidInput("browser_elements: at most 96 KiB in total")
    if len(turn.attachments or ()) > MAX_FILES:
        raise InvalidInput(f"attachments: at most {MAX_FILES}")
    if len(turn.workspace_files or ()) > MAX_FILES:
        raise InvalidInput(f"workspace_files: at most {MAX_FILES}")
    for path in turn.workspace_files or ():
        _text(path, "workspace_files")
    if not message.strip() and not turn.attachments and not elements and not turn.workspace_files:
        raise InvalidInput(
            "message: must not be empty without attachments, browser elements or workspace files"
        )
    accepted: Accepted = {"message": message.strip()}
    if turn.skill_ref:
        accepted["skill_ref"] = turn.skill_ref
    if elements:
        accepted["browser_elements"] = elements
    return accepted


def image_input(connections: Connections, row: SessionRow) -> bool:
    """Whether the session's model takes images; only an explicit `image_input: false` in the
    connection's model settings says no (unknown models are given the benefit of the doubt)."""
    cid = row.get("connection_id")
    if not cid or not connections.exists(cid):
        return True
    settings = (connections.get(cid).get("model_settings") or {}).get(row.get("model") or "", {})
    return settings.get("image_input") is not False


def workspace_files(root: Path, paths: list[str], protected: ProtectedPaths) -> list[str]:
    """`paths` (trimmed) as the canonical paths of existing regular files of the workspace at
    `root`, first occurrence kept; `InvalidInput` naming the first that is not. Blocking."""
    out: list[str] = []
    for path in paths:
        try:
            canonical = existing_file(root, path.strip(), protected)
        except FoyaError as exc:
            raise InvalidInput(f"invalid workspace file {path!r}: {exc.message}") from None
        if canonical not in out:
            out.append(canonical)
    return out


async def accept(
    artifacts: Artifacts,
    connections: Connections,
    row: SessionRow,
    turn: TurnInput,
    workspace: tuple[Path, ProtectedPaths],
) -> Accepted:
    """`turn` checked by the input rules, its workspace files (`workspace`: the session's root
    and what is protected) made canonical, its attachments committed as AttachmentRefs."""
    accepted = validate_turn(turn)
    if turn.workspace_files:
        root, protected = workspace
        found = await asyncio.to_thread(workspace_files, root, turn.workspace_files, protected)
        accepted["workspace_files"] = found
    if not turn.attachments:
        return accepted
    ids = [attachment.id for attachment in turn.attachments]
    if not all(ids):
        raise InvalidInput("attachments: each must be {id}")
    if not image_input(connections, row):
        raise ImageInputUnsupported(f"model {row.get('model')} does not accept images")
    accepted["attachments"] = await asyncio.to_thread(artifacts.commit, str(row["id"]), ids)
    return accepted


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
