"""Helpers for the sessions, projects and event-stream tests.

Real parts only: kernels are `foya serve` subprocesses (see helpers.Kernel) on a Unix socket,
data directories may be pre-seeded through the real `app.store.Store` before a kernel starts, and
SSE responses are parsed from the bytes the server sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.store import Store
from support.helpers import Kernel, Launcher

SSE_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
}
ENVELOPE_KEYS = {"seq", "kind", "session", "time", "payload"}


# --------------------------------------------------------------------------------- kernels


@dataclass(frozen=True)
class Served:
    """A running Unix-socket kernel and its data directory."""

    kernel: Kernel
    data_dir: Path

    @property
    def workspaces(self) -> Path:
        return self.data_dir / "workspaces"

    def client(self) -> httpx.Client:
        return self.kernel.client()


def unix_kernel(
    launcher: Launcher,
    root: Path,
    name: str,
    *,
    ready: bool = True,
    env: dict[str, str] | None = None,
) -> Served:
    """Start `foya serve --data-dir <root>/<name> --socket <root>/<name>.sock` (in `env`, e.g.
    `base_env(HOME=…)` for a HOME of its own, else the launcher's default).

    `root` must be short (helpers.short_tmpdir): Unix socket paths stay below 108 bytes. An
    existing data directory is reused, so a second call with the same name is a restart.
    """
    data_dir = root / name
    sock = root / f"{name}.sock"
    args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]
    kernel = launcher(args, uds=sock, ready=ready, env=env)
    return Served(kernel, data_dir)


@contextlib.contextmanager
def module_kernels(
    workdir: Path, root: Path, *names: str, env: dict[str, str] | None = None
) -> Iterator[dict[str, Served]]:
    """Start one kernel per name side by side (in `env`, see `unix_kernel`); stop every one
    of them by PID afterwards."""
    launcher = Launcher(workdir)
    try:
        started = {n: unix_kernel(launcher, root, n, ready=False, env=env) for n in names}
        for served in started.values():
            served.kernel.wait_ready()
        yield started
    finally:
        launcher.close()


def seed_store(data_dir: Path, fill: Callable[[Store], Coroutine[Any, Any, None]]) -> None:
    """Create `<data_dir>/foya.db` with the real store and run `fill` on it (kernel not running)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = Store(data_dir)
    store.open()
    try:
        asyncio.run(fill(store))
    finally:
        store.close()


def session_row(session_id: str, **fields: Any) -> dict[str, Any]:
    """A session row as the kernel itself would create it."""
    now = time.time_ns()
    return {
        "id": session_id,
        "phase": "idle",
        "approval_mode": "manual",
        "model": "",
        "created_at_ns": now,
        "updated_at_ns": now,
        **fields,
    }


def metric(client: httpx.Client, name: str) -> float:
    """The value of an unlabelled sample (`name` as exposed, e.g. `..._total`) from /metrics."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    raise AssertionError(f"metric {name} not exposed")


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the reference's error body `{code, message}` with `status`."""
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert body["code"] == code, body
    assert isinstance(body["message"], str), body
    assert body["message"], body
    return dict(body)


# ------------------------------------------------------------------------------------- SSE


@dataclass(frozen=True)
class Frame:
    """One SSE event: its fields as sent, `data` parsed as JSON."""

    id: str | None
    event: str | None
    data: dict[str, Any]
    lines: tuple[str, ...]

    @property
    def seq(self) -> int:
        return int(self.data["seq"])


class EventStream:
    """An open `GET /sessions/{id}/events` response, read frame by frame."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()
        self.comments: list[str] = []
        self.ended = False

    def next_line(self) -> str | None:
        try:
            return next(self._lines)
        except StopIteration:
            self.ended = True
            return None

    def next_frame(self, deadline: float | None = None) -> Frame | None:
        """The next event frame (comments are collected on the side); None at end of stream.

        With a `deadline` (monotonic), TimeoutError once it has passed, even while heartbeat
        comments keep arriving."""
        lines: list[str] = []
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("no complete frame before the deadline")
            line = self.next_line()
            if line is None:
                assert not lines, f"stream ended inside a frame: {lines}"
                return None
            if line == "":
                if any(x.startswith("data:") for x in lines):
                    return parse_frame(lines)
                lines = []  # a data-less `id:` frame (app.http.sse) dispatches no event
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                continue
            lines.append(line)

    def frames_until(self, stop: Callable[[Frame], bool]) -> list[Frame]:
        """Frames up to and including the first for which `stop` holds, or to end of stream."""
        out: list[Frame] = []
        while (frame := self.next_frame()) is not None:
            out.append(frame)
            if stop(frame):
                break
        return out

    def rest(self) -> list[Frame]:
        """Every frame until the server ends the stream."""
        return self.frames_until(lambda _: False)


def parse_frame(lines: list[str]) -> Frame:
    """The tests' one SSE frame parser: the lines of one event, its JSON `data` decoded."""
    fields: dict[str, list[str]] = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))
    unknown = set(fields) - {"id", "event", "data"}
    assert not unknown, f"unexpected SSE fields {unknown} in {lines}"
    assert all(len(v) == 1 for v in fields.values()), f"repeated SSE field in {lines}"
    data = json.loads(fields["data"][0])
    ident = fields.get("id", [None])[0]
    event = fields.get("event", [None])[0]
    return Frame(ident, event, data, tuple(lines))


@contextlib.contextmanager
def open_events(
    client: httpx.Client,
    session: str,
    *,
    after: int | None = None,
    last_event_id: int | str | None = None,
) -> Iterator[EventStream]:
    """Open the session's SSE stream; returns once the response head has arrived."""
    params = {"after": after} if after is not None else {}
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    with client.stream(
        "GET", f"/sessions/{session}/events", params=params, headers=headers
    ) as response:
        if response.status_code != 200:
            response.read()
            raise AssertionError(f"events: {response.status_code} {response.text}")
        yield EventStream(response)


def is_title(title: str) -> Callable[[Frame], bool]:
    """A stop predicate: the `session_updated` frame carrying this title."""
    return lambda f: f.event == "session_updated" and f.data["payload"].get("title") == title


@dataclass
class Follow:
    """What a reconnecting client received: every frame, and how often it had to reconnect."""

    after: int | None
    frames: list[Frame] = field(default_factory=list)
    reconnects: int = 0
    error: BaseException | None = None

    @property
    def seqs(self) -> list[int]:
        return [f.seq for f in self.frames]


def follow(
    client: httpx.Client,
    session: str,
    stop: Callable[[Frame], bool],
    *,
    after: int | None = None,
    header: bool = True,
    max_reconnects: int = 20,
    opened: threading.Event | None = None,
    on_frame: Callable[[Frame], None] | None = None,
) -> Follow:
    """Read the stream until `stop`; when the server ends it early (a cut-off), reconnect with
    the last seq received, as a real client does. `header` picks Last-Event-ID over `?after=`.
    `opened` is set once the first response head arrived; `on_frame` sees each frame on arrival."""
    out = Follow(after)
    resume = after
    while True:
        kwargs: dict[str, Any] = {}
        if resume is not None:
            kwargs = {"last_event_id": resume} if header else {"after": resume}
        with open_events(client, session, **kwargs) as stream:
            if opened is not None:
                opened.set()
            while (frame := stream.next_frame()) is not None:
                out.frames.append(frame)
                if on_frame is not None:
                    on_frame(frame)
                if stop(frame):
                    return out
        if out.frames:
            resume = out.frames[-1].seq
        out.reconnects += 1
        assert out.reconnects <= max_reconnects, f"reconnected {out.reconnects} times"


def patch(client: httpx.Client, session: str, **fields: Any) -> dict[str, Any]:
    response = client.patch(f"/sessions/{session}", json=fields)
    assert response.status_code == 200, response.text
    return dict(response.json())


def new_session(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = client.post("/sessions", json=fields)
    assert response.status_code == 200, response.text
    return dict(response.json())


def stored_seqs(client: httpx.Client, session: str, stop: Callable[[Frame], bool]) -> list[int]:
    """Every stored event of the session, by replaying from 0 until `stop`."""
    with open_events(client, session, after=0) as stream:
        frames = stream.frames_until(stop)
    assert frames, "nothing stored"
    assert stop(frames[-1]), "replay ended before the expected last event"
    return [f.seq for f in frames]


def describe_difference(got: list[int], want: list[int]) -> str:
    """A short account of how a received seq list differs from the expected one."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    dupes = sorted({s for s in got if got.count(s) > 1})
    disorder = [(a, b) for a, b in itertools.pairwise(got) if b <= a]
    return (
        f"missing {missing[:20]} ({len(missing)}), unexpected {extra[:20]}, "
        f"duplicated {dupes[:20]}, out of order {disorder[:10]}; "
        f"got {len(got)} seqs {got[:5]}…{got[-5:]}, want {len(want)} {want[:5]}…{want[-5:]}"
    )
