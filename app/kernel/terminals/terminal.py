"""One terminal: a shell on a PTY, its output as events, its input, and the streams reading it.

Output. The master side is read when the event loop says it is readable (`add_reader`); each
wake-up reads what is there (at most `COALESCE` bytes) and makes one event of it. An incremental
UTF-8 decoder keeps a character split across reads whole (bytes that are not UTF-8 become
U+FFFD).

Pacing. No stream ever blocks the shell's output and no output waits for a stream, with one
exception: while an attached stream is more than `PAUSE_BYTES` or `PAUSE_EVENTS` behind, the
master is not read, so the shell blocks on its full PTY as it would in a terminal window that
is not drawn; the stream catches up from memory and reading resumes. A stream that stops reading
altogether is ended by its send timeout (app.http.sse), which detaches it. A connected client
therefore misses nothing; only one that (re)connects behind the buffer gets a gap marker.

Input is written without blocking; while the PTY takes no more (the shell is not reading), a
write waits for room, at most `INPUT_WAIT` seconds (409 `terminal_busy`).

End. When the shell exits (its pidfd turns readable) the output left in the PTY is read, the
`exited` event appended and the master closed. As in a terminal window, jobs left running in
the background survive the shell; they end with the terminal (DELETE, the session's deletion,
shutdown: the service ends the shell's whole session, process.end_shells, then `finish`).
Streams stay open after the exit, as in Foya, until the terminal is removed.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
from collections.abc import AsyncIterator
from typing import NotRequired

from typing_extensions import TypedDict

from app.errors import FoyaError
from app.events import Event
from app.kernel.terminals.errors import INPUT_WAIT, TerminalBusy, TerminalNotFound
from app.kernel.terminals.process import ShellProcess
from app.kernel.terminals.replay import MAX_BYTES, MAX_EVENTS, Replay
from app.logs import get_logger
from app.metrics import Metrics

READ_SIZE = 64 * 1024
COALESCE = 64 * 1024  # output bytes read per wake-up at most: one event
PAUSE_BYTES = MAX_BYTES // 4
PAUSE_EVENTS = MAX_EVENTS // 4
END_WAIT = 5.0  # seconds to wait for a killed shell to be reaped


class TerminalSnapshot(TypedDict):
    """A terminal as `GET …/terminals/{ref}` shows it (Foya's `Snapshot`): `buffer` is the last
    MiB of output, `seq` the last event's; `exit_code` once the shell has exited."""

    ref: str
    session_id: str
    running: bool
    exit_code: NotRequired[int]
    buffer: NotRequired[str]
    seq: int


class Terminal:
    """A running (or exited) shell and its events."""

    def __init__(self, session_id: str, ref: str, shell: ShellProcess, metrics: Metrics) -> None:
        self.session_id = session_id
        self.ref = ref
        self.shell = shell
        self.replay = Replay(session_id, ref)
        self.exit_code: int | None = None
        self.ended = asyncio.Event()
        self._metrics = metrics
        self._out = metrics.terminal_bytes.labels(direction="output")
        self._in = metrics.terminal_bytes.labels(direction="input")
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._undecoded = 0  # bytes read but not yet part of an event (a split character)
        self._streams: set[TerminalStream] = set()
        self._reading = False
        self._hung_up = False  # the master said EIO: no process holds the tty any more
        self._input = asyncio.Lock()
        self._room: asyncio.Future[None] | None = None  # a write waiting for the PTY
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(shell.pidfd, self._exited)
        metrics.terminals_open.inc()
        self.pace()

    @property
    def running(self) -> bool:
        return self.exit_code is None

    def snapshot(self, *, output: bool = True) -> TerminalSnapshot:
        """The terminal's state, with the last MiB of output as `buffer` unless `output` is
        false (a listing: the buffer is not joined only to be dropped)."""
        out = TerminalSnapshot(
            ref=self.ref, session_id=self.session_id, running=self.running, seq=self.replay.seq
        )
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if output and (buffer := self.replay.buffer()):
            out["buffer"] = buffer
        return out

    async def write(self, data: bytes) -> None:
        """Send `data` to the shell, waiting (bounded) while its PTY is full."""
        async with self._input:
            view = memoryview(data)
            try:
                async with asyncio.timeout(INPUT_WAIT):
                    while view:
                        self._check_running()
                        try:
                            written = os.write(self.shell.master, view)
                        except BlockingIOError:
                            await self._wait_for_room()
                            continue
                        except OSError:
                            raise self._gone() from None
                        self._in.inc(written)
                        view = view[written:]
            except TimeoutError:
                done = len(data) - len(view)
                raise TerminalBusy(
                    f"the terminal took no input for {INPUT_WAIT:g} s; "
                    f"{done} of {len(data)} bytes were written"
                ) from None

    def resize(self, cols: int, rows: int) -> None:
        """New window size; 0 for either leaves it as it is (as Foya does)."""
        self._check_running()
        if cols and rows:
            self.shell.resize(cols, rows)

    async def finish(self) -> None:
        """Once its processes were told to end: wait for the shell, then end the streams."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(END_WAIT):
                await self.ended.wait()
        if self.running:  # unkillable (uninterruptible sleep): let it go
            get_logger("foya.terminals").warning("shell did not end", pid=self.shell.pid)
            self._loop.remove_reader(self.shell.pidfd)
            self._pause()
            self.shell.close()
            self._metrics.terminals_open.dec()
        self.replay.close()

    @contextlib.asynccontextmanager
    async def attached(self, stream: TerminalStream) -> AsyncIterator[TerminalStream]:
        """`stream` paces the output while it is attached."""
        self._streams.add(stream)
        self.pace()
        try:
            yield stream
        finally:
            self._streams.discard(stream)
            self.pace()

    def pace(self) -> None:
        """Read the master unless a stream is too far behind (or the shell is gone)."""
        if self._hung_up or not self.running:
            return
        replay = self.replay
        behind = any(
            replay.seq - s.cursor > PAUSE_EVENTS or replay.end - s.offset > PAUSE_BYTES
            for s in self._streams
        )
        if behind:
            self._pause()
        elif not self._reading:
            self._loop.add_reader(self.shell.master, self._readable)
            self._reading = True

    # -- output --------------------------------------------------------------------------------

    def _readable(self) -> None:
        if data := self._read(COALESCE):
            self._output(data)
            self.pace()

    def _read(self, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            try:
                data = os.read(self.shell.master, min(READ_SIZE, limit - size))
            except BlockingIOError:
                break
            except OSError:  # EIO: the last process holding the tty closed it
                data = b""
            if not data:
                self._hung_up = True
                self._pause()
                break
            chunks.append(data)
            size += len(data)
        return b"".join(chunks)

    def _output(self, data: bytes) -> None:
        self._out.inc(len(data))
        self._undecoded += len(data)
        if text := self._decoder.decode(data):
            self.replay.output(text, self._undecoded)
            self._undecoded = 0

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self.shell.master)
            self._reading = False

    def _exited(self) -> None:
        """The pidfd is readable: the shell has exited."""
        self._loop.remove_reader(self.shell.pidfd)
        code = self.shell.reap()
        self._pause()
        if not self._hung_up and (rest := self._read(MAX_BYTES)):
            self._output(rest)
        if text := self._decoder.decode(b"", final=True):
            self.replay.output(text, self._undecoded)
        self.exit_code = code
        self.replay.exited(code)
        if self._room is not None:
            self._loop.remove_writer(self.shell.master)
            if not self._room.done():
                self._room.set_result(None)  # the writer sees the exit
        self.shell.close()
        self._metrics.terminals_open.dec()
        self.ended.set()

    # -- input ---------------------------------------------------------------------------------

    async def _wait_for_room(self) -> None:
        self._room = self._loop.create_future()
        self._loop.add_writer(self.shell.master, self._room_made)
        try:
            await self._room
        finally:
            if self.running:
                self._loop.remove_writer(self.shell.master)
            self._room = None

    def _room_made(self) -> None:
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    def _check_running(self) -> None:
        if not self.running:
            raise self._gone()

    def _gone(self) -> FoyaError:
        return TerminalNotFound(f"terminal {self.ref} has exited")


class TerminalStream:
    """One client's cursor over a terminal's events (an `app.http.sse.EventSource`): the events
    after `after`, a gap marker first when some of them are gone, then live ones."""

    def __init__(self, terminal: Terminal, after: int) -> None:
        self.terminal = terminal
        self._cursor = after
        self.offset = terminal.replay.offset(after)

    @property
    def cursor(self) -> int:
        """The last seq this client has."""
        return self._cursor

    def attached(self) -> contextlib.AbstractAsyncContextManager[TerminalStream]:
        """Attach to the terminal for the `async with` block (it paces the output meanwhile)."""
        return self.terminal.attached(self)

    async def next(self) -> Event | None:
        """The next event; None once the terminal is removed and everything kept was sent."""
        replay = self.terminal.replay
        while True:
            wake = replay.wake  # taken before looking: an event appended after sets it
            if events := self.ready(1):
                return events[0]
            if replay.closed:
                return None
            await wake.wait()

    def ready(self, limit: int) -> list[Event]:
        """Up to `limit` events available now."""
        replay = self.terminal.replay
        out: list[Event] = []
        if (gap := replay.gap(self._cursor)) is not None:
            out.append(gap)
        out += replay.after(out[-1].seq if out else self._cursor, limit - len(out))
        if out:
            self._cursor = out[-1].seq
            self.offset = replay.offset(self._cursor)
            self.terminal.pace()
        return out
