"""Transport hardening of `foya serve`, each through a real kernel process.

- request-head deadline, connection cap and rate-limited accept failures (app.serve.admission,
  app.serve.listeners), with the server's descriptor limit lowered so a few hundred sockets exhaust
  it;
- HTTP/2 over real TLS: a 401 to a request whose body is still arriving does not end an SSE stream
  on the same connection (app.serve.hypercorn_fixes);
- the per-client cap on SSE streams (app.http.sse);
- `id: 0` on unstored frames, the cursor frame after them and `Last-Event-ID` resumption.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import Agent, agent_kernel, finish, text, usage, wait
from support.helpers import Kernel, Launcher, TlsFiles, base_env, wait_until
from support.streams_helpers import new_session, open_events, patch

BOUND = 60.0  # seconds: upper bound on waits, only to never hang
PARTIAL_HEAD = b"GET /readyz HTTP/1.1\r\nHost: foya\r\nX-Slow: "


@contextlib.contextmanager
def lowered_nofile(soft: int) -> Iterator[None]:
    """Lower this process's descriptor limit while a kernel is spawned (it inherits it)."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def flood(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each send part of a request head and then nothing."""
    out = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
        with contextlib.suppress(OSError):
            s.sendall(PARTIAL_HEAD)
        out.append(s)
    return out


def wait_all_closed_by_server(socks: list[socket.socket]) -> None:
    """Every socket reads EOF (or a reset): the server closed it. Fails after BOUND."""
    pending = list(socks)
    end = time.monotonic() + BOUND
    while pending:
        assert time.monotonic() < end, f"{len(pending)} partial heads still open after {BOUND} s"
        readable, _, _ = select.select(pending, [], [], 1.0)
        for s in readable:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            assert data == b"", f"a partial head got an answer: {data[:80]!r}"
            pending.remove(s)


def events_of(kernel: Kernel, event: str) -> list[dict[str, Any]]:
    return [line for line in kernel.logs() if line.get("event") == event]


def tcp_kernel(spawn: Launcher, tmp_path: Path, digest: str, **env: str) -> Kernel:
    return spawn.tcp(
        ["--allow-plaintext", "--data-dir", str(tmp_path / "data")],
        env=base_env(FOYA_AUTH_TOKEN_SHA256=digest, **env),
    )


# ------------------------------------------------------------------ request heads, connection cap


def test_partial_head_flood(spawn: Launcher, tmp_path: Path, digest: str, token: str) -> None:
    """At a descriptor limit of 384 (connection budget 384 // 2 = 192), 400 partial heads
    neither exhaust the kernel nor stop `/readyz`; each is closed (evicted, or at the 2 s head
    deadline) while an SSE stream opened before them, silent all along, survives."""
    with lowered_nofile(384):
        kernel = tcp_kernel(spawn, tmp_path, digest, FOYA_HEAD_TIMEOUT="2")
    assert kernel.port is not None
    limits = events_of(kernel, "transport limits")[0]
    assert limits["max_connections"] == 192
    assert limits["head_timeout"] == 2.0

    with kernel.client(token) as client:
        sid = new_session(client)["id"]
        with open_events(client, sid) as stream:
            socks = flood(kernel.port, 400)
            try:
                # New connections while the flood is on. One may be refused while the burst is
                # still being accepted (evicted sockets take a few loop turns to close): retry.
                with kernel.client(token) as fresh:
                    wait_until(lambda: _ready(fresh), "/readyz during the flood", BOUND)
                wait_all_closed_by_server(socks)
            finally:
                for s in socks:
                    s.close()
            # Below the cap nothing is evicted: these few close at the head deadline alone.
            late = flood(kernel.port, 5)
            try:
                wait_all_closed_by_server(late)
            finally:
                for s in late:
                    s.close()
            # The stream was opened before all of them and sent nothing since: still served.
            patch(client, sid, title="still here")
            frame = stream.next_frame()
            assert frame is not None
            assert frame.event == "session_updated"
            assert frame.data["payload"]["title"] == "still here"

    closed = events_of(kernel, "connection closed by admission")
    reasons = {line["reason"] for line in closed}
    assert {"evicted", "head_timeout"} <= reasons, closed
    for reason in reasons:  # hundreds of closures, a few lines: one per reason per 10 s
        assert len([c for c in closed if c["reason"] == reason]) <= 3, closed
    assert not events_of(kernel, "socket.accept() out of system resource")


def test_accept_failures_are_logged_rate_limited(
    spawn: Launcher, tmp_path: Path, digest: str, token: str
) -> None:
    """With a connection cap set above the descriptor limit, `accept()` fails with EMFILE over
    and over; one line per 10 s says so (asyncio alone logs every failure with a traceback), and
    the kernel serves again once the flood is gone."""
    with lowered_nofile(256):
        kernel = tcp_kernel(spawn, tmp_path, digest, FOYA_MAX_CONNECTIONS="100000")
    assert kernel.port is not None
    socks = flood(kernel.port, 400)
    try:
        wait_until(
            lambda: bool(events_of(kernel, "accept() failed: out of file descriptors or memory")),
            "the accept failure to be logged",
            BOUND,
        )
        time.sleep(1.5)  # asyncio retries accept() every second: let it fail a few more times
    finally:
        for s in socks:
            s.close()
    failures = events_of(kernel, "accept() failed: out of file descriptors or memory")
    assert 1 <= len(failures) <= 3, failures
    assert not events_of(kernel, "socket.accept() out of system resource")
    with kernel.client(token) as client:
        wait_until(lambda: _ready(client), "the kernel to serve again", BOUND)


def _ready(client: httpx.Client) -> bool:
    with contextlib.suppress(httpx.TransportError):
        return client.get("/readyz").status_code == 200
    return False


# ------------------------------------------------------------------------------------- HTTP/2


def test_h2_rejected_upload_does_not_end_sse_on_same_connection(
    spawn: Launcher, tmp_path: Path, digest: str, token: str, tls_files: TlsFiles
) -> None:
    """One HTTP/2 connection over TLS: an SSE stream, then a POST with a wrong token and a 1 MiB
    body (answered 401 before the body has arrived), then an event for the stream."""
    kernel = spawn.tcp(
        ["--data-dir", str(tmp_path / "data"), "--tls-cert", str(tls_files.cert),
         "--tls-key", str(tls_files.key)],
        tls=tls_files, env=base_env(FOYA_AUTH_TOKEN_SHA256=digest),
    )  # fmt: skip
    assert kernel.url is not None

    async def scenario() -> dict[str, Any]:
        async with httpx.AsyncClient(
            base_url=kernel.url or "",
            http2=True,
            verify=tls_files.client_context(),
            headers={"Authorization": f"Bearer {token}"},
            timeout=BOUND,
        ) as client:
            created = await client.post("/sessions", json={})
            assert created.http_version == "HTTP/2"
            sid = created.json()["id"]
            async with client.stream("GET", f"/sessions/{sid}/events") as stream:
                assert stream.status_code == 200
                lines = stream.aiter_lines()
                assert await anext(lines) == ": ok"
                rejected = await client.post(
                    "/sessions",
                    content=b"x" * (1 << 20),
                    headers={"Authorization": "Bearer " + "w" * 43},
                )
                assert rejected.status_code == 401
                assert rejected.http_version == "HTTP/2"
                updated = await client.patch(f"/sessions/{sid}", json={"title": "after 401"})
                assert updated.status_code == 200
                async with asyncio.timeout(BOUND):
                    async for line in lines:
                        if line.startswith("data:"):
                            return dict(httpx.Response(200, content=line[5:]).json())
            raise AssertionError("the SSE stream ended")

    event = asyncio.run(scenario())
    assert event["kind"] == "session_updated"
    assert event["payload"]["title"] == "after 401"


# --------------------------------------------------------------------------- SSE streams per client


def test_sse_streams_per_client_are_capped(
    spawn: Launcher, tmp_path: Path, digest: str, token: str
) -> None:
    kernel = tcp_kernel(spawn, tmp_path, digest, FOYA_MAX_STREAMS_PER_CLIENT="2")
    with kernel.client(token) as client:
        sid = new_session(client)["id"]
        with open_events(client, sid), open_events(client, sid) as second:
            third = client.get(f"/sessions/{sid}/events")
            assert third.status_code == 429
            assert third.json()["code"] == "too_many_streams"
            second.response.close()
            # The freed slot is taken again (the stream's end is noticed asynchronously).
            wait_until(lambda: _opens(client, sid), "a slot to free up", BOUND)


def _opens(client: httpx.Client, sid: str) -> bool:
    with client.stream("GET", f"/sessions/{sid}/events") as response:
        return response.status_code == 200


def test_unix_socket_streams_are_not_capped(spawn: Launcher, short_dir: Path) -> None:
    """A Unix socket has one client, its owner: no cap there, whatever the setting."""
    sock = short_dir / "k.sock"
    kernel = spawn(
        ["serve", "--data-dir", str(short_dir / "data"), "--socket", str(sock)],
        uds=sock,
        env=base_env(FOYA_MAX_STREAMS_PER_CLIENT="1"),
    )
    with kernel.client() as client:
        sid = new_session(client)["id"]
        with contextlib.ExitStack() as streams:
            for _ in range(3):
                streams.enter_context(open_events(client, sid))


# ------------------------------------------------------------------- id: 0 and Last-Event-ID


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("transport")) as agent:
        yield agent


class LastEventId:
    """What a browser's EventSource keeps: the last `id:` field of each dispatched block, data
    or not (HTML standard, "dispatch the event"); plus the frames that carried data."""

    def __init__(self) -> None:
        self.value = ""
        self.frames: list[tuple[str | None, str, dict[str, Any]]] = []
        self._block: list[str] = []

    def feed(self, line: str) -> None:
        if line.startswith(":"):
            return
        if line:
            self._block.append(line)
            return
        fields = [x.partition(":") for x in self._block]
        self._block = []
        ident = None
        for name, _, value in fields:
            if name == "id":
                ident = self.value = value.removeprefix(" ")
        data = [v.removeprefix(" ") for n, _, v in fields if n == "data"]
        if data:
            kind = next((v.removeprefix(" ") for n, _, v in fields if n == "event"), "")
            self.frames.append((ident, kind, httpx.Response(200, content=data[0]).json()))


def test_deltas_carry_id_0_and_last_event_id_resumes_exactly(agent: Agent) -> None:
    session = agent.session()
    gate = agent.fake.gate()
    session.push([text("Hel"), text("lo"), wait(gate), text("!"), finish("stop"), usage()])
    client = session.client
    browser = LastEventId()
    with client.stream("GET", f"/sessions/{session.id}/events") as response:
        lines = response.iter_lines()
        session.submit("hi")
        # Read until the deltas before the gate have come, then until the stream goes quiet
        # on a cursor frame (a data-less `id:` block) that follows them.
        while True:
            line = next(lines)
            browser.feed(line)
            deltas = [f for f in browser.frames if f[1] == "message_delta"]
            if len(deltas) == 2 and line == "" and browser.value != "0":
                break
    stored = [f for f in browser.frames if f[2]["seq"]]
    assert all(ident == "0" for ident, kind, _ in deltas), deltas
    assert stored, "turn_started and the user message_end came first"
    assert browser.value == str(stored[-1][2]["seq"]), "the cursor names the last stored event"

    with client.stream(
        "GET", f"/sessions/{session.id}/events", headers={"Last-Event-ID": browser.value}
    ) as response:
        resumed = LastEventId()
        lines = response.iter_lines()
        gate.set()
        while not any(kind == "turn_complete" for _, kind, _ in resumed.frames):
            resumed.feed(next(lines))
    again = [f[2]["seq"] for f in resumed.frames if f[2]["seq"]]
    before = {f[2]["seq"] for f in stored}
    assert not before & set(again), "nothing stored is sent twice"
    assert again == sorted(again)
    replay = session.replay(lambda f: f.event == "turn_complete")
    assert [f.seq for f in replay if f.seq > stored[-1][2]["seq"]] == again, "and nothing lost"
    kinds = [kind for _, kind, _ in resumed.frames]
    assert kinds[0] == "message_snapshot", "a reconnect mid-message starts with the snapshot"
    assert resumed.frames[0][0] == "0"


def test_last_event_id_0_is_no_cursor(agent: Agent) -> None:
    """0 names no stored event (only unstored frames carry it): live only, no full replay."""
    client = agent.client
    sid = new_session(client)["id"]
    patch(client, sid, title="old")
    with open_events(client, sid, last_event_id=0) as stream:
        patch(client, sid, title="new")
        frame = stream.next_frame()
    assert frame is not None
    assert frame.data["payload"]["title"] == "new"
