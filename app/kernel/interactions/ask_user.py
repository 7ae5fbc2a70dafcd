"""`ask_user {questions}`: ask the user a batch of questions and wait for every answer.

Foya's tool: its name, schema and answers. The model gets `{"answers":[{"question_id",
"value"}, …]}`, or the error `user question batch was cancelled`. A malformed batch is an
error result for the model (`invalid arguments: …`, `ask_user failed: invalid question batch:
…`) and asks nothing. It needs no approval: asking changes nothing, whatever the session's
approval mode (a `full_access` session is asked all the same).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.jsontypes import JSONObject
from app.kernel.ids import iso_now, new_id
from app.kernel.interactions.questions import (
    Batch,
    InvalidBatch,
    Option,
    Question,
    Questions,
    check_batch,
)
from app.kernel.interactions.waiting import Ended
from app.tools import ToolError, ToolResult
from app.tools.base import Action, ToolContext

_OPTION = {
    "type": "object",
    "properties": {
        "label": {"type": "string"},
        "description": {"type": "string"},
        "recommended": {"type": "boolean"},
    },
    "required": ["label"],
    "additionalProperties": False,
}
_QUESTION = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "An id for the question, unique in this call"},
        "question": {"type": "string", "description": "The question the user sees"},
        "description": {"type": "string", "description": "Context that helps the user decide"},
        "options": {"type": "array", "maxItems": 8, "items": _OPTION},
        "allow_custom": {"type": "boolean", "description": "Also accept the user's own text"},
    },
    "required": ["question"],
    "additionalProperties": False,
}
PARAMETERS = {
    "type": "object",
    "properties": {
        "questions": {"type": "array", "minItems": 1, "maxItems": 8, "items": _QUESTION}
    },
    "required": ["questions"],
    "additionalProperties": False,
}


def _get(item: JSONObject, key: str, kind: type, where: str) -> Any:
    """`item[key]` if it is of `kind`; absent or null gives None (the model may omit it)."""
    value = item.get(key)
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"{where}.{key} must be a {'string' if kind is str else 'boolean'}")
    return value


def _objects(raw: Any, where: str) -> list[JSONObject]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(i, dict | None) for i in raw):
        raise ValueError(f"{where} must be an array of objects")
    return [i or {} for i in raw]


def _option(item: JSONObject, where: str) -> Option:
    option = Option(label=_get(item, "label", str, where) or "")
    if description := _get(item, "description", str, where):
        option["description"] = description
    if _get(item, "recommended", bool, where):
        option["recommended"] = True
    return option


def parse_questions(raw: Any) -> list[Question]:
    """The model's `questions` argument as typed questions (`ValueError` says what is wrong)."""
    questions: list[Question] = []
    for n, item in enumerate(_objects(raw, "questions")):
        where = f"questions[{n}]"
        question = Question(
            id=_get(item, "id", str, where) or "",
            question=_get(item, "question", str, where) or "",
        )
        if description := _get(item, "description", str, where):
            question["description"] = description
        options = [
            _option(o, f"{where}.options[{i}]")
            for i, o in enumerate(_objects(item.get("options"), f"{where}.options"))
        ]
        if options:
            question["options"] = options
        if _get(item, "allow_custom", bool, where):
            question["allow_custom"] = True
        questions.append(question)
    return questions


def compact(value: Any) -> str:
    """JSON as Foya's tools answer it: no spaces, text as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class AskUser:
    """The `ask_user` tool."""

    name = "ask_user"
    description = (
        "Ask the user up to 8 focused questions at once, when only their answers let you go on; "
        "the call waits until every question is answered. Offer options where the choices are "
        "known. Never ask what you can find out with the other tools."
    )
    parameters = PARAMETERS

    def __init__(self, questions: Questions) -> None:
        self.questions = questions

    def action(self, args: JSONObject) -> Action:
        return "read"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        try:
            questions = check_batch(parse_questions(args.get("questions")))
        except InvalidBatch as exc:
            raise ToolError(f"ask_user failed: invalid question batch: {exc}") from None
        except ValueError as exc:
            raise ToolError(f"invalid arguments: {exc}") from None
        batch = Batch(
            id=new_id(),
            session_id=ctx.session,
            run_id=ctx.run_id,
            tool_call_id=ctx.call_id,
            questions=questions,
            created_at=iso_now(),
        )
        answers = await self.questions.ask(batch, ctx.emit)
        if isinstance(answers, Ended):
            raise ToolError("user question batch was cancelled")
        return ToolResult(
            json.dumps({"answers": answers}, ensure_ascii=False, separators=(",", ":"))
        )
