"""The context event stream `GET /context/events`: rule and memory change notices.

Unlike the session stream, no cursor means "from the start" (Foya replays every stored event
after `Last-Event-ID`, 0 when absent); `?after=N` is accepted too and wins over the header.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from app.http.models.common import NonNegative
from app.http.sse import EventStreamResponse, StreamRoute, cursor
from app.kernel.api import Kernel, context_events


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
        start = cursor(after, last_event_id, "an event seq") or 0
        slots = request.app.state.stream_slots  # None on the Unix socket: its one user
        return StreamRoute(EventStreamResponse(lambda: context_events(journal, start), slots))

    return api
