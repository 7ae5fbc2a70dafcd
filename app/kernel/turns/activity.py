"""What each session is doing: one explicit state, and the only transitions allowed.

```
            ┌──────────── turn ────────────┐
            │   (a runner: turns, then the │
            │    queued input behind them) │
  idle ─────┼──────── compaction ──────────┼───── idle
            │      (POST …/compact)        │
            └──────── exclusive ───────────┘
              (a rewind or review undo changing history or files)

  any state ──── deleting (the session's work is stopped; then it is forgotten)
```

Work starts only from `idle`: input arriving while a session is not idle is queued, and a
compaction, rewind or undo is refused as `session_busy`. Nothing starts on a session that is
being deleted. Every move goes through `Activities.begin` / `end`, so the rules live here.
"""

from __future__ import annotations

from enum import StrEnum

from app.errors import Conflict
from app.store.events import SessionNotFound


class SessionBusy(Conflict):
    """The session is not idle."""

    code = "session_busy"


class ToolNotRunning(Conflict):
    """Cancelling a tool call that is not running (no call of that id, or none running a
    command)."""

    code = "tool_not_running"


class Activity(StrEnum):
    IDLE = "idle"
    TURN = "turn"
    COMPACTION = "compaction"
    EXCLUSIVE = "exclusive"
    DELETING = "deleting"


_BUSY = {
    Activity.TURN: "a turn is running; wait for it to finish or stop it",
    Activity.COMPACTION: "the session is being compacted",
    Activity.EXCLUSIVE: "the session's history or files are being changed",
}


class Activities:
    """The state of every session (absent means idle)."""

    def __init__(self) -> None:
        self._state: dict[str, Activity] = {}

    def of(self, session: str) -> Activity:
        return self._state.get(session, Activity.IDLE)

    def busy(self, session: str) -> bool:
        """Anything but idle: new input is queued."""
        return self.of(session) is not Activity.IDLE

    def begin(self, session: str, activity: Activity) -> None:
        """Move an idle session into `activity` (or any session into `deleting`)."""
        current = self.of(session)
        if current is Activity.DELETING:
            raise SessionNotFound(f"session {session} is being deleted")
        if activity is not Activity.DELETING and current is not Activity.IDLE:
            raise SessionBusy(f"the session is busy: {_BUSY[current]}")
        self._state[session] = activity

    def end(self, session: str, activity: Activity) -> None:
        """Back to idle, if the session is still in `activity` (a deletion outranks it)."""
        if self.of(session) is activity:
            self._state.pop(session, None)

    def forget(self, session: str) -> None:
        """The session is gone (deleted) or its work is over for good (shutdown)."""
        self._state.pop(session, None)
