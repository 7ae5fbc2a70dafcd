"""Questions the model asks the user (`ask_user`), as Foya's question gateway keeps them.

One tool call asks one *batch* of 1 to 8 questions; each has an id (`q1`, `q2`, … when the
model gives none), the question, an optional description, at most 8 options (`label`,
`description?`, `recommended?`) and `allow_custom`. The batch is recorded as
`question_requested` and waits, however long, for one of:

- `POST /sessions/{id}/questions/{batch_id}/answer {answers: [{question_id, value}]}`: exactly
  one non-blank answer per question; where a question offers options and no custom text, the
  value must be one of the labels. The tool gets the answers; `question_resolved
  {id, status: answered}`.
- `POST …/questions/{batch_id}/cancel`, or the turn (or the tool call) being cancelled, which
  includes deleting the session and shutting down: `question_resolved {id, status: cancelled}`.

Errors: `QuestionSessionNotFound` 404 `session_not_found`, `QuestionNotFound` 404
`question_not_found` (unknown, already resolved, or another session's batch),
`InvalidQuestionAnswers` 400 `invalid_question_answers` (the batch stays pending).
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict

from app.errors import BadRequest, NotFound
from app.events import QUESTION_REQUESTED, QUESTION_RESOLVED
from app.kernel.interactions.waiting import Ended, Waiter, Waiters
from app.kernel.sessions import Sessions
from app.store.events import SessionNotFound
from app.tools.base import Emit

MAX_QUESTIONS = 8
MAX_OPTIONS = 8


class QuestionSessionNotFound(NotFound):
    """The session of a question route does not exist."""

    code = "session_not_found"


class QuestionNotFound(NotFound):
    """An unknown question batch, one already resolved, or another session's."""

    code = "question_not_found"


class InvalidQuestionAnswers(BadRequest):
    """Answers that do not answer every question of the batch once (the batch stays pending)."""

    code = "invalid_question_answers"


class InvalidBatch(ValueError):
    """The model's batch breaks a rule (the message says which)."""


class Option(TypedDict):
    label: str
    description: NotRequired[str]
    recommended: NotRequired[bool]


class Question(TypedDict):
    id: str
    question: str
    description: NotRequired[str]
    options: NotRequired[list[Option]]
    allow_custom: NotRequired[bool]


class Batch(TypedDict):
    """`question_requested`: the questions of one `ask_user` call."""

    id: str
    session_id: str
    run_id: NotRequired[str]
    tool_call_id: NotRequired[str]
    questions: list[Question]
    created_at: str


class Answer(TypedDict):
    """One answer: an option's label or, where allowed, the user's own text."""

    question_id: str
    value: str


def check_batch(questions: list[Question]) -> list[Question]:
    """The batch with missing ids filled in (`q1`, …), or `InvalidBatch`."""
    if not 1 <= len(questions) <= MAX_QUESTIONS:
        raise InvalidBatch(f"questions must contain 1 to {MAX_QUESTIONS} items")
    checked: list[Question] = []
    for number, item in enumerate(questions, 1):
        question = item.copy()  # the id may be filled in
        question["id"] = question["id"] or f"q{number}"
        if not question["question"].strip():
            raise InvalidBatch(f"question {question['id']!r} is empty")
        if any(q["id"] == question["id"] for q in checked):
            raise InvalidBatch(f"duplicate question id {question['id']!r}")
        if len(question.get("options", ())) > MAX_OPTIONS:
            raise InvalidBatch(f"question {question['id']!r} has more than {MAX_OPTIONS} options")
        checked.append(question)
    return checked


def check_answers(batch: Batch, answers: list[Answer]) -> None:
    """`InvalidQuestionAnswers` unless `answers` answer every question of `batch` once."""
    questions = {q["id"]: q for q in batch["questions"]}
    if len(answers) != len(questions):
        raise InvalidQuestionAnswers(f"expected {len(questions)} answers, got {len(answers)}")
    answered: set[str] = set()
    for answer in answers:
        key = answer["question_id"]
        question = questions.get(key)
        if question is None:
            raise InvalidQuestionAnswers(f"unknown question {key[:64]!r}")
        if key in answered:
            raise InvalidQuestionAnswers(f"duplicate answer for {key!r}")
        if not answer["value"].strip():
            raise InvalidQuestionAnswers(f"answer for {key!r} is empty")
        labels = [o["label"] for o in question.get("options", ())]
        if labels and not question.get("allow_custom") and answer["value"] not in labels:
            raise InvalidQuestionAnswers(f"answer for {key!r} is not one of its options")
        answered.add(key)


class Questions:
    """Pending question batches, by id."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self._waiters: Waiters[list[Answer]] = Waiters(QUESTION_REQUESTED, QUESTION_RESOLVED)

    async def ask(self, batch: Batch, emit: Emit) -> list[Answer] | Ended:
        """Record `batch` and wait for the user's answers (`Ended` if the batch is cancelled)."""
        return await self._waiters.wait(batch["id"], batch["session_id"], batch, emit, None)

    async def answer(self, session: str, batch_id: str, answers: list[Answer]) -> None:
        """Give the user's answers to the waiting `ask_user` call."""
        waiter = await self._pending(session, batch_id)
        check_answers(waiter.request, answers)
        if not await self._waiters.resolve(batch_id, waiter, "answered", answers):
            raise _not_found()

    async def cancel(self, session: str, batch_id: str) -> None:
        """End the batch unanswered; the tool tells the model it was cancelled."""
        waiter = await self._pending(session, batch_id)
        if not await self._waiters.resolve(batch_id, waiter, "cancelled", Ended("cancelled")):
            raise _not_found()

    async def _pending(self, session: str, batch_id: str) -> Waiter[list[Answer]]:
        try:
            await self.sessions.row(session)
        except SessionNotFound:
            raise QuestionSessionNotFound(f"session {session} not found") from None
        waiter = self._waiters.get(session, batch_id)
        if waiter is None:
            raise _not_found()
        return waiter


def _not_found() -> QuestionNotFound:
    return QuestionNotFound("no pending question batch with this id in this session")
