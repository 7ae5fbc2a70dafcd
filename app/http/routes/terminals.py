"""Terminals: a shell on a PTY per terminal, and its own event stream.

`GET …/{ref}/events` replays the terminal's kept events after `?after=N` (else `Last-Event-ID`,
else 0: everything kept, as Foya), then live ones; frames are `id: <terminal seq>`, `event:
terminal`, `data: {session_id, ref, seq, data?, exited?, exit_code?}` (app.kernel.terminals.replay
describes the gap marker). Errors: app.kernel.terminals.errors.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from app.http.models.common import NonNegative
from app.http.models.terminals import ResizeTerminal, StartTerminal, TerminalInput
from app.http.sse import EventStreamResponse, StreamRoute, cursor
from app.kernel.api import Kernel, TerminalSnapshot

TERMINAL = "/sessions/{session_id}/terminals/{ref}"


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["terminals"])
    terminals = kernel.terminals

    @api.post("/sessions/{session_id}/terminals", status_code=201)
    async def start_terminal(
        session_id: str, body: StartTerminal | None = None
    ) -> TerminalSnapshot:
        """Start the user's shell ($SHELL, else /bin/sh) on a new PTY in the session's
        working directory; 0 x 0 (or no body) is 80 x 24."""
        body = body or StartTerminal()
        return await terminals.start(session_id, body.cols, body.rows)

    @api.get("/sessions/{session_id}/terminals")
    async def list_terminals(session_id: str) -> list[TerminalSnapshot]:
        """The session's terminals, oldest first, without `buffer` (ours: Foya has no list)."""
        return await terminals.list(session_id)

    @api.get(TERMINAL)
    async def get_terminal(session_id: str, ref: str) -> TerminalSnapshot:
        """State, the last MiB of output (`buffer`) and the last event's seq."""
        return terminals.snapshot(session_id, ref)

    @api.post(TERMINAL + "/input", status_code=204)
    async def terminal_input(session_id: str, ref: str, body: TerminalInput) -> Response:
        """Send keystrokes or a paste (at most 1 MiB as UTF-8)."""
        await terminals.write(session_id, ref, body.input)
        return Response(status_code=204)

    @api.post(TERMINAL + "/resize", status_code=204)
    async def resize_terminal(session_id: str, ref: str, body: ResizeTerminal) -> Response:
        """New window size (0 for either: unchanged); the shell gets SIGWINCH."""
        terminals.resize(session_id, ref, body.cols, body.rows)
        return Response(status_code=204)

    @api.delete(TERMINAL, status_code=204)
    async def stop_terminal(session_id: str, ref: str) -> Response:
        """End the shell and every process of its session, and forget the terminal."""
        await terminals.stop(session_id, ref)
        return Response(status_code=204)

    @api.get(
        TERMINAL + "/events",
        response_class=Response,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def terminal_events(
        request: Request,
        session_id: str,
        ref: str,
        after: Annotated[
            NonNegative | None, Query(description="Replay kept events with a larger seq.")
        ] = None,
        last_event_id: str | None = Header(None),
    ) -> Response:
        """SSE: kept events after `after`/Last-Event-ID (all kept when neither), then live."""
        stream = terminals.stream(
            session_id, ref, cursor(after, last_event_id, "a terminal event seq") or 0
        )
        slots = request.app.state.stream_slots  # None on the Unix socket: its one user
        return StreamRoute(EventStreamResponse(stream.attached, slots))

    return api
