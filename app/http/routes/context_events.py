"""The context event stream `GET /context/events` (reference §3): rule and memory change notices.

Unlike the session stream, no cursor means "from the start" (Foya replays every stored event
after `Last-Event-ID`, 0 when absent); `?after=N` is accepted too and wins over the header.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from app.errors import BadRequest
from app.http.models import SQLITE_END, NonNegative
from app.http.sse import EventStreamResponse, StreamRoute
from app.kernel import Kernel
from app.kernel.usercontext.stream import context_events


def _after(after: int | None, last_event_id: str | None) -> int:
    if after is not None:
        return after
    if not last_event_id:
        return 0
    try:
        seq = int(last_event_id)
    except ValueError:
        raise BadRequest("Last-Event-ID: must be an event seq") from None
    if not 0 <= seq < SQLITE_END:
        raise BadRequest("Last-Event-ID: must be an event seq (0 to 2^63 - 1)")
    return seq


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["context"])
    journal = kernel.context_journal

    @api.get(
        "/context/events",
        response_class=Response,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def get_context_events(
        request: Request,
        after: Annotated[
            NonNegative | None, Query(description="Replay journal events with a larger seq.")
        ] = None,
        last_event_id: str | None = Header(None),
    ) -> Response:
        """SSE: journal events after `after`/Last-Event-ID (all when neither), then live ones."""
        start = _after(after, last_event_id)
        slots = request.app.state.stream_slots  # None on the Unix socket: its one user
        return StreamRoute(EventStreamResponse(lambda: context_events(journal, start), slots))

    return api
