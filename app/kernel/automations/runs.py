"""One run of an automation: a new session whose first turn is the automation's prompt.

The session gets the automation's project, connection, model and approval mode, and the manual
title `Automation: <name>` (Foya's). The run lasts until that turn's `turn_complete`, read from
the session's stored events and then live ones (app.kernel.streams), so nothing is missed
however the run and the turn interleave; a stream the broker cut off is resumed after its last
seq. The session ending first (deleted, or the kernel stopping) ends the run as `cancelled`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app import events as k
from app.broker import Broker
from app.errors import FoyaError
from app.kernel.automations.store import AutomationInput, RunStatus
from app.kernel.emit import topic
from app.kernel.sessions import Sessions
from app.kernel.streams import SessionStream
from app.kernel.turns.inputs import TurnInput

if TYPE_CHECKING:
    from app.kernel.turns.control import TurnControl

TITLE_PREFIX = "Automation: "


@dataclass(frozen=True)
class Outcome:
    """How a run ended: `completed`, `failed` (with the reason) or `cancelled`."""

    status: RunStatus
    error: str = ""


#: Ends a question batch unanswered: (session, batch id). Nobody answers an automation's.
Unanswerable = Callable[[str, str], Awaitable[None]]


async def no_questions(session: str, batch: str) -> None:
    return None


async def execute(
    sessions: Sessions,
    turns: TurnControl,
    broker: Broker,
    spec: AutomationInput,
    opened: Callable[[str], Awaitable[None]],
    unanswerable: Unanswerable = no_questions,
) -> Outcome:
    """Run `spec` as a new session (`opened` is told its id once it exists); errors of the
    kernel's own (an unknown project, an input the turn rules refuse) propagate."""
    fields: dict[str, Any] = {"approval_mode": spec.approval_mode}
    for key in ("project_id", "connection_id", "model"):
        if getattr(spec, key):
            fields[key] = getattr(spec, key)
    session = (await sessions.create(fields))["id"]
    await sessions.update(session, {"title": TITLE_PREFIX + spec.name})
    await opened(session)
    await turns.submit(session, TurnInput(message=spec.prompt))
    return await _outcome(sessions, broker, session, unanswerable)


async def _outcome(
    sessions: Sessions, broker: Broker, session: str, unanswerable: Unanswerable
) -> Outcome:
    """The first turn's outcome, from the session's events (all of them, stored first). A
    question the model asks is cancelled at once, as Foya does: nobody is there to answer."""
    after, error = 0, ""
    while True:
        with broker.subscribe(topic(session)) as sub:
            stream = SessionStream(sessions.store, session, sub, after)
            while (event := await stream.next()) is not None:
                if event.kind == k.ERROR:
                    error = str(event.payload)
                elif event.kind == k.QUESTION_REQUESTED:
                    with contextlib.suppress(FoyaError):  # resolved meanwhile
                        await unanswerable(session, str(event.payload["id"]))
                elif event.kind == k.TURN_COMPLETE:
                    return _ended(event.payload, error)
            if not sub.cut_off:
                return Outcome("cancelled", "the session ended before its turn did")
            after = stream.cursor


def _ended(payload: k.TurnComplete, error: str) -> Outcome:
    if payload["status"] == "completed":
        return Outcome("completed")
    if payload["status"] == "cancelled":
        return Outcome("cancelled", f"the turn was cancelled ({payload.get('reason', '')})")
    return Outcome("failed", error or payload.get("reason") or "the turn failed")
