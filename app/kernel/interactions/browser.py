"""Browser actions the model asks of a client that drives a browser (Foya's `browseruse`).

A browser tool (`browser_tools`) records `browser_action_requested` (the request: `id`,
`session_id`, `tool_call_id`, `browser_id` `agent-<session>`, `action` and its fields,
`created_at`) and waits for `POST /sessions/{id}/browser-actions/{request_id}` with the page
as the client saw it after the action (`url`, `title`, `revision`, `snapshot`, …, `error`, and
optionally a PNG screenshot as `screenshot_base64` + `media_type`). The result goes to the
tool and `browser_action_resolved {id, status: done | error}` is recorded; a request not
answered within the kernel's `browser_action_timeout`, or whose turn or tool call is cancelled,
is recorded `cancelled` instead.

A screenshot is checked as Foya checks it (media type `image/png`, at most 20 MiB decoded,
valid base64), then stored like an uploaded image (`app.artifacts`: identified by content,
bounded, re-encoded); the tool keeps it with the session's history. Backticks a model or page
put around URLs are dropped from `url` and from `url`/`href` values in a JSON snapshot.

Errors: `BrowserActionNotFound` 404 `browser_action_failed` (unknown session, request not
pending, or another session's), `BadRequest` 400 `bad_request` (a body `request_id` other than
the URL's; a screenshot that is not PNG or not base64), `ScreenshotTooLarge` 413
`browser_screenshot_too_large`, and the artifact errors of an image that does not decode
(415 `unsupported_image`, 413 `image_too_large`). Nothing changes on any of them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Required

from typing_extensions import TypedDict

from app.errors import BadRequest, FoyaError, NotFound
from app.events import BROWSER_ACTION_REQUESTED, BROWSER_ACTION_RESOLVED
from app.jsontypes import JSONObject
from app.kernel.interactions.waiting import Ended, Status, Waiters
from app.kernel.sessions import Sessions
from app.store.events import SessionNotFound
from app.tools import ToolError
from app.tools.base import Emit

MAX_SCREENSHOT_BYTES = 20 * 1024 * 1024
SCREENSHOT_TYPE = "image/png"


class BrowserActionNotFound(NotFound):
    """An unknown session, a request that is not pending, or another session's request."""

    code = "browser_action_failed"


class ScreenshotTooLarge(FoyaError):
    """A browser action's screenshot over its size limit."""

    status = 413
    code = "browser_screenshot_too_large"


class ActionFields(TypedDict, total=False):
    """An action's own fields (those it does not use, or leaves empty, are absent)."""

    url: str
    ref: str
    observation_id: str
    text: str
    key: str
    direction: str
    amount: int
    timeout_ms: int
    clear: bool
    full_page: bool


class ActionRequest(ActionFields):
    """`browser_action_requested`: what the client's browser should do."""

    id: Required[str]
    session_id: Required[str]
    tool_call_id: Required[str]
    browser_id: Required[str]
    action: Required[str]
    created_at: Required[str]


class ActionResult(TypedDict, total=False):
    """What the client reports after the action (fields it leaves empty are absent)."""

    url: str
    title: str
    revision: int
    observation_id: str
    snapshot: str
    code: str
    message: str
    pre_url: str
    post_url: str
    verified: bool
    actual_text: str
    trace: JSONObject
    error: str


@dataclass(frozen=True)
class Outcome:
    """A client's result, and its screenshot's AttachmentRef if it sent one."""

    result: ActionResult
    screenshot: dict[str, Any] | None = None


def clean_url(value: str) -> str:
    """`value` trimmed, without the backticks a model or page may wrap a URL in."""
    value = value.strip()
    if len(value) >= 2 and value.startswith("`") and value.endswith("`"):
        return value[1:-1].strip()
    return value


def _clean_links(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: clean_url(v) if k in ("url", "href") and isinstance(v, str) else _clean_links(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_clean_links(v) for v in value]
    return value


def clean_snapshot(raw: str) -> str:
    """A JSON snapshot with its `url`/`href` values cleaned (re-encoded compactly, keys
    sorted); any other text as it came."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return json.dumps(
        _clean_links(value), ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )


def decode_screenshot(data: str, media_type: str) -> bytes:
    """The screenshot's bytes, checked as Foya checks them (not yet as an image)."""
    if media_type != SCREENSHOT_TYPE:
        raise BadRequest("unsupported browser screenshot type")
    if len(data) // 4 * 3 > MAX_SCREENSHOT_BYTES:
        raise ScreenshotTooLarge("browser screenshot exceeds size limit")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("invalid browser screenshot") from None


class BrowserActions:
    """Pending browser actions, by request id; each waits at most `timeout` seconds."""

    def __init__(self, sessions: Sessions, timeout: float) -> None:
        self.sessions = sessions
        self.timeout = timeout
        self._waiters: Waiters[Outcome] = Waiters(BROWSER_ACTION_REQUESTED, BROWSER_ACTION_RESOLVED)

    async def perform(self, request: ActionRequest, emit: Emit) -> Outcome | Ended:
        """Record `request`, wait for the client's result, and keep its screenshot with the
        session's history (committed: it is the tool result's from now on)."""
        session = request["session_id"]
        outcome = await self._waiters.wait(request["id"], session, request, emit, self.timeout)
        if isinstance(outcome, Ended) or outcome.screenshot is None:
            return outcome
        artifacts = self.sessions.artifacts
        try:
            (ref,) = await asyncio.to_thread(artifacts.commit, session, [outcome.screenshot["id"]])
        except FoyaError as exc:  # deleted meanwhile through the artifact routes
            raise ToolError(f"the browser screenshot could not be kept: {exc.message}") from None
        return Outcome(outcome.result, ref)

    async def resolve(
        self,
        session: str,
        request_id: str,
        body_request_id: str | None,
        result: ActionResult,
        screenshot: tuple[str, str] | None,
    ) -> None:
        """`POST /sessions/{id}/browser-actions/{request_id}`: hand the client's `result` (and
        its `screenshot`, as (base64, media type)) to the waiting tool."""
        if body_request_id not in (None, "", request_id):
            raise BadRequest("browser action request ID mismatch")
        image = decode_screenshot(*screenshot) if screenshot else None
        try:
            await self.sessions.row(session)
        except SessionNotFound:
            raise _not_found() from None
        waiter = self._waiters.get(session, request_id)
        if waiter is None:
            raise _not_found()
        result = _cleaned(result)
        ref = None
        if image is not None:
            name = f"browser_{waiter.request['action']}-image"
            ref = await asyncio.to_thread(self.sessions.artifacts.add, session, name, image)
        status: Status = "error" if result.get("error") else "done"
        resolved = False
        try:
            resolved = await self._waiters.resolve(request_id, waiter, status, Outcome(result, ref))
        finally:
            if ref is not None and not resolved:
                await asyncio.to_thread(self.sessions.artifacts.delete, session, ref["id"])
        if not resolved:
            raise _not_found()


def _cleaned(result: ActionResult) -> ActionResult:
    out = result.copy()
    if "url" in out:
        out["url"] = clean_url(out["url"])
    if "snapshot" in out:
        out["snapshot"] = clean_snapshot(out["snapshot"])
    return out


def _not_found() -> BrowserActionNotFound:
    return BrowserActionNotFound("browser action not found")
