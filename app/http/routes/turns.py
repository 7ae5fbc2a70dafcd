"""Turns, cancel, the input queue, approvals and tool cancel."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.events import QueueItem
from app.http.models.turns import Decision, UpdateQueueItem
from app.kernel.api import Compacted, Kernel, TurnAccepted, TurnInput


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["turns"])
    turns = kernel.turns

    @api.post("/sessions/{session_id}/turns", response_model_exclude_none=True)
    async def submit(session_id: str, body: TurnInput) -> TurnAccepted:
        """Start a turn, or queue it while the session is busy."""
        return await turns.submit(session_id, body)

    @api.post("/sessions/{session_id}/cancel", status_code=204)
    async def cancel(session_id: str) -> Response:
        """Stop the running turn and pause the queue (items are kept). Always 204."""
        await turns.cancel(session_id)
        return Response(status_code=204)

    @api.get("/sessions/{session_id}/queue")
    async def queue(session_id: str) -> list[QueueItem]:
        return await kernel.queue_items(session_id)

    @api.post("/sessions/{session_id}/queue", status_code=201)
    async def enqueue(session_id: str, body: TurnInput) -> QueueItem:
        """Add input to the queue; never starts a turn."""
        return await turns.enqueue(session_id, body)

    @api.patch("/sessions/{session_id}/queue/{message_id}")
    async def update_item(session_id: str, message_id: str, body: UpdateQueueItem) -> QueueItem:
        """Edit a queued message or move it (0-based position)."""
        return await turns.update_item(session_id, message_id, body.message, body.position)

    @api.delete("/sessions/{session_id}/queue/{message_id}", status_code=204)
    async def remove_item(session_id: str, message_id: str) -> Response:
        await turns.remove_item(session_id, message_id)
        return Response(status_code=204)

    @api.post("/sessions/{session_id}/queue/{message_id}/dispatch")
    async def dispatch(session_id: str, message_id: str) -> QueueItem:
        """Run a queued message now (ending the running turn or compaction if there is one);
        answers the dispatched item."""
        return await turns.dispatch(session_id, message_id)

    @api.post("/sessions/{session_id}/compact")
    async def compact(session_id: str) -> Compacted:
        """Summarize the history before the last user message into a checkpoint (idle only)."""
        return await turns.compact(session_id)

    @api.post("/sessions/{session_id}/approvals/{request_id}", status_code=204)
    async def decide(session_id: str, request_id: str, body: Decision) -> Response:
        """approved, approved_for_session or denied; 404 `approval_not_found` for a request
        pending in another session, a no-op for an unknown or already decided one."""
        await kernel.decide_approval(session_id, request_id, body.request_id, body.decision)
        return Response(status_code=204)

    @api.post("/sessions/{session_id}/tools/{tool_call_id}/cancel", status_code=204)
    async def cancel_tool(session_id: str, tool_call_id: str) -> Response:
        await turns.cancel_tool(session_id, tool_call_id)
        return Response(status_code=204)

    return api
