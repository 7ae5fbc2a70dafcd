"""Decisions asked in a chat: a tool call's approval and an `ask_user` question, as buttons.

An `approval_request` becomes a message with approve / approve for session / deny; each
question of a `question_requested` batch a message with its options (a question without
options is answered in Foya). A press resolves through the kernel's own operations
(`Approvals.decide`, `Questions.answer`), as any client's decision does, so the first answer
from any client wins. When the kernel says the request is resolved (`approval_resolved`,
`question_resolved`, whoever decided), its messages lose their buttons and show the outcome; a
press on a request no longer pending here is told "already decided". Pending requests live in
memory, as the kernel's do: a restart loses them both.

Button data (at most 64 bytes): `a:<request id>:<y|s|n>` and `q:<batch id>:<question>:<option>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from app.errors import FoyaError
from app.kernel.approvals import Decision
from app.kernel.channels.platform import Button, Inbound, Outbound, Platform
from app.kernel.channels.replies import Writer
from app.kernel.channels.texts import Texts
from app.logs import get_logger

CHOICES: dict[str, Decision] = {"y": "approved", "s": "approved_for_session", "n": "denied"}
DETAIL_MAX = 600


class ApprovalsPort(Protocol):
    def decide(self, session: str, request_id: str, decision: str) -> None: ...


class QuestionsPort(Protocol):
    """`app.kernel.interactions.Questions` (a feature beside ours: reached by its shape)."""

    async def answer(self, session: str, batch_id: str, answers: list[Any]) -> None: ...


@dataclass
class Pending:
    """A request shown in a chat: its messages (with their texts) and, for a question batch,
    the option chosen per question so far."""

    kind: str  # approval | question
    session: str
    writer: Writer
    messages: list[tuple[str, str]] = field(default_factory=list)  # (message id, text)
    questions: list[dict[str, Any]] = field(default_factory=list)
    chosen: dict[str, str] = field(default_factory=dict)
    decided: bool = False


class Decisions:
    """The requests one channel shows, by request id."""

    def __init__(
        self, platform: Platform, approvals: ApprovalsPort, questions: QuestionsPort, texts: Texts
    ) -> None:
        self.platform = platform
        self.approvals = approvals
        self.questions = questions
        self.texts = texts
        self.pending: dict[str, Pending] = {}
        self.log = get_logger("foya.channels")

    async def ask_approval(self, session: str, writer: Writer, request: dict[str, Any]) -> None:
        t = self.texts
        detail = str(request.get("resource") or request.get("detail") or "")[:DETAIL_MAX]
        text = t(
            "approval_asked",
            action=request.get("action", ""),
            tool=request.get("tool_name", ""),
            detail=detail,
        )
        rid = str(request["id"])
        buttons = [
            Button(t("approve"), f"a:{rid}:y"),
            Button(t("approve_session"), f"a:{rid}:s"),
            Button(t("deny"), f"a:{rid}:n"),
        ]
        pending = Pending("approval", session, writer)
        self.pending[rid] = pending
        for mid in await writer.send(Outbound(text, buttons), "decision"):
            pending.messages.append((mid, text))

    async def ask_questions(self, session: str, writer: Writer, batch: dict[str, Any]) -> None:
        bid = str(batch["id"])
        pending = Pending("question", session, writer, questions=list(batch["questions"]))
        self.pending[bid] = pending
        for number, question in enumerate(pending.questions):
            options = question.get("options") or []
            text = str(question.get("question", ""))
            buttons = [
                Button(str(o["label"])[:40], f"q:{bid}:{number}:{i}") for i, o in enumerate(options)
            ]
            if not buttons:
                text += "\n" + self.texts("answer_in_foya")
            for mid in await writer.send(Outbound(text, buttons), "decision"):
                pending.messages.append((mid, text))

    async def resolved(self, request_id: str, outcome: str) -> None:
        """The kernel resolved the request (`outcome`: a decision or a question's status)."""
        pending = self.pending.pop(request_id, None)
        if pending is None:
            return
        key = {"answered": "question_answered", "cancelled": "question_cancelled"}.get(outcome)
        line = self.texts(key or outcome) if (key or outcome in CHOICES.values()) else outcome
        for mid, text in pending.messages:
            await pending.writer.edit(mid, Outbound(f"{text}\n\n{line}"), "decision")

    async def press(self, item: Inbound) -> str:
        """Act on a pressed button; how it went (for the metrics)."""
        parts = (item.button or "").split(":")
        pending = self.pending.get(parts[1]) if len(parts) >= 3 else None
        if pending is None or pending.decided:
            await self.platform.answer_button(item, self.texts("already_decided"))
            return "late"
        try:
            if parts[0] == "a" and parts[2] in CHOICES:
                pending.decided = True
                self.approvals.decide(pending.session, parts[1], CHOICES[parts[2]])
            elif parts[0] == "q" and len(parts) == 4:
                await self._choose(pending, parts[1], int(parts[2]), int(parts[3]))
            else:
                await self.platform.answer_button(item, self.texts("already_decided"))
                return "ignored"
        except (FoyaError, ValueError, IndexError, KeyError) as exc:
            self.log.warning("channel decision failed", error=repr(exc))
            await self.platform.answer_button(item, self.texts("already_decided"))
            return "late"
        await self.platform.answer_button(item, self.texts("decided"))
        return "decided"

    async def _choose(self, pending: Pending, batch: str, number: int, option: int) -> None:
        question = pending.questions[number]
        pending.chosen[str(question["id"])] = str(question["options"][option]["label"])
        if len(pending.chosen) < len(pending.questions):
            return
        pending.decided = True
        answers = [{"question_id": q, "value": v} for q, v in pending.chosen.items()]
        await self.questions.answer(pending.session, batch, answers)

    def forget_session(self, session: str) -> None:
        for rid in [r for r, p in self.pending.items() if p.session == session]:
            del self.pending[rid]
