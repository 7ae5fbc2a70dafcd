"""Event-stream benchmark: session SSE through the full kernel against a bare ASGI fan-out.

Run from the repository root:

    .venv/bin/python -m bench.stream            # table on stdout, progress on stderr
    .venv/bin/python -m bench.stream --json     # machine-readable results on stdout
    .venv/bin/python -m bench.stream --quick    # fewer events, one round of each

Two server processes, both real hypercorn on 127.0.0.1 with the config of
`app.serve.listeners.hypercorn_config()` (the very function, on a socket from
`app.serve.listeners.open_tcp()`), each
running this module in a hidden `--serve` mode and taking commands as JSON lines on stdin:

- kernel: `app.main.create_app(Settings(data_dir=tmp), token_sha256=None)` in-process (Observe
  middleware, FastAPI route, `Kernel.session_events`, `SessionStream`, `EventStreamResponse`).
  Events are produced inside that process, without turns, by awaiting
  `kernel.facts.emit(EventDraft(session, "session_updated", payload))` one after another:
  append to the store (its own commit, synchronous=FULL), then `Broker.deliver` (must-deliver).
- bare: a tiny ASGI app. One `asyncio.Queue(256)` per SSE client; the producer builds each
  frame once (`app.http.sse.frame`, so the bytes match the kernel's) and `await q.put()`s it
  into every queue; each client's handler sends what its queue yields.

The SSE clients run in this (orchestrating) process: raw asyncio protocols that parse the HTTP
head and count SSE `data:` lines in the chunked body, or fully parse frames where a payload is
needed. Servers are pinned to one core, this process to another (2+ cores), like
bench/http_stack.py.
Timestamps are CLOCK_MONOTONIC (`time.monotonic_ns()`), which on Linux is one clock for every
process on the machine, so a server-side "just before emit" and a client-side "received" compare
directly (and NTP cannot step it, unlike `time.time_ns()`).

1. Fan-out: 10 clients subscribe (live only, no `after`); then N events (~200-byte payload) are
   produced. Throughput = 10 * N / (last receipt by any client - just before the first emit).
   Sides alternate A B C, C B A over a few rounds after a warm-up; the server's CPU time per
   delivered event is reported too (it moves less than events/s when the machine is shared).
   Diagnostic rows: the kernel with `Broker.deliver` only (no store append, fake seqs above the
   store's: the broker and stream stack alone; like the bare producer it only yields when a
   buffer is full; N/2 events), the same yielding once after each event as `emit` does (so
   every client is woken and sent one frame per event: the per-delivery cost without the
   store), and `emit` with no subscriber (the store path alone, N/5).
2. Replay: 10k stored events in one session (written in setup by `Store.append_all`); one client
   connects with `?after=0` and reads until 10k events. Baseline: the bare server streaming 10k
   frames built on the fly from memory to one client (the transport ceiling, not a target).
3. Latency: one client; events emitted paced at ~1k/s with `time.monotonic_ns()` put in the
   payload just before `emit`; latency = receipt - that stamp, so it includes the durable
   commit. The bare side stamps just before building and queueing the frame. The client lives
   in another process than the producer (as in production: the kernel never shares a loop with
   its clients), and CLOCK_MONOTONIC makes the two stamps comparable.

The machine may be shared: before each measured run the script waits, within a total budget
(`--quiet-budget`, 10 s), for other processes to use < 0.3 cores, and reports what it could not
avoid. `--profile py-spy` (py-spy from PATH or /tmp/pyspy, sampling every thread of the kernel,
store thread included) or `--profile cprofile` (main thread only) adds profiled kernel fan-out
runs and prints where the time goes. `--data-root DIR` puts the data dirs elsewhere (e.g.
/dev/shm, to take fsync out of the picture). A default run takes about 100 s.

Every client checks it got exactly the expected count and the expected last `id:`; the kernel
reports broker cut-offs. Traffic goes only to 127.0.0.1. Every process started is stopped by
PID (SIGTERM, then SIGKILL) in a finally block. No assertion is made on any figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench.harness import (
    HOST,
    Processes,
    Quiet,
    child_env,
    machine_busy,
    now_ns,
    process_cpu,
    say,
    spawn,
    tail,
    workspace,
)
from bench.profiles import Profiled, cprofile_summary, find_pyspy, pyspy, pyspy_summary
from bench.report import (
    Row,
    dist_version,
    finish,
    fs_type,
    percentile,
    python,
    rows_of,
    table,
    verdicts,
)

CLIENTS = 10
BUFFER = 256  # the bare side's per-client queue, as app.broker.BUFFER
KIND = "session_updated"  # `app.events.SESSION_UPDATED` (any record), which the drafts use
BARE_SESSION = "01BARE" + "0" * 20  # as long as a kernel session id, so frames match in size
TARGET_FANOUT_RATIO = 0.5  # kernel / bare events/s, at least
BUSY_CORES = 0.1


def payload(i: int, size: int, stamp: int = 0) -> dict[str, Any]:
    """A payload whose compact JSON is about `size` bytes (with a 19-digit stamp in `t`)."""
    base = len(json.dumps({"i": i, "t": 10**18, "pad": ""}, separators=(",", ":")))
    return {"i": i, "t": stamp, "pad": "x" * max(0, size - base)}


# ---------------------------------------------------------------------------------------------
# Server side (hidden `--serve kernel|bare`): hypercorn in-process plus a JSON-lines control loop


async def _serve_main(kind: str, data_dir: str) -> None:
    import logging

    from hypercorn.asyncio import serve

    from app.serve.listeners import hypercorn_config, open_tcp
    from app.settings import ServePlan

    # Control replies go to the original stdout; fd 1 (where app logs go) becomes stderr.
    ctrl = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1)

    plan = ServePlan("tcp", host=HOST, port=0)
    listener = open_tcp(plan)
    port = listener.sock.getsockname()[1]
    config = hypercorn_config(plan)
    config.bind = [
        f"fd://{listener.sock.detach()}"
    ]  # the socket app.serve.listeners.open_tcp() bound
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    handler: Any
    if kind == "kernel":
        from app.logs import configure_logging
        from app.main import create_app
        from app.settings import Settings

        configure_logging("json", "info")  # as `foya serve`: one log line per finished request
        service = create_app(Settings(data_dir=data_dir), token_sha256=None)
        await service.kernel.start()
        handler = KernelHandler(service.kernel)
        asgi: Any = service.app

        async def shutdown() -> None:
            await stop.wait()
            await service.kernel.begin_shutdown()

    else:
        logging.basicConfig(level=logging.WARNING)
        hub = BareHub()
        handler = hub
        asgi = hub

        async def shutdown() -> None:
            await stop.wait()
            hub.close()

    server = asyncio.create_task(serve(asgi, config, shutdown_trigger=shutdown))
    ctrl.write(json.dumps({"port": port, "pid": os.getpid()}) + "\n")

    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def commands() -> None:
        while not stop.is_set():
            line = await reader.readline()
            if not line:
                stop.set()  # the orchestrator went away
                return
            cmd = json.loads(line)
            try:
                reply = await handler.run(cmd)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            ctrl.write(json.dumps(reply) + "\n")

    control = asyncio.create_task(commands())
    try:
        await server
    finally:
        control.cancel()


class KernelHandler:
    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.fake_seq = 1_000_000_000  # seqs for deliver-only events, far above the store's

    def _counter(self, name: str) -> float:
        value = self.kernel.metrics.registry.get_sample_value(name)
        return float(value or 0.0)

    async def run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from app.events import SESSION_UPDATED, Event, EventDraft
        from app.kernel.emit import topic

        op = cmd["op"]
        sessions = self.kernel.sessions
        if op == "session":
            return {"session": (await sessions.create({}))["id"]}
        if op == "seed":
            sid, n, size = cmd["session"], cmd["n"], cmd["size"]
            last = 0
            for start in range(0, n, 1000):
                drafts = [
                    EventDraft(sid, SESSION_UPDATED, payload(i, size, now_ns()))
                    for i in range(start, min(n, start + 1000))
                ]
                last = (await self.kernel.store.append_all(drafts))[-1].seq
            return {"last_seq": last}
        if op == "fanout":
            sid, n, size, mode = cmd["session"], cmd["n"], cmd["size"], cmd["mode"]
            cut0 = self._counter("foya_broker_cut_off_subscribers_total")
            with Profiled(cmd.get("profile")):
                t0 = now_ns()
                if mode == "emit":
                    for i in range(n):
                        event = await self.kernel.facts.emit(
                            EventDraft(sid, SESSION_UPDATED, payload(i, size, t0))
                        )
                    last = event.seq
                else:  # "deliver(1)": the broker and stream stack only, nothing stored
                    name = topic(sid)
                    for i in range(n):
                        self.fake_seq += 1
                        event = Event(
                            self.fake_seq, KIND, sid, None, time.time_ns(), payload(i, size, t0)
                        )
                        await self.kernel.broker.deliver(name, event)
                        if mode == "deliver1":  # one event per loop turn, like emit's
                            await asyncio.sleep(0)
                    last = self.fake_seq
                t1 = now_ns()
            cut = self._counter("foya_broker_cut_off_subscribers_total") - cut0
            return {"t0": t0, "t1": t1, "last_seq": last, "cut_off": cut}
        if op == "paced":
            sid, n, size, rate = cmd["session"], cmd["n"], cmd["size"], cmd["rate"]
            cut0 = self._counter("foya_broker_cut_off_subscribers_total")
            t0 = now_ns()
            late = 0
            for i in range(n):
                due = t0 + i * 1_000_000_000 // rate
                wait = due - now_ns()
                if wait > 0:
                    await asyncio.sleep(wait / 1e9)
                else:
                    late += 1
                body = payload(i, size)
                body["t"] = now_ns()  # just before emit
                event = await self.kernel.facts.emit(EventDraft(sid, SESSION_UPDATED, body))
            cut = self._counter("foya_broker_cut_off_subscribers_total") - cut0
            return {"t0": t0, "t1": now_ns(), "last_seq": event.seq, "late": late, "cut_off": cut}
        raise ValueError(f"unknown op {op!r}")


class BareHub:
    """The bare side: an ASGI app fanning frames out through one asyncio queue per client."""

    def __init__(self) -> None:
        self.queues: set[asyncio.Queue[bytes | None]] = set()
        self.seq = 0
        self.closed = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        from app.http.sse import HEADERS

        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": b": ok\n\n", "more_body": True})
        if scope["path"] == "/replay":
            await self._replay(scope, send)
        else:
            queue: asyncio.Queue[bytes | None] = asyncio.Queue(BUFFER)
            self.queues.add(queue)
            gone = asyncio.ensure_future(self._disconnected(receive, queue))
            try:
                while (chunk := await queue.get()) is not None:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            finally:
                self.queues.discard(queue)
                gone.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _disconnected(self, receive: Any, queue: asyncio.Queue[bytes | None]) -> None:
        """Once the client is gone: stop feeding its queue and end its handler."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.queues.discard(queue)
        _end(queue)

    async def _replay(self, scope: Any, send: Any) -> None:
        from app.events import Event
        from app.http.sse import frame

        query = dict(p.split("=", 1) for p in scope["query_string"].decode().split("&") if p)
        n, size = int(query["n"]), int(query["size"])
        stored = [
            Event(i + 1, KIND, BARE_SESSION, None, time.time_ns(), payload(i, size, now_ns()))
            for i in range(n)
        ]
        for event in stored:
            await send({"type": "http.response.body", "body": frame(event), "more_body": True})

    def _frame(self, i: int, size: int, stamp: int) -> bytes:
        from app.events import Event
        from app.http.sse import frame

        self.seq += 1
        event = Event(self.seq, KIND, BARE_SESSION, None, time.time_ns(), payload(i, size, stamp))
        return frame(event)

    async def _put(self, chunk: bytes) -> None:
        for queue in list(self.queues):
            await queue.put(chunk)

    async def run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        if op == "fanout":
            n, size = cmd["n"], cmd["size"]
            t0 = now_ns()
            for i in range(n):
                await self._put(self._frame(i, size, t0))
            return {"t0": t0, "t1": now_ns(), "last_seq": self.seq, "cut_off": 0}
        if op == "paced":
            n, size, rate = cmd["n"], cmd["size"], cmd["rate"]
            t0 = now_ns()
            late = 0
            for i in range(n):
                due = t0 + i * 1_000_000_000 // rate
                wait = due - now_ns()
                if wait > 0:
                    await asyncio.sleep(wait / 1e9)
                else:
                    late += 1
                stamp = now_ns()  # just before the frame is built and queued
                await self._put(self._frame(i, size, stamp))
            return {"t0": t0, "t1": now_ns(), "last_seq": self.seq, "late": late, "cut_off": 0}
        raise ValueError(f"unknown op {op!r}")

    def close(self) -> None:
        self.closed = True
        for queue in self.queues:
            _end(queue)


def _end(queue: asyncio.Queue[bytes | None]) -> None:
    """Wake the queue's reader with the end marker (dropping what it had not sent yet)."""
    while queue.full():
        queue.get_nowait()
    queue.put_nowait(None)


# ---------------------------------------------------------------------------------------------
# Orchestrator side: servers, SSE clients


class ServerProc:
    """A `--serve` child: started pinned, talked to over stdin/stdout, stopped by PID."""

    def __init__(self, kind: str, procs: Any, workdir: str, cpu: int | None) -> None:
        self.kind = kind
        self.stderr_path = os.path.join(workdir, f"{kind}.stderr")
        argv = [sys.executable, "-m", "bench.stream", "--serve", kind]
        argv += ["--data-dir", os.path.join(workdir, f"data-{kind}")]
        env = child_env({"XDG_CONFIG_HOME": os.path.join(workdir, "xdg")})
        with open(self.stderr_path, "wb") as err:
            self.proc = spawn(
                procs, argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                cpu=cpu,
            )  # fmt: skip
        self.reader: asyncio.StreamReader | None = None
        self.port = 0

    async def start(self, timeout: float = 120.0) -> None:
        loop = asyncio.get_running_loop()
        reader = self.reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self.proc.stdout)
        hello = await self.reply(timeout)
        self.port = int(hello["port"])

    async def reply(self, timeout: float) -> dict[str, Any]:
        assert self.reader is not None
        try:
            line = await asyncio.wait_for(self.reader.readline(), timeout)
        except TimeoutError:
            raise RuntimeError(f"{self.kind} server: no reply in {timeout} s") from None
        if not line:
            raise RuntimeError(f"{self.kind} server exited:\n{self.stderr_tail()}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.kind} server: {reply['error']}")
        return reply

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()

    async def call(self, cmd: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        self.send(cmd)
        return await self.reply(timeout)

    def cpu(self) -> float:
        return process_cpu(self.proc.pid)

    def stderr_tail(self, lines: int = 20) -> str:
        return tail([self.stderr_path], lines)


_ID = re.compile(rb"(?:^|\n)id: (\d+)\n")
_END = b"\r\n0\r\n\r\n"  # last chunk of a chunked body: the server ended the stream


class SSEClient(asyncio.Protocol):
    """One SSE connection. Counts `data:` lines (fast) or parses every frame (`parse=True`)."""

    def __init__(self, want: int, parse: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self.want = want
        self.parse = parse
        self.ready: asyncio.Future[None] = loop.create_future()  # head + ": ok" received
        self.done: asyncio.Future[int] = loop.create_future()  # receipt time of the want-th
        self.status = 0
        self.head = b""
        self.in_body = False
        self.count = 0
        self.bytes = 0
        self.tail = b""  # last 6 bytes, so a `\ndata: ` split across reads is still counted
        self.recent = b""  # last bytes, for the last `id:` and the end-of-stream marker
        self.buf = b""  # parse mode
        self.samples: list[tuple[int, int, int]] = []  # (seq, payload t, receipt) in parse mode
        self.ended = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = now_ns()
        if not self.in_body:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.head[9:12])
            data = self.head[end + 4 :]
            self.in_body = True
            if self.status != 200:
                self._fail(f"status {self.status}: {self.head[:300]!r}")
                return
        self.bytes += len(data)
        self.recent = (self.recent + data)[-4096:]
        if not self.ready.done() and b": ok\n\n" in self.recent:
            self.ready.set_result(None)
        if self.parse:
            self._parse(data, now)
        else:
            joined = self.tail + data
            self.count += joined.count(b"\ndata: ")
            self.tail = joined[-6:]
        if self.count >= self.want and not self.done.done():
            self.done.set_result(now)
        if self.recent.endswith(_END):
            self._end()

    def _parse(self, data: bytes, now: int) -> None:
        self.buf += data
        while True:
            start = self.buf.find(b"\ndata: ")
            if start < 0:
                self.buf = self.buf[-6:]
                return
            stop = self.buf.find(b"\n", start + 7)
            if stop < 0:
                self.buf = self.buf[start:]
                return
            envelope = json.loads(self.buf[start + 7 : stop])
            body = envelope.get("payload") or {}
            self.samples.append((int(envelope["seq"]), int(body.get("t", 0)), now))
            self.count += 1
            self.buf = self.buf[stop:]

    def last_id(self) -> int:
        found = _ID.findall(self.recent)
        return int(found[-1]) if found else 0

    def _fail(self, message: str) -> None:
        for fut in (self.ready, self.done):
            if not fut.done():
                fut.set_exception(RuntimeError(message))

    def _end(self) -> None:
        self.ended = True
        self._fail(f"stream ended by the server after {self.count} events")

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ended:
            self.ended = True
            self._fail(f"connection lost after {self.count} events ({exc})")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def open_clients(
    port: int, path: str, count: int, want: int, parse: bool = False, wait_ready: bool = True
) -> list[SSEClient]:
    loop = asyncio.get_running_loop()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nAccept: text/event-stream\r\n"
        "Cache-Control: no-cache\r\n\r\n"
    ).encode()
    clients: list[SSEClient] = []
    try:
        for _ in range(count):
            _, client = await loop.create_connection(lambda: SSEClient(want, parse), HOST, port)
            assert client.transport is not None
            client.transport.write(request)
            clients.append(client)
        if wait_ready:
            await asyncio.wait_for(asyncio.gather(*(c.ready for c in clients)), 30)
    except BaseException:
        close_clients(clients)
        raise
    return clients


def close_clients(clients: list[SSEClient]) -> None:
    for client in clients:
        client.close()
        for fut in (client.ready, client.done):
            if fut.done() and not fut.cancelled():
                fut.exception()  # mark retrieved
            else:
                fut.cancel()


# ---------------------------------------------------------------------------------------------
# Measurements


QUIET = Quiet(0.0)


@dataclass
class Usage:
    """CPU seconds of the server, of this process and of everything else over one run."""

    server: ServerProc
    server0: float = 0.0
    busy0: float = 0.0
    self0: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    other_cpu: float = 0.0

    @staticmethod
    def _self() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime

    def __enter__(self) -> Usage:
        self.server0, self.busy0, self.self0 = self.server.cpu(), machine_busy(), self._self()
        return self

    def __exit__(self, *_: object) -> None:
        self.server_cpu = self.server.cpu() - self.server0
        self.client_cpu = self._self() - self.self0
        busy = machine_busy() - self.busy0
        self.other_cpu = max(0.0, busy - self.server_cpu - self.client_cpu)


@dataclass
class FanoutRun:
    events: int
    clients: int
    seconds: float
    rate: float  # events received per second, all clients together
    emit_seconds: float  # first emit to last emit returned (server side)
    server_cpu_us_per_delivery: float
    client_cpu_us_per_delivery: float  # this process: the 10 clients and the orchestration
    other_cores: float
    bytes_per_frame: float
    cut_off: float
    ok: bool
    problem: str | None = None


async def fanout_run(
    server: ServerProc,
    path: str,
    cmd: dict[str, Any],
    clients_n: int,
    timeout: float,
) -> FanoutRun:
    n = cmd["n"]
    clients = await open_clients(server.port, path, clients_n, n) if clients_n else []
    problem = None
    try:
        await QUIET.wait_async()
        with Usage(server) as usage:
            started = time.perf_counter()
            server.send(cmd)
            reply_task = asyncio.ensure_future(server.reply(timeout))
            received = [c.done for c in clients]
            try:
                done_at = await asyncio.wait_for(asyncio.gather(*received), timeout)
            except (TimeoutError, RuntimeError) as exc:
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else "timeout"
                done_at = [now_ns()]
            reply = await reply_task
            elapsed = time.perf_counter() - started
        if not clients:
            done_at = [reply["t1"]]
        end = max(done_at)
        seconds = (end - reply["t0"]) / 1e9
        counts = [c.count for c in clients]
        last_ids = {c.last_id() for c in clients}
        if problem is None and clients:
            await asyncio.sleep(0.05)  # nothing beyond N should arrive
            counts = [c.count for c in clients]
            if any(x != n for x in counts):
                problem = f"counts {counts} != {n}"
            elif last_ids != {reply["last_seq"]}:
                problem = f"last ids {last_ids} != {reply['last_seq']}"
        if reply.get("cut_off"):
            problem = (problem or "") + f" cut-offs {reply['cut_off']:.0f}"
        deliveries = n * max(1, len(clients))
        return FanoutRun(
            events=n,
            clients=len(clients),
            seconds=round(seconds, 4),
            rate=round(deliveries / seconds, 1),
            emit_seconds=round((reply["t1"] - reply["t0"]) / 1e9, 4),
            server_cpu_us_per_delivery=round(usage.server_cpu / deliveries * 1e6, 2),
            client_cpu_us_per_delivery=round(usage.client_cpu / deliveries * 1e6, 2),
            other_cores=round(usage.other_cpu / max(elapsed, 1e-9), 3),
            bytes_per_frame=round(sum(c.bytes for c in clients) / max(1, sum(counts)), 1),
            cut_off=reply.get("cut_off", 0),
            ok=problem is None,
            problem=problem,
        )
    finally:
        close_clients(clients)
        await asyncio.sleep(0.1)  # let the server notice the disconnects before the next run


def _summary(runs: list[FanoutRun]) -> dict[str, Any]:
    good = [r for r in runs if r.ok] or runs
    return {
        "rate_median": round(statistics.median(r.rate for r in good), 1),
        "rate_runs": [r.rate for r in runs],
        "cpu_us_per_delivery_median": round(
            statistics.median(r.server_cpu_us_per_delivery for r in good), 2
        ),
        "client_cpu_us_per_delivery_median": round(
            statistics.median(r.client_cpu_us_per_delivery for r in good), 2
        ),
        "emit_seconds_runs": [r.emit_seconds for r in runs],
        "other_cores_mean": round(statistics.fmean(r.other_cores for r in runs), 3),
        "bytes_per_frame": good[0].bytes_per_frame,
        "all_ok": all(r.ok for r in runs),
        "problems": [r.problem for r in runs if r.problem],
    }


async def fanout(
    args: argparse.Namespace, kernel: ServerProc, bare: ServerProc, sid: str
) -> dict[str, Any]:
    n, size = args.events, args.payload
    kpath = f"/sessions/{sid}/events"
    common = {"op": "fanout", "n": n, "size": size}
    kernel_cmd = {**common, "session": sid}
    sides: list[tuple[str, ServerProc, str, dict[str, Any]]] = [
        ("bare", bare, "/events", common),
        ("kernel emit", kernel, kpath, {**kernel_cmd, "mode": "emit"}),
        # A diagnostic: half the events keep the run short (the figures are per delivery).
        ("kernel deliver-only", kernel, kpath, {**kernel_cmd, "mode": "deliver", "n": n // 2}),
        # The same, yielding after each event as emit does: one frame per send, no store.
        ("kernel deliver-1", kernel, kpath, {**kernel_cmd, "mode": "deliver1", "n": n // 2}),
    ]
    runs: dict[str, list[FanoutRun]] = {name: [] for name, *_ in sides}
    for name, server, path, cmd in sides:  # warm-up: smaller, not counted
        run = await fanout_run(server, path, {**cmd, "n": max(200, cmd["n"] // 10)}, CLIENTS, 60)
        say(
            f"  warm-up {name}: {run.rate:,.0f} events/s"
            + (f" ({run.problem})" * bool(run.problem))
        )
    for round_no in range(1, args.rounds + 1):
        order = sides if round_no % 2 else sides[::-1]
        for name, server, path, cmd in order:
            run = await fanout_run(server, path, cmd, CLIENTS, 60)
            runs[name].append(run)
            say(
                f"  round {round_no} {name}: {run.rate:,.0f} events/s, "
                f"{run.server_cpu_us_per_delivery:.1f} us server CPU/delivery "
                f"(clients {run.client_cpu_us_per_delivery:.1f}), "
                f"others {run.other_cores:.2f} cores" + (f"  PROBLEM {run.problem}" * (not run.ok))
            )
    # The store path alone: emit with nobody subscribed.
    alone_cmd = {**kernel_cmd, "n": max(200, n // 5), "mode": "emit"}
    alone = await fanout_run(kernel, kpath, alone_cmd, 0, 60)
    say(f"  kernel emit, no subscriber: {alone.rate:,.0f} events/s")
    out = {name: _summary(r) for name, r in runs.items()}
    base = out["bare"]
    for name in ("kernel emit", "kernel deliver-only", "kernel deliver-1"):
        out[name]["ratio_vs_bare"] = round(out[name]["rate_median"] / base["rate_median"], 3)
        out[name]["ratio_per_round"] = [
            round(k.rate / b.rate, 3) for k, b in zip(runs[name], runs["bare"], strict=True)
        ]
        out[name]["cpu_ratio_vs_bare"] = round(
            base["cpu_us_per_delivery_median"] / out[name]["cpu_us_per_delivery_median"], 3
        )
    out["kernel emit, no subscriber"] = {
        "rate": alone.rate,
        "server_cpu_us_per_event": alone.server_cpu_us_per_delivery,
    }
    return {"events": n, "clients": CLIENTS, "payload_bytes": size, "sides": out}


async def profile_fanout(
    args: argparse.Namespace, kernel: ServerProc, procs: Any, sid: str, workdir: str
) -> dict[str, Any]:
    """Extra kernel fan-out runs (emit, then deliver-only) under a profiler.

    `py-spy` samples every thread of the kernel process (store thread included) from outside;
    `cprofile` runs inside the kernel, main thread only, and slows Python code down a lot.
    """
    out: dict[str, Any] = {"method": args.profile}
    path = f"/sessions/{sid}/events"
    for mode in ("emit", "deliver"):
        cmd = {"op": "fanout", "session": sid, "n": args.events, "size": args.payload, "mode": mode}
        if args.profile == "cprofile":
            stats_path = os.path.join(args.profile_dir or workdir, f"kernel-{mode}.pstats")
            cmd["profile"] = stats_path
            run = await fanout_run(kernel, path, cmd, CLIENTS, 120)
            out[mode] = {"rate_under_profiler": run.rate, **cprofile_summary(stats_path)}
            continue
        raw = os.path.join(args.profile_dir or workdir, f"kernel-{mode}.pyspy.txt")
        with pyspy(args.py_spy, kernel.proc.pid, raw, procs, 500, args.cpus[1]) as spied:
            await asyncio.sleep(1.0)  # attach
            run = await fanout_run(kernel, path, cmd, CLIENTS, 120)
        out[mode] = spied or {"rate_under_profiler": run.rate, **pyspy_summary(raw)}
    return out


async def replay(
    args: argparse.Namespace, kernel: ServerProc, bare: ServerProc, sid: str, last_seq: int
) -> dict[str, Any]:
    n, size = args.replay_events, args.payload
    sides = [
        ("kernel", kernel, f"/sessions/{sid}/events?after=0", last_seq),
        ("bare", bare, f"/replay?n={n}&size={size}", n),
    ]
    runs: dict[str, list[dict[str, Any]]] = {"kernel": [], "bare": []}
    for round_no in range(args.replay_rounds + 1):  # round 0 warms up
        order = sides if round_no % 2 else sides[::-1]
        for name, server, path, expect_last in order:
            await QUIET.wait_async()
            with Usage(server) as usage:
                t0 = now_ns()
                clients = await open_clients(server.port, path, 1, n, wait_ready=False)
                problem = None
                try:
                    end = await asyncio.wait_for(clients[0].done, 60)
                except (TimeoutError, RuntimeError) as exc:
                    problem, end = str(exc) or "timeout", now_ns()
                await asyncio.sleep(0.05)
                client = clients[0]
                if problem is None and client.count != n:
                    problem = f"count {client.count} != {n}"
                if problem is None and client.last_id() != expect_last:
                    problem = f"last id {client.last_id()} != {expect_last}"
                close_clients(clients)
            seconds = (end - t0) / 1e9
            if round_no == 0:
                continue
            runs[name].append(
                {
                    "seconds": round(seconds, 4),
                    "rate": round(n / seconds, 1),
                    "server_cpu_us_per_event": round(usage.server_cpu / n * 1e6, 2),
                    "problem": problem,
                }
            )
            say(f"  replay round {round_no} {name}: {n / seconds:,.0f} events/s")
            await asyncio.sleep(0.1)
    out: dict[str, Any] = {"events": n}
    for name, rs in runs.items():
        out[name] = {
            "rate_median": round(statistics.median(r["rate"] for r in rs), 1),
            "rate_runs": [r["rate"] for r in rs],
            "cpu_us_per_event_median": round(
                statistics.median(r["server_cpu_us_per_event"] for r in rs), 2
            ),
            "problems": [r["problem"] for r in rs if r["problem"]],
        }
    out["ratio_vs_bare"] = round(out["kernel"]["rate_median"] / out["bare"]["rate_median"], 3)
    return out


async def latency(
    args: argparse.Namespace, kernel: ServerProc, bare: ServerProc, sid: str
) -> dict[str, Any]:
    n, rate, size = args.latency_events, args.latency_rate, args.payload
    out: dict[str, Any] = {"events": n, "rate": rate}
    sides = [
        ("kernel", kernel, f"/sessions/{sid}/events", {"session": sid}),
        ("bare", bare, "/events", {}),
    ]
    for name, server, path, extra in sides:
        clients = await open_clients(server.port, path, 1, n, parse=True)
        try:
            await QUIET.wait_async()
            cmd = {"op": "paced", "n": n, "rate": rate, "size": size, **extra}
            reply = await server.call(cmd, timeout=n / rate + 60)
            problem = None
            try:
                await asyncio.wait_for(clients[0].done, 10)
            except (TimeoutError, RuntimeError) as exc:
                problem = str(exc) or "timeout"
            samples = clients[0].samples
        finally:
            close_clients(clients)
        lat_ms = [(recv - t) / 1e6 for _, t, recv in samples if t]
        seqs = [s for s, _, _ in samples]
        if problem is None and (len(seqs) != n or seqs != sorted(set(seqs))):
            problem = f"{len(seqs)} events, in order and unique: {seqs == sorted(set(seqs))}"
        out[name] = {
            "received": len(lat_ms),
            "p50_ms": round(percentile(lat_ms, 0.50), 3) if lat_ms else None,
            "p90_ms": round(percentile(lat_ms, 0.90), 3) if lat_ms else None,
            "p99_ms": round(percentile(lat_ms, 0.99), 3) if lat_ms else None,
            "max_ms": round(max(lat_ms), 3) if lat_ms else None,
            "achieved_rate": round(n / ((reply["t1"] - reply["t0"]) / 1e9), 1),
            "late_emits": reply.get("late", 0),
            "cut_off": reply.get("cut_off", 0),
            "problem": problem,
        }
        say(
            f"  latency {name}: p50 {out[name]['p50_ms']} ms, p99 {out[name]['p99_ms']} ms, "
            f"max {out[name]['max_ms']} ms at {out[name]['achieved_rate']:,.0f} events/s"
        )
        await asyncio.sleep(0.1)
    for q in ("p50_ms", "p99_ms"):
        k, b = out["kernel"][q], out["bare"][q]
        out[f"{q}_ratio_vs_bare"] = round(k / b, 2) if k and b else None
    return out


async def run_all(
    args: argparse.Namespace, procs: Any, workdir: str, results: dict[str, Any]
) -> None:
    server_cpu = args.cpus[0]
    kernel = ServerProc("kernel", procs, workdir, server_cpu)
    bare = ServerProc("bare", procs, workdir, server_cpu)
    await kernel.start()
    await bare.start()
    say(
        f"kernel pid {kernel.proc.pid} port {kernel.port}; "
        f"bare pid {bare.proc.pid} port {bare.port}"
    )
    fan_sid = (await kernel.call({"op": "session"}))["session"]
    lat_sid = (await kernel.call({"op": "session"}))["session"]
    replay_sid = (await kernel.call({"op": "session"}))["session"]
    seeded = await kernel.call(
        {"op": "seed", "session": replay_sid, "n": args.replay_events, "size": args.payload}, 120
    )
    say(f"fan-out ({CLIENTS} clients, {args.events} events x {args.rounds} rounds):")
    results["fanout"] = await fanout(args, kernel, bare, fan_sid)
    say(f"replay ({args.replay_events} stored events, ?after=0):")
    results["replay"] = await replay(args, kernel, bare, replay_sid, seeded["last_seq"])
    say(f"latency ({args.latency_events} events paced at {args.latency_rate}/s, 1 client):")
    results["latency"] = await latency(args, kernel, bare, lat_sid)
    if args.profile:
        say(f"profiling kernel fan-out runs ({args.profile}):")
        results["profile"] = await profile_fanout(args, kernel, procs, fan_sid, workdir)
    for server in (kernel, bare):
        Processes.stop(server.proc)
        if server.proc.returncode not in (0, -signal.SIGTERM):
            say(f"  warning: {server.kind} exited with {server.proc.returncode}")
            say(server.stderr_tail())


# ---------------------------------------------------------------------------------------------
# Output


def table_rows(results: dict[str, Any]) -> list[Row]:
    """The headline figures; the fan-out ratio has a target."""
    fan, rep, lat = (results[k] for k in ("fanout", "replay", "latency"))
    sides = fan["sides"]
    bare, emit, deliver = sides["bare"], sides["kernel emit"], sides["kernel deliver-only"]
    single = sides["kernel deliver-1"]
    alone = sides["kernel emit, no subscriber"]
    rows: list[tuple[str, str, str, str, str]] = [
        (
            f"fan-out events/s ({fan['clients']} clients, emit: store+deliver)",
            f"{emit['rate_median']:,.0f}",
            f"{bare['rate_median']:,.0f}",
            f"{emit['ratio_vs_bare']:.2f}x",
            f">= {TARGET_FANOUT_RATIO}x",
        ),
        (
            "  same, server CPU us per delivered event",
            f"{emit['cpu_us_per_delivery_median']:.1f}",
            f"{bare['cpu_us_per_delivery_median']:.1f}",
            f"{emit['cpu_ratio_vs_bare']:.2f}x",
            "",
        ),
        (
            "  diag: fan-out, Broker.deliver only (no store, N/2)",
            f"{deliver['rate_median']:,.0f}",
            f"{bare['rate_median']:,.0f}",
            f"{deliver['ratio_vs_bare']:.2f}x",
            "",
        ),
        (
            "  diag: same, server CPU us per delivered event",
            f"{deliver['cpu_us_per_delivery_median']:.1f}",
            f"{bare['cpu_us_per_delivery_median']:.1f}",
            f"{deliver['cpu_ratio_vs_bare']:.2f}x",
            "",
        ),
        (
            "  diag: same, one event per loop turn (as emit), CPU us",
            f"{single['cpu_us_per_delivery_median']:.1f}",
            f"{bare['cpu_us_per_delivery_median']:.1f}",
            f"{single['cpu_ratio_vs_bare']:.2f}x",
            "",
        ),
        (
            "  diag: emit with no subscriber, events/s",
            f"{alone['rate']:,.0f}",
            "",
            "",
            "",
        ),
        (
            f"replay events/s ({rep['events']:,} stored, ?after=0, 1 client)",
            f"{rep['kernel']['rate_median']:,.0f}",
            f"{rep['bare']['rate_median']:,.0f}",
            f"{rep['ratio_vs_bare']:.2f}x",
            "",
        ),
    ]
    for q in ("p50", "p99"):
        rows.append(
            (
                f"latency {q} ms (emit -> client, paced {lat['rate']}/s)",
                f"{lat['kernel'][q + '_ms']:.2f}",
                f"{lat['bare'][q + '_ms']:.2f}",
                f"{lat[q + '_ms_ratio_vs_bare']:.2f}x",
                "",
            )
        )
    rows.append(
        (
            "latency max ms",
            f"{lat['kernel']['max_ms']:.2f}",
            f"{lat['bare']['max_ms']:.2f}",
            "",
            "",
        )
    )
    meets: list[bool | None] = [emit["ratio_vs_bare"] >= TARGET_FANOUT_RATIO]
    return [Row(*r, meets=m) for r, m in zip(rows, meets + [None] * (len(rows) - 1), strict=True)]


def render(results: dict[str, Any]) -> str:
    fan, rep, lat, meta = (results[k] for k in ("fanout", "replay", "latency", "meta"))
    sides = fan["sides"]
    bare, emit = sides["bare"], sides["kernel emit"]
    rows = rows_of(results)
    out = [
        f"Foya event-stream benchmark  ({meta['python']}, hypercorn {meta['hypercorn']}, "
        f"{meta['cpus']} CPUs, pinning: {meta['pinning']}, data dir on {meta['data_fs']})",
        f"fan-out: {fan['events']:,} events of ~{fan['payload_bytes']} B payload "
        f"({bare['bytes_per_frame']:.0f} B/frame bare, {emit['bytes_per_frame']:.0f} kernel) "
        f"to {fan['clients']} clients, median of {len(bare['rate_runs'])} alternating rounds; "
        "baseline = bare",
        "",
        *table(rows),
        "",
        "per round, events/s: "
        + "; ".join(
            f"{name} " + " ".join(f"{x:,.0f}" for x in side["rate_runs"])
            for name, side in sides.items()
            if "rate_runs" in side
        ),
        *verdicts(rows),
    ]
    for name in ("kernel", "bare"):
        if lat[name]["achieved_rate"] < 0.95 * lat["rate"]:
            out.append(
                f"NOTE: latency {name}: only {lat[name]['achieved_rate']:,.0f} events/s of "
                f"{lat['rate']:,} paced ({lat[name]['late_emits']} emits started late)"
            )
    problems = [
        f"{name}: {p}" for name, side in sides.items() for p in side.get("problems", []) if p
    ]
    problems += [f"replay {k}: {p}" for k in ("kernel", "bare") for p in rep[k]["problems"]]
    problems += [
        f"latency {k}: {lat[k]['problem']}" for k in ("kernel", "bare") if lat[k]["problem"]
    ]
    if problems:
        out.append("PROBLEMS: " + "; ".join(problems))
    other = max(s.get("other_cores_mean", 0.0) for s in sides.values())
    if other > BUSY_CORES:
        out.append(
            f"NOTE: other processes used up to {other:.2f} cores during fan-out runs; "
            "events/s is disturbed, CPU per delivery much less so"
        )
    if "profile" in results:
        out += render_profile(results["profile"])
    out.append(
        f"\ntotal {meta['elapsed_s']:.0f} s (waited {meta['quiet_wait_s']:.1f} s for other load "
        f"to drop; {meta['runs_started_while_busy']} runs started while others used "
        f">= {Quiet.THRESHOLD} cores)"
    )
    return "\n".join(out)


def render_profile(prof: dict[str, Any]) -> list[str]:
    out = []
    for mode in ("emit", "deliver"):
        part = prof.get(mode, {})
        out += ["", f"{prof['method']} profile, kernel fan-out, mode {mode}:"]
        if "error" in part:
            out.append(f"  {part['error']}")
            continue
        out.append(f"  {part['rate_under_profiler']:,.0f} events/s under the profiler")
        if "threads" in part:
            out.append(
                "  threads: "
                + ", ".join(f"{t['where']} {t['share']:.0%}" for t in part["threads"])
                + f" of {part['samples']} samples"
            )
            out.append("  innermost app/ frame (share of samples):")
            out += [f"    {r['share']:6.1%}  {r['where']}" for r in part["top_innermost_app"][:15]]
        out.append("  own time (share):")
        out += [f"    {r['share']:6.1%}  {r['where']}" for r in part["top_self"][:15]]
    return out


# ---------------------------------------------------------------------------------------------


QUICK = {
    "events": 2000,
    "rounds": 1,
    "replay_events": 3000,
    "replay_rounds": 1,
    "latency_events": 1000,
    "quiet_budget": 2.0,
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    p.add_argument("--quick", action="store_true", help=f"a short run: {QUICK}")
    p.add_argument("--events", type=int, default=5000, help="events per fan-out run")
    p.add_argument("--payload", type=int, default=200, help="payload bytes (compact JSON)")
    p.add_argument("--rounds", type=int, default=3, help="alternating fan-out rounds")
    p.add_argument("--replay-events", type=int, default=10_000)
    p.add_argument("--replay-rounds", type=int, default=3)
    p.add_argument("--latency-events", type=int, default=3000)
    p.add_argument("--latency-rate", type=int, default=1000, help="events/s")
    p.add_argument(
        "--quiet-budget",
        type=float,
        default=10.0,
        help="seconds, in total, to wait for other load to drop before runs (0: never wait)",
    )
    p.add_argument("--data-root", help="parent of the temporary data dirs (default: temp dir)")
    p.add_argument(
        "--profile",
        choices=("py-spy", "cprofile"),
        help="extra kernel fan-out runs under a profiler, summarised after the table",
    )
    p.add_argument("--py-spy", default=None, help="py-spy binary (default: PATH, /tmp/pyspy)")
    p.add_argument("--profile-dir", help="keep profiler output here (default: discarded)")
    p.add_argument("--no-pin", action="store_true", help="don't pin servers and clients to cores")
    p.add_argument("--serve", choices=("kernel", "bare"), help=argparse.SUPPRESS)
    p.add_argument("--data-dir", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.serve:
        asyncio.run(_serve_main(args.serve, args.data_dir))
        return 0
    cpus = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cpus) >= 2
    args.cpus = (cpus[-1], cpus[0]) if pin else (None, None)  # (servers, clients)
    if pin:
        os.sched_setaffinity(0, {cpus[0]})
    if args.quick:
        vars(args).update(QUICK)
    if args.profile == "py-spy":
        args.py_spy = find_pyspy(args.py_spy)
        if args.py_spy is None:
            say("py-spy not found; use --py-spy PATH or --profile cprofile")
            return 2
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
    if args.data_root:
        os.environ["TMPDIR"] = os.path.abspath(args.data_root)
        import tempfile

        tempfile.tempdir = None

    QUIET.left = args.quiet_budget
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.perf_counter()
    procs = Processes()
    results: dict[str, Any] = {}
    data_fs = None
    try:
        with workspace() as workdir:
            data_fs = fs_type(workdir)
            asyncio.run(run_all(args, procs, workdir, results))
    finally:
        procs.stop_all()
    results["meta"] = {
        "python": python(),
        "quick": args.quick,
        "hypercorn": dist_version("hypercorn"),
        "cpus": len(cpus),
        "pinning": f"servers cpu {args.cpus[0]}, clients cpu {args.cpus[1]}" if pin else "off",
        "data_fs": data_fs,
        "elapsed_s": round(time.perf_counter() - began, 1),
        "quiet_wait_s": round(QUIET.waited, 2),
        "runs_started_while_busy": QUIET.gave_up,
        "clock": "CLOCK_MONOTONIC (time.monotonic_ns), shared by all processes on Linux",
    }
    finish(results, table_rows(results), render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
