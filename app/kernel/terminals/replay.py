"""A terminal's output as numbered events, the last of them kept in memory for replay.

Seqs are the terminal's own (1, 2, …), not the event log's (whose seqs number the stored facts
of every session): a client tracks each terminal apart. `Replay` keeps the last `MAX_EVENTS`
events holding at most `MAX_BYTES` of output, whichever bound comes first, and, for the
snapshot's `buffer`, the last `MAX_BYTES` of output whatever the number of events (both hold the
same strings). Nothing is stored: a restart forgets every terminal.

Wire form (Foya's `DataEvent`, `TerminalWire` here): `{session_id, ref, seq, data?, exited?,
exit_code?}`; the SSE frame's `id:` is the seq and its `event:` is `terminal`.

Gap marker (Foya has none: a client behind the buffer silently misses output). A client whose
cursor is older than the oldest event kept first gets `{session_id, ref, seq: F-1, truncated:
true, missed: N}`, F being the oldest seq still kept: the N events up to F-1 are gone and the
next event is F. Its `id:` moves the client's Last-Event-ID past the gap; a client that wants
the lost screen fetches the snapshot (`GET …/terminals/{ref}`, `buffer`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass
from typing import Any, TypedDict

from app.events import Event

KIND = "terminal"
MAX_EVENTS = 2048
MAX_BYTES = 1024 * 1024


class TerminalFields(TypedDict, total=False):
    """What one terminal event says: output, the shell's end, or a gap."""

    data: str
    exited: bool
    exit_code: int
    truncated: bool
    missed: int


class TerminalWire(TerminalFields):
    """A terminal event's wire form (its `payload`)."""

    session_id: str
    ref: str
    seq: int


@dataclass(frozen=True, slots=True)
class TerminalEvent(Event):
    """One terminal event; `payload` is its wire form. `end` counts the output bytes through
    this event since the terminal started (for pacing; never sent)."""

    end: int = 0

    def wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = self.payload
        return wire


class Replay:
    """The numbered events of one terminal and the last of them."""

    def __init__(
        self, session_id: str, ref: str, *, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES
    ) -> None:
        self.session_id = session_id
        self.ref = ref
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.seq = 0  # the last seq given
        self.end = 0  # output bytes so far
        self.closed = False
        self._events: deque[TerminalEvent] = deque()
        self._start = 0  # output bytes before the oldest event kept
        self._text: deque[TerminalEvent] = deque()  # output events of the snapshot's buffer
        self._text_start = 0
        self.wake = asyncio.Event()  # set (and replaced) at every new event and at close

    @property
    def first_seq(self) -> int:
        """The oldest seq kept (the next one when none is)."""
        return self._events[0].seq if self._events else self.seq + 1

    def output(self, text: str, size: int) -> TerminalEvent:
        """Append output: `text`, decoded from `size` bytes."""
        self.end += size
        event = self._append({"data": text})
        self._text.append(event)
        while self.end - self._text_start > self.max_bytes and len(self._text) > 1:
            self._text_start = self._text.popleft().end
        return event

    def exited(self, code: int) -> TerminalEvent:
        """Append the shell's end."""
        return self._append({"exited": True, "exit_code": code})

    def buffer(self) -> str:
        """The last `max_bytes` of output."""
        return "".join(e.payload["data"] for e in self._text)

    def offset(self, seq: int) -> int:
        """Output bytes through event `seq` (as far as known: the oldest kept when older)."""
        first = self.first_seq
        return self._start if seq < first else self._events[seq - first].end

    def gap(self, cursor: int) -> TerminalEvent | None:
        """The marker a client at `cursor` gets when events after it are gone; else None."""
        last_lost = self.first_seq - 1
        if cursor >= last_lost:
            return None
        fields: TerminalFields = {"truncated": True, "missed": last_lost - cursor}
        return self._event(last_lost, fields, self._start)

    def after(self, cursor: int, limit: int) -> list[TerminalEvent]:
        """Up to `limit` kept events with a seq above `cursor` (no older than `first_seq - 1`)."""
        index = cursor - self.first_seq + 1
        return list(itertools.islice(self._events, index, index + limit))

    def close(self) -> None:
        """No more events: waiting streams end once they have sent what is kept."""
        self.closed = True
        self._notify()

    def _append(self, fields: TerminalFields) -> TerminalEvent:
        self.seq += 1
        event = self._event(self.seq, fields, self.end)
        self._events.append(event)
        events = self._events
        while len(events) > self.max_events or (
            self.end - self._start > self.max_bytes and len(events) > 1
        ):
            self._start = events.popleft().end
        self._notify()
        return event

    def _event(self, seq: int, fields: TerminalFields, end: int) -> TerminalEvent:
        payload: TerminalWire = {
            "session_id": self.session_id,
            "ref": self.ref,
            "seq": seq,
            **fields,
        }
        return TerminalEvent(seq, KIND, self.session_id, None, 0, payload, end=end)

    def _notify(self) -> None:
        wake, self.wake = self.wake, asyncio.Event()
        wake.set()
