"""Sessions: CRUD, fork, children, history, usage, and the session event stream."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from app.errors import BadRequest
from app.events import Message, Usage
from app.http.chatview import chat_messages
from app.http.models.common import SQLITE_END, NonNegative
from app.http.models.sessions import CreateSession, ForkSession, UpdateSession
from app.http.sse import EventStreamResponse, StreamRoute
from app.kernel.api import Kernel, Session, UsageReport

HISTORY_PAGE_MAX = 1000  # messages in one page of history


def _after(after: int | None, last_event_id: str | None) -> int | None:
    if after is None and last_event_id:
        try:
            after = int(last_event_id)
        except ValueError:
            raise BadRequest("Last-Event-ID: must be an event seq") from None
        # 0 is the id of unstored frames (deltas; app.http.sse), never of a stored event: the
        # client's cursor is unknown, so it is served as having none (live only), not everything.
        after = after or None
    if after is not None and not 0 <= after < SQLITE_END:
        raise BadRequest("after: must be an event seq (0 to 2^63 - 1)")
    return after


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`, in the order the API document lists them."""
    api = APIRouter(tags=["sessions"])
    _sessions(api, kernel)
    _reading(api, kernel)
    return api


def _sessions(api: APIRouter, kernel: Kernel) -> None:
    """Create, list, change, delete and fork sessions; a session's children."""
    sessions = kernel.sessions

    @api.post("/sessions", response_model_exclude_none=True)
    async def create_session(body: CreateSession | None = None) -> Session:
        """Create a top-level session (manual approvals and the default model unless given)."""
        return await sessions.create(body.given() if body else {})

    @api.get("/sessions", response_model_exclude_none=True)
    async def list_sessions() -> list[Session]:
        """Top-level sessions, newest first."""
        return await sessions.all()

    @api.patch("/sessions/{session_id}", response_model_exclude_none=True)
    async def update_session(session_id: str, body: UpdateSession) -> Session:
        """Change settings, title (becomes manual) or pin; broadcasts `session_updated`."""
        return await sessions.update(session_id, body.given())

    @api.delete("/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str) -> Response:
        """Stop its work, delete children, data and workspace; must-delivers `session_deleted`."""
        await kernel.delete_session(session_id)
        return Response(status_code=204)

    @api.post("/sessions/{session_id}/fork", response_model_exclude_none=True)
    async def fork_session(session_id: str, body: ForkSession | None = None) -> Session:
        """A new session holding copies of the active messages (through `through_seq`)."""
        body = body or ForkSession()
        return await kernel.fork_session(session_id, body.title, body.through_seq)

    @api.get("/sessions/{session_id}/children", response_model_exclude_none=True)
    async def children(session_id: str) -> list[Session]:
        return await sessions.children(session_id)


def _reading(api: APIRouter, kernel: Kernel) -> None:
    """A session's history, usage and event stream; the usage report."""
    sessions = kernel.sessions

    @api.get("/sessions/{session_id}/history")
    async def history(
        session_id: str,
        limit: Annotated[
            int | None, Query(ge=1, le=HISTORY_PAGE_MAX, description="At most this many.")
        ] = None,
        before: Annotated[
            NonNegative | None, Query(description="Only messages with a smaller `event_seq`.")
        ] = None,
    ) -> list[Message]:
        """The active messages, oldest first (a call's `input` as the JSON text of its
        arguments, with its card `status`, as Foya's desktop reads them). With `limit`
        and/or `before`, the last page of them: our web client's paging, beyond Foya."""
        return chat_messages(await sessions.history(session_id, before, limit))

    @api.get("/sessions/{session_id}/usage")
    async def session_usage(session_id: str) -> Usage:
        """Token usage of the session's last model request."""
        return await sessions.last_usage(session_id)

    @api.get("/usage", response_model_exclude_none=True)
    async def usage_report(days: str = "30") -> UsageReport:
        """Totals over 7 or 30 days, 365 days of activity, usage per model."""
        return await kernel.usage_report(days)

    @api.get(
        "/sessions/{session_id}/events",
        response_class=Response,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def session_events(
        request: Request,
        session_id: str,
        after: Annotated[
            NonNegative | None, Query(description="Replay stored events with a larger seq.")
        ] = None,
        last_event_id: str | None = Header(None),
    ) -> Response:
        """SSE: stored events after `after`/Last-Event-ID (if given), then live ones."""
        start = _after(after, last_event_id)
        await sessions.row(session_id)  # 404 before the stream starts
        slots = request.app.state.stream_slots  # None on the Unix socket: its one user
        return StreamRoute(
            EventStreamResponse(lambda: kernel.session_events(session_id, start), slots)
        )
