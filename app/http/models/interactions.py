"""Request bodies of the question and browser-action routes, as Foya's handlers decode them:
every field may be absent or null (a browser client sends its empty fields as null). Unknown
fields are ignored in answers and refused in browser-action results, as Foya's handlers do.
"""

from __future__ import annotations

from typing import cast

from app.http.models.common import Lenient, NonNegative, Strict
from app.jsontypes import JSONObject
from app.kernel.api import ActionResult, Answer


class QuestionAnswer(Lenient):
    question_id: str | None = None
    value: str | None = None


class AnswerQuestions(Lenient):
    """`answers`: one per question of the batch, in any order."""

    answers: list[QuestionAnswer] | None = None

    def listed(self) -> list[Answer]:
        """The answers as the kernel takes them (absent fields empty: they fail its checks)."""
        return [
            Answer(question_id=a.question_id or "", value=a.value or "") for a in self.answers or ()
        ]


class BrowserActionResult(Strict):
    """What the browser made of the action; `error` says it failed. A screenshot is a PNG,
    base64-encoded, with `media_type` `image/png`."""

    request_id: str | None = None
    url: str | None = None
    title: str | None = None
    revision: NonNegative | None = None
    observation_id: str | None = None
    snapshot: str | None = None
    screenshot_base64: str | None = None
    media_type: str | None = None
    code: str | None = None
    message: str | None = None
    pre_url: str | None = None
    post_url: str | None = None
    verified: bool | None = None
    actual_text: str | None = None
    trace: JSONObject | None = None
    error: str | None = None

    def result(self) -> ActionResult:
        """The result's fields, those left empty out (`verified` is kept when false)."""
        fields = self.model_dump(exclude={"request_id", "screenshot_base64", "media_type"})
        kept = {k: v for k, v in fields.items() if v or (k == "verified" and v is not None)}
        return cast(ActionResult, kept)

    def screenshot(self) -> tuple[str, str] | None:
        """(base64, media type) of the screenshot, if one came."""
        if not self.screenshot_base64:
            return None
        return self.screenshot_base64, self.media_type or ""
