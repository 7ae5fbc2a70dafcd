"""What the turn core needs from the capabilities that plug into it, declared here, below them.

The turn core never imports a capability: it names what it needs as a Protocol, and the
composition root hands it the capability's own object, which fits that Protocol by its shape
alone (`app.kernel.usercontext.prompt.PromptContext` is a `PromptPort`, `app.kernel.hooks.Hooks`
is a `HookPort`). A capability may import this module to speak the turn's words (`Where`, the
hook points); the turn core never imports it back. Values the turn itself describes for the
capabilities (`Where`, `activity`) live here too, so both sides read the same definition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app.events import EventDraft
from app.kernel.sessionrow import SessionRow

# -- where a turn runs and what it has been doing ------------------------------------------------


@dataclass(frozen=True)
class Where:
    """Where a turn runs: its project (id and directory; None for a workspace session) and
    its working directory."""

    project_id: str | None
    project_root: Path | None
    cwd: Path


def activity(history: Iterable[Mapping[str, Any]], cwd: Path) -> str:
    """What a session has been doing, as text to match rule globs against: the user's words,
    the paths its tools were given or changed (absolute and, inside `cwd`, relative) and its
    commands, one per line."""
    root = str(cwd).rstrip("/") + "/"
    lines: list[str] = []

    def path(value: object) -> None:
        if isinstance(value, str) and value:
            lines.append(value)
            if value.startswith(root):
                lines.append(value[len(root) :])

    for message in history:
        role = message.get("role")
        if role == "user" and isinstance(message.get("content"), str):
            lines.append(message["content"])
        for call in message.get("tool_calls") or ():
            args = call.get("input") or {}
            path(args.get("path"))
            if isinstance(args.get("command"), str):
                lines.append(args["command"])
        change = message.get("file_change")
        if isinstance(change, dict):
            path(change.get("path"))
    return "\n".join(lines)


# -- the user's context in the system prompt -----------------------------------------------------


class PromptSection(Protocol):
    """One section the user's context adds to a request's system prompt."""

    @property
    def name(self) -> str: ...

    @property
    def text(self) -> str: ...


class PromptPort(Protocol):
    """The user's context as a turn's model sees it (rules, memory, skills, instruction files)."""

    def sections(self, where: Where, doing: str) -> Sequence[PromptSection]:
        """The non-empty sections for one step; blocking (run it off the event loop)."""
        ...

    def invoked_skill(self, ref: str, where: Where, text: str, *, strict: bool = False) -> str:
        """The text of a user message that named the skill `ref`, with the skill's body."""
        ...


# -- the user's hooks at points of a turn --------------------------------------------------------

#: The points of a turn where the user's hooks run (their names are Foya's hook events).
USER_PROMPT_SUBMIT, STOP, PERMISSION_REQUEST = "UserPromptSubmit", "Stop", "PermissionRequest"


class HookOutcome(Protocol):
    """What the hooks of one event said, merged: `decision` is none, allow or deny."""

    @property
    def decision(self) -> str: ...

    @property
    def halt(self) -> bool: ...

    def feedback(self, fallback: str) -> str:
        """What the hooks said (reasons, then context), or `fallback`."""
        ...

    def facts(self, session: str, run_id: str) -> list[EventDraft]:
        """The facts that record each hook's run."""
        ...


@dataclass(frozen=True)
class Unheard:
    """The outcome of hooks that never ran (none wanted, or the turn was cancelled)."""

    decision: str = "none"
    halt: bool = False

    def feedback(self, fallback: str) -> str:
        """Nothing was said: `fallback`."""
        return fallback

    def facts(self, session: str, run_id: str) -> list[EventDraft]:
        """No hook ran, so nothing is recorded."""
        return []


class HookPort(Protocol):
    """The user's hooks, run for a session's turn."""

    def wants(self, event: str, row: SessionRow) -> bool:
        """Whether running `event` has anything to do for the session (cheap, no process)."""
        ...

    async def run(
        self,
        event: str,
        row: SessionRow,
        run_id: str,
        fields: dict[str, Any],
        subject: str | None = None,
    ) -> HookOutcome:
        """Run the session's hooks of `event` and merge what they said; never fails."""
        ...


# -- what a turn tells the capabilities around it ------------------------------------------------

#: Told (session, run id, answer) when a turn's model is done, before `turn_complete`.
Answered = Callable[[str, str, str], Awaitable[None]]
#: What a session's state adds to its system prompt (plan mode's instructions), or None.
Instructions = Callable[[SessionRow], str | None]
