"""Questions and browser actions: a client's
answers to an `ask_user` batch, and a browser client's result of a browser action. Both answer
204 and hand the answer to the waiting tool. Errors: app.kernel.interactions.questions and
app.kernel.interactions.browser.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.interactions import AnswerQuestions, BrowserActionResult
from app.kernel.api import Kernel

QUESTION = "/sessions/{session_id}/questions/{batch_id}"


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["interactions"])

    @api.post(QUESTION + "/answer", status_code=204)
    async def answer_questions(session_id: str, batch_id: str, body: AnswerQuestions) -> Response:
        """Answer every question of a pending batch once: an offered option's label, or free
        text where the question allows it or offers no options."""
        await kernel.questions.answer(session_id, batch_id, body.listed())
        return Response(status_code=204)

    @api.post(QUESTION + "/cancel", status_code=204)
    async def cancel_questions(session_id: str, batch_id: str) -> Response:
        """Leave a pending batch unanswered; the model is told it was cancelled."""
        await kernel.questions.cancel(session_id, batch_id)
        return Response(status_code=204)

    @api.post("/sessions/{session_id}/browser-actions/{request_id}", status_code=204)
    async def resolve_browser_action(
        session_id: str, request_id: str, body: BrowserActionResult
    ) -> Response:
        """The result of a pending browser action; a `request_id` in the body must be the
        URL's."""
        await kernel.browser_actions.resolve(
            session_id, request_id, body.request_id, body.result(), body.screenshot()
        )
        return Response(status_code=204)

    return api
