"""Reading a chat item: who may talk, which command it is, and the one refusal a stranger gets.

- `allowed`: only asked while the chat is unbound (once bound, everyone in the chat talks):
  `allow_all`, the chat in `allowed_chats` (a group's id), or the sender's id or username
  (without `@`, case-insensitive) in `allowed_users` (spec §4.5).
- `command`: `/new`, `/stop`, `/status`, `/help` exactly (Foya matches its own commands
  case-sensitively, with no argument: anything else is text for the agent), and `/bind` in any
  case with one argument (its code, upper-cased) or none (§6.2).
- `Refusals`: a stranger is told their user id once, then not again for `QUIET` seconds (in
  memory: a restart may tell them once more), so a flood of messages costs one reply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from app.kernel.channels.platform import Inbound

QUIET = 600.0
Name = Literal["new", "stop", "status", "help", "bind"]
EXACT: dict[str, Name] = {"/new": "new", "/stop": "stop", "/status": "status", "/help": "help"}


class ChannelSettings(Protocol):
    """The settings of a channel the runtime reads (`records.ChannelConfig` fits)."""

    @property
    def id(self) -> str: ...
    @property
    def locale(self) -> str: ...
    @property
    def connection_id(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def project_id(self) -> str: ...
    @property
    def approval_mode(self) -> str: ...
    @property
    def allowed_users(self) -> Sequence[str]: ...
    @property
    def allowed_chats(self) -> Sequence[str]: ...
    @property
    def allow_all(self) -> bool: ...


@dataclass(frozen=True)
class Command:
    """A command of ours; `code` is `/bind`'s (empty without one)."""

    name: Name
    code: str = ""


def allowed(channel: ChannelSettings, item: Inbound) -> bool:
    """Whether the sender of `item` may talk in an unbound chat."""
    if channel.allow_all:
        return True
    if item.chat in channel.allowed_chats:
        return True
    names = {u.lstrip("@").lower() for u in channel.allowed_users}
    return bool(item.user and item.user.lower() in names) or bool(
        item.username and item.username.lstrip("@").lower() in names
    )


def command(text: str) -> Command | None:
    """The command `text` is, if it is one of ours."""
    words = text.strip().split()
    if not words:
        return None
    if words[0].split("@", 1)[0].lower() == "/bind":
        return Command("bind", words[1].strip().upper() if len(words) == 2 else "")
    name = EXACT.get(text.strip())
    return Command(name) if name else None


class Refusals:
    """When a stranger was last refused; `clock` is monotonic seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._last: dict[str, float] = {}

    def due(self, user: str) -> bool:
        """Whether `user` should be told (and, if so, that they are told now)."""
        now = self.clock()
        if len(self._last) > 4096:  # a bound on memory: forget those quiet for long
            self._last = {u: t for u, t in self._last.items() if now - t < QUIET}
        last = self._last.get(user)
        if last is not None and now - last < QUIET:
            return False
        self._last[user] = now
        return True
