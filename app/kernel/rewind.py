"""Rewind: take a session back to before one of its user
messages, and put the files the agent changed since then back as they were.

A preview lists every file with its status and the diff restoring it would apply, plus the
history head and a token of the files' current state. The confirm call repeats both: if either
moved, nothing happens (`history_changed` / `file_state_changed`). Otherwise the files are
restored through a durable journal and `history_rewound` is appended, forgetting the journal in
the same transaction.

Exception map (status, code): `NotAUserMessage` 400 `invalid_message_seq` (not a positive seq,
or not a user message); `RewindContextUnsupported` 409 `rewind_context_unsupported`;
`QueueNotEmpty` 409 `queue_not_empty`; and from the store `MessageNotFound` 404
`message_not_found`, `HistoryChanged` 409 `history_changed`, `SessionBusy` 409 `session_busy`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from app.errors import BadRequest, Conflict
from app.kernel import filestate
from app.kernel.sessions import Sessions
from app.kernel.turns.activity import SessionBusy
from app.kernel.turns.queue import Queues
from app.store import Store
from app.store.history import NotAUserMessage

if TYPE_CHECKING:
    from app.kernel.turns.runner import Turns

CONTEXT_KEYS = ("attachments", "browser_elements", "workspace_files", "skill_ref", "command")


class RewindContextUnsupported(Conflict):
    """A rewind to a user message that carried context a rewind cannot put back (attachments,
    browser elements, workspace files, a skill or a command)."""

    code = "rewind_context_unsupported"


class QueueNotEmpty(Conflict):
    """A rewind while the session's input queue holds messages."""

    code = "queue_not_empty"


class Rewinds:
    """`POST /sessions/{id}/turns/{message_seq}/rewind`."""

    def __init__(self, sessions: Sessions, store: Store, turns: Turns, queues: Queues) -> None:
        self.sessions = sessions
        self.store = store
        self.turns = turns
        self.queues = queues

    async def rewind(
        self,
        session: str,
        message_seq: int,
        *,
        confirm: bool = False,
        expected_head_seq: int | None = None,
        expected_file_state: str | None = None,
        force_file_keys: list[str] | None = None,
    ) -> dict[str, Any]:
        """Preview (default) or perform a rewind to before user message `message_seq`."""
        if not 0 < message_seq < 2**63:  # an event seq; larger ones do not fit SQLite
            raise NotAUserMessage("message_seq: must be a positive event seq")
        await self.sessions.row(session)
        text = await self._user_text(session, message_seq)
        self._require_idle(session)
        if not confirm:
            head = await self.store.history_head(session)
            plans = await self._plans(session, message_seq)
            return {
                "status": "confirmation_required",
                "message": text,
                "files": [p.wire() for p in plans],
                "file_state_token": filestate.state_token(plans),
                "head_seq": head,
            }
        if expected_head_seq is None or expected_file_state is None:
            raise BadRequest("a confirmed rewind needs expected_head_seq and expected_file_state")
        async with self.turns.exclusive(session):
            self._require_empty_queue(session)
            await self.store.check_rewind(session, message_seq, expected_head_seq)
            plans = await self._plans(session, message_seq)
            if filestate.state_token(plans) != expected_file_state:
                raise filestate.FileStateChanged("files changed since the preview; preview again")
            forced = filestate.forced_keys(plans, force_file_keys)
            outcome = filestate.outcome(plans, forced)
            await filestate.restore(
                self.store,
                session,
                message_seq,
                filestate.journal_files(plans, forced),
                lambda journal: self.sessions.facts.commit(
                    session,
                    lambda: self.store.rewind(
                        session, message_seq, expected_head_seq, outcome, journal
                    ),
                ),
            )
        return {
            "status": "rewound",
            "message": text,
            "files": [
                {**p.wire(), "action": o["action"]} for p, o in zip(plans, outcome, strict=True)
            ],
            # Always there (Foya's `RewindTurnResult` requires it); empty, as Foya answers:
            # once rewound, there is no preview left to confirm.
            "file_state_token": "",
            "head_seq": await self.store.history_head(session),
        }

    async def _user_text(self, session: str, seq: int) -> str:
        if await self.store.active_role(session, seq) != "user":
            raise NotAUserMessage(f"message {seq} is not a user message")
        [message] = await self.store.history(session, after_seq=seq - 1, limit=1)
        content = message.get("content")
        # The rewound message goes back to the client's composer as text: context that text
        # cannot carry (images, browser elements, a chosen skill) would be silently lost.
        carried = [key for key in CONTEXT_KEYS if message.get(key)]
        if not isinstance(content, str) or carried:
            what = ", ".join(carried) or "non-text content"
            raise RewindContextUnsupported(
                f"message {seq} carries {what}, which a rewind cannot give back; fork instead"
            )
        return content

    def _require_idle(self, session: str) -> None:
        if self.turns.running(session):
            raise SessionBusy("the session is busy; stop the turn before rewinding")
        self._require_empty_queue(session)

    def _require_empty_queue(self, session: str) -> None:
        if self.queues.of(session).items:
            raise QueueNotEmpty("the session has queued input; clear the queue before rewinding")

    async def _plans(self, session: str, seq: int) -> list[filestate.FilePlan]:
        spans = await self.sessions.file_spans(session, from_seq=seq)
        return await asyncio.to_thread(filestate.plan, spans, show="restore")
