"""The context journal (app.kernel.usercontext.journal) and `GET /context/events`.

The journal is driven in-process over real files and a real broker: appends, replay, a torn last
line (as kill -9 mid-write leaves it), compaction to the last N events, concurrent appenders, and
a stream that must see every event exactly once while appends race its replay. The route runs in
a real `foya serve` whose data directory is pre-seeded with an `events.jsonl` in Foya's format
(torn last line included); its live half is driven by `PUT /settings/memory`, which announces
the change through the journal.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import stat
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from support.helpers import Launcher, short_tmpdir
from support.streams_helpers import (
    SSE_HEADERS,
    EventStream,
    Frame,
    Served,
    assert_error,
    unix_kernel,
)

from app.broker import Broker
from app.kernel.usercontext.journal import FILE, TOPIC, ContextJournal
from app.kernel.usercontext.stream import context_events
from app.metrics import Metrics

T = TypeVar("T")
BOUND = 60.0  # seconds: an upper bound on waits that must end, only to never hang
SEEDED = 7
TORN = b'{"seq":8,"kind":"rule_upd'


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, BOUND))


def journal(data_dir: Path, keep: int = 10_000) -> ContextJournal:
    data_dir.mkdir(mode=0o700, exist_ok=True)
    return ContextJournal(data_dir, Broker(Metrics()), keep=keep)


def lines(data_dir: Path) -> list[dict[str, Any]]:
    data = (data_dir / FILE).read_bytes()
    assert data.endswith(b"\n"), data[-80:]
    return [json.loads(line) for line in data.splitlines()]


async def append_many(j: ContextJournal, count: int) -> list[int]:
    return [await j.append("rule_updated", {"deleted_id": f"r{n}"}) for n in range(count)]


# ------------------------------------------------------------------------------ the journal


def test_append_stores_foya_events_private_and_replays_them(tmp_path: Path) -> None:
    j = journal(tmp_path)
    before = time.time()

    async def scenario() -> list[int]:
        return [
            await j.append("rule_created", {"rule": {"id": "r1", "content": "be brief"}}),
            await j.append("memory_settings_updated", {"memory_settings": {"enabled": False}}),
            await j.append("rule_deleted", {"deleted_id": "r1"}),
        ]

    assert run(scenario()) == [1, 2, 3]
    stored = lines(tmp_path)
    assert [(e["seq"], e["kind"]) for e in stored] == [
        (1, "rule_created"),
        (2, "memory_settings_updated"),
        (3, "rule_deleted"),
    ]
    # Foya's envelope: payload fields beside seq, kind and time; no `payload`, no `session`.
    assert stored[0]["rule"] == {"id": "r1", "content": "be brief"}
    assert set(stored[1]) == {"seq", "kind", "memory_settings", "time"}
    assert stored[2]["time"].endswith("Z")
    assert before - 1 <= _epoch(stored[2]["time"]) <= time.time() + 1
    assert stat.S_IMODE((tmp_path / FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / FILE).parent.stat().st_mode) == 0o700
    assert [e.seq for e in j.events_after(1)] == [2, 3]
    assert [e.seq for e in j.events_after(0, 2)] == [1, 2]
    assert j.events_after(3) == []

    again = journal(tmp_path)
    again.open()
    assert [json.loads(e.json()) for e in again.events_after(0)] == stored
    assert run(again.append("rule_created", {"deleted_id": "r2"})) == 4


def test_append_refuses_payload_fields_of_the_envelope_and_writes_nothing(tmp_path: Path) -> None:
    j = journal(tmp_path)
    with pytest.raises(ValueError, match="seq"):
        run(j.append("rule_created", {"seq": 99}))
    assert not (tmp_path / FILE).exists() or (tmp_path / FILE).read_bytes() == b""
    assert run(j.append("rule_created", {"deleted_id": "r1"})) == 1


def test_append_publishes_each_event_on_the_context_topic(tmp_path: Path) -> None:
    j = journal(tmp_path)

    async def scenario() -> list[dict[str, Any]]:
        await j.ensure_open()
        with j.broker.subscribe(TOPIC) as sub:
            await append_many(j, 3)
            got = [sub.queue.get_nowait() for _ in range(3)]
        return [json.loads(e.json()) for e in got if e is not None]

    assert run(scenario()) == lines(tmp_path)


def test_a_torn_last_line_is_never_served_and_is_cut_off_on_open(tmp_path: Path) -> None:
    run(append_many(journal(tmp_path), 3))
    path = tmp_path / FILE
    good = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"seq":4,"kind":"rule_upd')  # what kill -9 in the middle of a write leaves

    j = journal(tmp_path)
    j.open()
    assert [e.seq for e in j.events_after(0)] == [1, 2, 3]
    assert path.read_bytes() == good
    assert run(j.append("rule_created", {"deleted_id": "r9"})) == 4
    assert [e["seq"] for e in lines(tmp_path)] == [1, 2, 3, 4]


def test_invalid_lines_are_dropped_and_seq_continues_after_the_last_good_one(
    tmp_path: Path,
) -> None:
    run(append_many(journal(tmp_path), 2))
    path = tmp_path / FILE
    first, second = path.read_bytes().splitlines(keepends=True)
    stale = json.dumps({"seq": 1, "kind": "rule_created", "time": "2026-01-01T00:00:00Z"})
    path.write_bytes(first + b"not json\n" + second + stale.encode() + b"\n" + b"[1]\n")

    j = journal(tmp_path)
    j.open()
    assert [e.seq for e in j.events_after(0)] == [1, 2]
    assert path.read_bytes() == first + second
    assert run(j.append("rule_created", {})) == 3


def test_open_compacts_to_the_last_events_keeping_their_seqs(tmp_path: Path) -> None:
    run(append_many(journal(tmp_path), 12))
    before = {e["seq"]: e for e in lines(tmp_path)}

    j = journal(tmp_path, keep=5)
    j.open()
    assert lines(tmp_path) == [before[s] for s in range(8, 13)]
    assert [e.seq for e in j.events_after(0)] == [8, 9, 10, 11, 12]
    assert stat.S_IMODE((tmp_path / FILE).stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path / FILE.parent)) == ["events.jsonl"]  # no temp left
    assert run(j.append("rule_created", {})) == 13


def test_concurrent_appenders_get_distinct_increasing_seqs(tmp_path: Path) -> None:
    j = journal(tmp_path)

    async def scenario() -> tuple[list[int], list[int]]:
        await j.ensure_open()
        with j.broker.subscribe(TOPIC) as sub:
            seqs = await asyncio.gather(
                *(j.append("memory_updated", {"deleted_id": f"m{n}"}) for n in range(60))
            )
            published = [sub.queue.get_nowait() for _ in range(60)]
        return list(seqs), [e.seq for e in published if e is not None]

    seqs, published = run(scenario())
    assert sorted(seqs) == list(range(1, 61))
    assert published == list(range(1, 61))  # published in seq order
    assert [e["seq"] for e in lines(tmp_path)] == list(range(1, 61))


def test_an_append_whose_caller_is_cancelled_still_lands_and_is_published(tmp_path: Path) -> None:
    j = journal(tmp_path)

    async def scenario() -> list[int]:
        await j.ensure_open()
        with j.broker.subscribe(TOPIC) as sub:
            caller = asyncio.ensure_future(j.append("rule_created", {"deleted_id": "r1"}))
            await asyncio.sleep(0)  # the append has begun
            caller.cancel()
            event = await sub.get()
        assert caller.cancelled()
        return [event.seq] if event else []

    assert run(scenario()) == [1]
    assert [e["seq"] for e in lines(tmp_path)] == [1]
    assert run(j.append("rule_created", {})) == 2


@pytest.mark.parametrize("batch", [False, True], ids=["one-by-one", "batched"])
def test_stream_replays_then_goes_live_with_no_gap_and_no_duplicate(
    tmp_path: Path, batch: bool
) -> None:
    """Appends land during the replay and race it: the client still sees every seq after its
    cursor once, in order, whether it reads events one by one or all that are ready."""
    j = journal(tmp_path)
    run(append_many(j, 1200))  # more than one replay page

    async def scenario() -> list[int]:
        async with context_events(j, 100) as stream:
            first = await stream.next()
            assert first is not None
            got = [first.seq]
            # Stored and in the live buffer while the replay is under way: sent once only.
            await append_many(j, 100)
            writer = asyncio.ensure_future(append_many(j, 100))
            while len(got) < 1300:
                event = await stream.next()
                assert event is not None
                got.append(event.seq)
                if batch:
                    got.extend(e.seq for e in stream.ready(64))
                await asyncio.sleep(0)  # let the writer interleave with the replay
            await writer
            assert stream.ready(64) == []
        return got

    assert run(scenario()) == list(range(101, 1401))


# ---------------------------------------------------------------------------- the SSE route


def _seed(data_dir: Path) -> list[dict[str, Any]]:
    """An events.jsonl as Foya writes it (RFC 3339 times with nanoseconds and an offset), with a
    torn last line."""
    events: list[dict[str, Any]] = []
    for seq in range(1, SEEDED + 1):
        kind = ("rule_created", "memory_updated", "memory_settings_updated")[seq % 3]
        field = {"rule_created": "deleted_id", "memory_updated": "deleted_id"}.get(kind)
        body: dict[str, Any] = {field: f"id{seq}"} if field else {"memory_settings": {}}
        stamp = f"2026-03-0{seq}T10:00:00.123456789+08:00"
        events.append({"seq": seq, "kind": kind, **body, "time": stamp})
    path = data_dir / FILE
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events) + TORN)
    return events


@pytest.fixture(scope="module")
def seeded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Served, list[dict[str, Any]]]]:
    launcher = Launcher(tmp_path_factory.mktemp("context-events"))
    with short_tmpdir() as root:
        data_dir = root / "k"
        data_dir.mkdir(mode=0o700)
        events = _seed(data_dir)
        try:
            yield unix_kernel(launcher, root, "k"), events
        finally:
            launcher.close()


def _frames(client: httpx.Client, count: int, **kwargs: Any) -> list[Frame]:
    """The first `count` frames of a context stream (which then stays open: it is live)."""
    with client.stream("GET", "/context/events", **kwargs) as response:
        assert response.status_code == 200, response.read()
        for name, value in SSE_HEADERS.items():
            assert response.headers[name] == value
        stream = EventStream(response)
        return [f for _ in range(count) if (f := stream.next_frame()) is not None]


def _expected(events: list[dict[str, Any]], after: int) -> list[tuple[str, str, dict[str, Any]]]:
    return [(str(e["seq"]), e["kind"], _ours(e)) for e in events if e["seq"] > after]


def _ours(event: dict[str, Any]) -> dict[str, Any]:
    """A Foya line as we serve it: same fields, the time in our RFC 3339 UTC microseconds."""
    return {**event, "time": event["time"].replace("10:00:00.123456789+08:00", "02:00:00.123456Z")}


def _got(frames: list[Frame]) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    return [(f.id, f.event, f.data) for f in frames]


def test_route_replays_everything_without_a_cursor(
    seeded: tuple[Served, list[dict[str, Any]]],
) -> None:
    served, events = seeded
    with served.client() as client:
        assert _got(_frames(client, SEEDED)) == _expected(events, 0)
    # The torn line was cut off, never served.
    assert (served.data_dir / FILE).read_bytes().endswith(b"\n")
    assert TORN not in (served.data_dir / FILE).read_bytes()


@pytest.mark.parametrize(
    ("kwargs", "after"),
    [
        ({"headers": {"Last-Event-ID": "3"}}, 3),
        ({"params": {"after": 5}}, 5),
        ({"params": {"after": 2}, "headers": {"Last-Event-ID": "6"}}, 2),
        ({"headers": {"Last-Event-ID": "0"}}, 0),
    ],
)
def test_route_replays_after_the_cursor(
    seeded: tuple[Served, list[dict[str, Any]]], kwargs: dict[str, Any], after: int
) -> None:
    served, events = seeded
    with served.client() as client:
        assert _got(_frames(client, SEEDED - after, **kwargs)) == _expected(events, after)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"headers": {"Last-Event-ID": "seven"}},
        {"headers": {"Last-Event-ID": "-1"}},
        {"headers": {"Last-Event-ID": str(2**63)}},
        {"params": {"after": "x"}},
        {"params": {"after": -1}},
    ],
)
def test_route_refuses_a_cursor_that_is_no_seq(
    seeded: tuple[Served, list[dict[str, Any]]], kwargs: dict[str, Any]
) -> None:
    served, _ = seeded
    with served.client() as client:
        assert_error(client.get("/context/events", **kwargs), 400, "bad_request")


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


def test_route_goes_live_after_the_replay(seeded: tuple[Served, list[dict[str, Any]]]) -> None:
    """A change made through the API reaches an open stream, numbered after the last good line."""
    served, events = seeded
    with (
        served.client() as client,
        served.client() as writer,
        client.stream("GET", "/context/events") as response,
    ):
        stream = EventStream(response)
        replayed = [stream.next_frame() for _ in events]
        assert [f.seq for f in replayed if f is not None] == [e["seq"] for e in events]
        put = writer.put("/settings/memory", json={"enabled": False})
        assert put.status_code == 200, put.text
        live = stream.next_frame(time.monotonic() + BOUND)
    assert live is not None
    assert (live.id, live.event) == (str(SEEDED + 1), "memory_settings_updated")
    assert live.data["memory_settings"] == {"enabled": False}
    assert lines(served.data_dir)[-1] == live.data
