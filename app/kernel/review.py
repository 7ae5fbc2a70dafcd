"""File review: the file changes nobody has looked at yet, kept or undone at once.

`GET` lists, per path, what the agent did since the last review (before → after), whether undoing
it is `ready`, `mergeable` or blocked by a later edit (`modified`), the newest change's seq
(`through_seq`) and a token of the files' current state. `POST` repeats both: `keep` records the
changes as reviewed; `undo` puts the files back through the same durable journal as rewind.
Either way `file_review_resolved` closes every change up to `through_seq`.

Exception map (status, code): `InvalidReviewAction` 400 `invalid_action`; `NoPendingFileChanges`
409 `no_pending_file_changes`; `FileReviewChanged` 409 `file_review_changed`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from app import events as k
from app.errors import BadRequest, Conflict
from app.events import EventDraft, FileReviewResolved
from app.kernel import filestate
from app.kernel.sessions import Sessions
from app.store import Store

if TYPE_CHECKING:
    from app.kernel.turns.runner import Turns

ACTIONS = ("keep", "undo")


class InvalidReviewAction(BadRequest):
    """A review `action` other than keep or undo."""

    code = "invalid_action"


class NoPendingFileChanges(Conflict):
    """A review when no file change awaits one."""

    code = "no_pending_file_changes"


class FileReviewChanged(Conflict):
    """The changes or files moved on since the client's `GET` (its `through_seq` or file state
    is stale)."""

    code = "file_review_changed"


class Reviews:
    """`GET|POST /sessions/{id}/file-review`."""

    def __init__(self, sessions: Sessions, store: Store, turns: Turns) -> None:
        self.sessions = sessions
        self.store = store
        self.turns = turns
        self._lock = asyncio.Lock()

    async def pending(self, session: str) -> dict[str, Any]:
        await self.sessions.row(session)
        plans, through = await self._pending(session)
        return {
            "files": [p.wire() for p in plans],
            "file_state_token": filestate.state_token(plans),
            "through_seq": through,
        }

    async def resolve(
        self,
        session: str,
        action: str,
        expected_through_seq: int,
        expected_file_state: str,
        force_file_keys: list[str] | None = None,
    ) -> dict[str, Any]:
        await self.sessions.row(session)
        if action not in ACTIONS:
            raise InvalidReviewAction("action: must be keep or undo")
        # One resolution at a time (they are rare): a keep must not record files an undo is
        # putting back.
        async with self._lock:
            return await self._resolve(
                session, action, expected_through_seq, expected_file_state, force_file_keys
            )

    async def _resolve(
        self,
        session: str,
        action: str,
        expected_through_seq: int,
        expected_file_state: str,
        force_file_keys: list[str] | None,
    ) -> dict[str, Any]:
        if action == "keep":
            _, through = await self._check(session, expected_through_seq, expected_file_state)
            resolved: FileReviewResolved = {"action": "kept", "through_seq": through}
            await self.sessions.facts.emit(EventDraft(session, k.FILE_REVIEW_RESOLVED, resolved))
            return {"status": "resolved"}
        async with self.turns.exclusive(session):
            plans, through = await self._check(session, expected_through_seq, expected_file_state)
            forced = filestate.forced_keys(plans, force_file_keys)
            draft = EventDraft(
                session,
                k.FILE_REVIEW_RESOLVED,
                FileReviewResolved(
                    action="undone", through_seq=through, files=filestate.outcome(plans, forced)
                ),
            )
            await filestate.restore(
                self.store,
                session,
                through,
                filestate.journal_files(plans, forced),
                lambda journal: self.sessions.facts.emit(draft, journal=journal),
            )
        return {"status": "resolved"}

    async def _pending(self, session: str) -> tuple[list[filestate.FilePlan], int]:
        spans = await self.sessions.file_spans(session, pending_only=True)
        plans = await asyncio.to_thread(filestate.plan, spans, show="change")
        return plans, max((s.last_seq for s in spans), default=0)

    async def _check(
        self, session: str, expected_through_seq: int, expected_file_state: str
    ) -> tuple[list[filestate.FilePlan], int]:
        plans, through = await self._pending(session)
        if not plans:
            raise NoPendingFileChanges("there are no file changes to review")
        if through != expected_through_seq:
            raise FileReviewChanged(f"the pending changes now run through seq {through}")
        if filestate.state_token(plans) != expected_file_state:
            raise filestate.FileStateChanged("files changed since they were listed; list again")
        return plans, through
