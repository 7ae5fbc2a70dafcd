"""The context journal: change notices for rules, memory and their settings, kept in
`<data-dir>/context/events.jsonl` and replayed to `GET /context/events` clients.

Format (Foya's `contextdata.Event`): one JSON object per line, `{"seq", "kind", …, "time"}`, the
payload's fields (Foya's are `rule`, `memory`, `memory_settings`, `deleted_id`) beside `seq`,
`kind` and `time` rather than under a `payload` key. The same object is an SSE frame's `data:`,
its seq the frame's `id:` and its kind the `event:`. `seq` is the journal's own counter, not the
session event log's. Foya writes only the item's id to disk (as `deleted_id`) and sends the item
live; here the line is what was sent, so a replay says what the live event said.

Durability: appends are serialized; each writes its line in one `write()`, fsyncs, and only then
is recorded in memory and must-delivered on the broker topic `context`, in seq order (a stream
skips seqs it has sent, so order is what makes that exact). A failed write truncates the file
back, so no half line stays behind. A crash (kill -9) can still leave a torn last line: `open`
keeps only complete, valid lines with increasing seqs, logs what it dropped and rewrites the file
without it; seq continues after the last good line.

Bounded (Foya keeps every event): `open` keeps the last `KEEP` events, rewriting the file
atomically (temp + rename) with their seqs unchanged, and memory keeps at most about twice that
between starts (never more than twice `KEEP`). Replay is served from memory.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import errno
import json
import os
import time
from bisect import bisect_right
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from app.broker import Broker
from app.events import Event, iso_time
from app.files import remove_stray_temps, replace_atomic
from app.logs import get_logger

KEEP = 10_000
TOPIC = "context"
FILE = Path("context") / "events.jsonl"
_ENVELOPE = frozenset({"seq", "kind", "time"})
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class ContextNotice(TypedDict, total=False):
    """What a rule or memory change puts beside seq, kind and time: one of the changed rule or
    memory (as the API serves it), the id deleted, or the new memory settings."""

    rule: Mapping[str, object]
    memory: Mapping[str, object]
    memory_settings: Mapping[str, object]
    deleted_id: str


class ContextEvent(Event):
    """A journal entry as the broker and the SSE writer carry it: `payload` is a dict whose
    fields the wire form puts beside seq, kind and time (no `session`: the journal is global)."""

    __slots__ = ()

    def wire(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, **self.payload, "time": iso_time(self.time_ns)}


class ContextJournal:
    """The journal of one data directory; `open` it once before use (`ensure_open` from async
    code does so off the event loop)."""

    def __init__(self, data_dir: Path, broker: Broker, *, keep: int = KEEP) -> None:
        if keep < 1:
            raise ValueError("keep: at least one event")
        self.path = data_dir / FILE
        self.broker = broker
        self.keep = keep
        self._events: list[ContextEvent] = []
        self._seq = 0
        self._opened = False
        self._lock = asyncio.Lock()
        self._appends: set[asyncio.Task[int]] = set()

    @property
    def last_seq(self) -> int:
        """The seq of the newest event; 0 when there is none."""
        return self._seq

    def open(self) -> None:
        """Load the journal, dropping a torn or invalid tail and compacting it to the last
        `keep` events (blocking; idempotent)."""
        if self._opened:
            return
        self.path.parent.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        remove_stray_temps(self.path)
        events, dropped = _load(self.path)
        kept = events[-self.keep :]
        if dropped:
            get_logger("foya.context").warning(
                "context journal repaired", path=str(self.path), dropped_lines=dropped
            )
        if dropped or len(kept) < len(events):
            data = b"".join(_line(e) for e in kept)
            replace_atomic(self.path, data, mode=0o600)
        elif self.path.exists():
            os.chmod(self.path, 0o600)
        self._events = kept
        self._seq = events[-1].seq if events else 0
        self._opened = True

    async def ensure_open(self) -> None:
        """`open`, off the event loop, unless that was done already."""
        if self._opened:
            return
        async with self._lock:
            if not self._opened:
                await asyncio.to_thread(self.open)

    async def append(self, kind: str, payload: Mapping[str, Any]) -> int:
        """Store one event, then must-deliver it on `TOPIC`; return its seq.

        Once begun, an append finishes even if its caller is cancelled, so every line on disk
        is also in memory and was published."""
        clash = _ENVELOPE & payload.keys()
        if clash:
            raise ValueError(f"payload fields {sorted(clash)} are the envelope's own")
        task = asyncio.ensure_future(self._append(kind, dict(payload)))
        self._appends.add(task)
        task.add_done_callback(self._appends.discard)
        return await asyncio.shield(task)

    async def _append(self, kind: str, payload: Mapping[str, object]) -> int:
        await self.ensure_open()
        async with self._lock:
            event = ContextEvent(self._seq + 1, kind, "", None, time.time_ns(), payload)
            await asyncio.to_thread(_write, self.path, _line(event))
            self._seq = event.seq
            self._events.append(event)
            if len(self._events) >= 2 * self.keep:
                del self._events[: -self.keep]
            await self.broker.deliver(TOPIC, event)
        return event.seq

    def events_after(self, seq: int, limit: int | None = None) -> list[ContextEvent]:
        """Events with a larger seq than `seq`, oldest first (at most `limit`)."""
        start = bisect_right(self._events, seq, key=lambda e: e.seq)
        return self._events[start : None if limit is None else start + limit]


def _line(event: ContextEvent) -> bytes:
    return (event.json() + "\n").encode()


def _write(path: Path, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) != len(line):  # a full disk may take part of it
                raise OSError(errno.ENOSPC, "no space left for the context journal")
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _load(path: Path) -> tuple[list[ContextEvent], int]:
    """The valid events of the file in order, and how many lines were not (a torn tail too)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    *lines, tail = data.split(b"\n")
    events: list[ContextEvent] = []
    dropped = 1 if tail else 0
    for raw in lines:
        event = _parse(raw)
        if event is None or (events and event.seq <= events[-1].seq):
            dropped += 1
        else:
            events.append(event)
    return events, dropped


def _parse(raw: bytes) -> ContextEvent | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    seq, kind, stamp = obj.pop("seq", None), obj.pop("kind", None), obj.pop("time", None)
    if type(seq) is not int or seq <= 0 or not isinstance(kind, str) or not kind:
        return None
    if not isinstance(stamp, str):
        return None
    try:
        when = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    time_ns = (when - _EPOCH) // dt.timedelta(microseconds=1) * 1000
    return ContextEvent(seq, kind, "", None, time_ns, obj)
