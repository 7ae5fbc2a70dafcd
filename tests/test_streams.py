"""The session event stream `GET /sessions/{id}/events` over a real kernel.

Events come from PATCH /sessions/{id}: each stores a `session_updated` event and must-delivers
it. Every check compares what clients received against what the store holds (a replay from 0
once writing stopped): every stored event after N exactly once, in order, with no gap.

Not tested: the 15 s comment heartbeat (too slow to wait for); only the initial `: ok` comment.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import STOP_DEADLINE, Launcher, short_tmpdir, wait_until
from support.streams_helpers import (
    ENVELOPE_KEYS,
    SSE_HEADERS,
    Follow,
    Frame,
    Served,
    assert_error,
    describe_difference,
    follow,
    is_title,
    metric,
    module_kernels,
    new_session,
    open_events,
    patch,
    stored_seqs,
    unix_kernel,
)

BOUND = 60.0  # seconds: upper bound on joins and polls, only to never hang


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with (
        short_tmpdir() as root,
        module_kernels(tmp_path_factory.mktemp("streams"), root, "k") as kernels,
    ):
        yield kernels["k"]


@pytest.fixture(scope="module")
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as c:
        yield c


def sentinel() -> str:
    return f"end-{uuid.uuid4().hex}"


def run_threads(fns: list[Callable[[], Any]]) -> list[Any]:
    """Run each function on its own thread; return results in order, re-raising the first error."""
    with ThreadPoolExecutor(len(fns)) as pool:
        futures = [pool.submit(fn) for fn in fns]
        return [f.result(timeout=BOUND) for f in futures]


# ----------------------------------------------------------------------------- framing basics


def test_headers_and_ok_comment_arrive_before_any_event(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    with open_events(client, sid) as stream:
        # the response head is here although the session has no event at all
        for name, value in SSE_HEADERS.items():
            assert stream.response.headers[name] == value, name
        assert stream.response.headers.get("content-length") is None
        assert stream.next_line() == ": ok"
        assert stream.next_line() == ""
        updated = patch(client, sid, title="first")
        frame = stream.next_frame()
    assert frame is not None
    assert frame.lines == (f"id: {frame.seq}", "event: session_updated", frame.lines[2])
    assert frame.lines[2].startswith("data: {")
    assert frame.id == str(frame.seq)
    assert set(frame.data) == ENVELOPE_KEYS, frame.data  # no run_id outside a turn
    assert frame.data["kind"] == "session_updated"
    assert frame.data["session"] == sid
    assert frame.data["seq"] > 0
    assert frame.data["payload"] == updated
    stamp = dt.datetime.strptime(frame.data["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert abs(stamp - dt.datetime.now(dt.UTC).replace(tzinfo=None)) < dt.timedelta(hours=1)


@pytest.mark.parametrize(
    ("request_kwargs", "code"),
    [
        ({}, "not_found"),
        ({"params": {"after": 0}}, "not_found"),
        ({"headers": {"Last-Event-ID": "3"}}, "not_found"),
    ],
)
def test_unknown_session_is_a_json_404(
    client: httpx.Client, request_kwargs: dict[str, Any], code: str
) -> None:
    assert_error(client.get("/sessions/nope/events", **request_kwargs), 404, code)


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"params": {"after": "abc"}},
        {"params": {"after": -1}},
        {"headers": {"Last-Event-ID": "abc"}},
        {"headers": {"Last-Event-ID": "-5"}},
    ],
)
def test_bad_resume_points_are_400(client: httpx.Client, request_kwargs: dict[str, Any]) -> None:
    sid = new_session(client)["id"]
    assert_error(client.get(f"/sessions/{sid}/events", **request_kwargs), 400, "bad_request")


def test_without_a_resume_point_the_stream_is_live_only(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    for i in range(3):
        patch(client, sid, title=f"old {i}")
    with open_events(client, sid) as stream:
        patch(client, sid, title="new")
        frame = stream.next_frame()
    assert frame is not None
    assert frame.data["payload"]["title"] == "new"


@pytest.mark.parametrize("how", ["after", "last-event-id"])
def test_replay_after_n_then_live(client: httpx.Client, how: str) -> None:
    sid = new_session(client)["id"]
    seqs = stored_seqs_after_patches(client, sid, 6)
    n = seqs[2]
    kwargs: dict[str, Any] = {"after": n} if how == "after" else {"last_event_id": n}
    with open_events(client, sid, **kwargs) as stream:
        replayed = [stream.next_frame() for _ in range(3)]
        patch(client, sid, title="live")
        live = stream.next_frame()
    assert [f.seq for f in replayed if f] == seqs[3:]
    assert [f.data["payload"]["title"] for f in replayed if f] == ["t3", "t4", "t5"]
    assert live is not None
    assert live.data["payload"]["title"] == "live"
    assert live.seq > seqs[-1]


def test_resume_point_ahead_of_the_head_skips_up_to_it(client: httpx.Client) -> None:
    """Only events with seq > N are sent, even when N is not stored yet."""
    sid = new_session(client)["id"]
    head = stored_seqs_after_patches(client, sid, 1)[-1]
    n = head + 2
    with open_events(client, sid, last_event_id=n) as stream:
        for title in ("a", "b", "c"):
            patch(client, sid, title=title)
        got = stream.frames_until(is_title("c"))
    stored = stored_seqs(client, sid, is_title("c"))
    assert [f.seq for f in got] == [s for s in stored if s > n]


def stored_seqs_after_patches(client: httpx.Client, sid: str, count: int) -> list[int]:
    for i in range(count):
        patch(client, sid, title=f"t{i}")
    return stored_seqs(client, sid, is_title(f"t{count - 1}"))


# -------------------------------------------------------------- replay under concurrent writes


class Seen:
    """Seqs a live observer has received so far, shared between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seqs: list[int] = []

    def add(self, frame: Frame) -> None:
        with self._lock:
            self._seqs.append(frame.seq)

    def snapshot(self) -> list[int]:
        with self._lock:
            return list(self._seqs)


def test_resume_mid_stream_under_concurrent_writes_is_exact(
    served: Served, client: httpx.Client
) -> None:
    """One writer PATCHes as fast as it can (sometimes a second session too: seqs are global).
    Clients join at random moments with a random Last-Event-ID (or ?after=) at or below the
    current head. Each must get every stored event after its N exactly once, in order."""
    seed = int(os.environ.get("FOYA_TEST_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    runs, writes, before = 24, 360, 10
    sid = new_session(client)["id"]
    noise = new_session(client)["id"]
    for i in range(before):
        patch(client, sid, title=f"pre {i}")
    end = sentinel()
    stop = is_title(end)
    seen = Seen()
    observer_open = threading.Event()

    def observe() -> Follow:
        with served.client() as c:
            return follow(
                c, sid, stop, after=0, header=False, opened=observer_open, on_frame=seen.add
            )

    def write() -> None:
        with served.client() as c:
            for i in range(writes):
                if i % 7 == 3:
                    patch(c, noise, title=f"noise {i}")
                patch(c, sid, title=f"w {i}")
            patch(c, sid, title=end)

    def read(n: int, header: bool) -> Follow:
        with served.client() as c:
            return follow(c, sid, stop, after=n, header=header)

    plan: list[tuple[int, bool]] = []
    while_writing = 0
    with ThreadPoolExecutor(runs + 2) as pool:
        observer = pool.submit(observe)
        assert observer_open.wait(BOUND)
        writer = pool.submit(write)
        readers = []
        # join once the observer has seen `threshold` events: spread over the whole write
        for threshold in sorted(rng.randrange(before, before + writes) for _ in range(runs)):
            deadline = time.monotonic() + BOUND
            while len(current := seen.snapshot()) < threshold and not writer.done():
                assert time.monotonic() < deadline, "the writer stalled"
                time.sleep(0.001)
            # half the time an event's own seq, else any number up to the head (maybe another
            # session's seq, or 0)
            n = rng.choice(current) if rng.random() < 0.5 else rng.randint(0, current[-1])
            # Last-Event-ID: 0 is no cursor (app.http.sse): resuming from 0 goes as ?after=0
            header = n > 0 and rng.random() < 0.5
            plan.append((n, header))
            while_writing += not writer.done()
            readers.append(pool.submit(read, n, header))
        writer.result(timeout=BOUND)
        observed = observer.result(timeout=BOUND)
        results = [r.result(timeout=BOUND) for r in readers]

    final = stored_seqs(client, sid, stop)
    assert len(final) == before + writes + 1, "every PATCH stores exactly one event"
    assert observed.seqs == final, describe_difference(observed.seqs, final)
    failures = []
    for (n, header), got in zip(plan, results, strict=True):
        want = [s for s in final if s > n]
        if got.seqs != want:
            how = "Last-Event-ID:" if header else "?after="
            failures.append(
                f"{how}{n} ({got.reconnects} reconnects): {describe_difference(got.seqs, want)}"
            )
        assert all(f.id == str(f.seq) and f.data["session"] == sid for f in got.frames)
    mid_stream = sum(1 for n, _ in plan if final[0] < n < final[-1])
    assert mid_stream >= runs // 2, f"too few resume points inside the stream: {plan}"
    assert while_writing >= runs // 2, f"only {while_writing} clients joined during the writes"
    assert not failures, f"seed {seed} (rerun with FOYA_TEST_SEED={seed}):\n" + "\n".join(failures)


# ---------------------------------------------------------------------------- slow consumers


def test_a_client_that_never_reads_is_cut_off_and_recovers_by_replay(
    served: Served, client: httpx.Client
) -> None:
    """Socket buffers and then the 256-event broker buffer fill up; the next must-deliver event
    waits at most 50 ms and cuts the stuck subscriber off. The writer and a reading client carry
    on. Once the stuck client reads again, its stream ends; resuming from the last seq it got
    yields everything, with nothing lost and nothing twice."""
    sid = new_session(client)["id"]
    end = sentinel()
    stop = is_title(end)
    bulk = "x" * 8000  # big frames fill the socket buffers sooner
    cut_before = metric(client, "foya_broker_cut_off_subscribers_total")
    live_open = threading.Event()

    with served.client() as stuck_client, open_events(stuck_client, sid) as stuck:
        with ThreadPoolExecutor(1) as pool:

            def live() -> Follow:
                with served.client() as c:
                    return follow(c, sid, stop, opened=live_open)

            reading = pool.submit(live)
            assert live_open.wait(BOUND)
            writes = 0
            with served.client() as writer:
                while metric(writer, "foya_broker_cut_off_subscribers_total") == cut_before:
                    assert writes < 5000, "never cut off"
                    for _ in range(20):
                        patch(writer, sid, title=f"{writes} {bulk}")
                        writes += 1
                for i in range(30):  # the writer is not held up by the cut-off client
                    patch(writer, sid, title=f"after {i}")
                patch(writer, sid, title=end)
            live_result = reading.result(timeout=BOUND)
        # the stuck client reads again: what it still gets, then the end of its stream
        got = stuck.rest()
        assert stuck.ended
    assert metric(client, "foya_broker_cut_off_subscribers_total") == cut_before + 1
    assert got, "nothing at all arrived before the cut-off"
    assert not stop(got[-1]), "a cut-off client must not have received the whole stream"
    seqs = [f.seq for f in got]
    final = stored_seqs(client, sid, stop)
    assert live_result.seqs == final, describe_difference(live_result.seqs, final)
    with served.client() as again:
        rest = follow(again, sid, stop, after=seqs[-1])
    combined = seqs + rest.seqs
    assert combined == final, (
        f"stuck client got {len(seqs)} events, the last {seqs[-1]}; then resumed: "
        + describe_difference(combined, final)
    )


def test_fifty_clients_receive_the_same_events(served: Served, client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    patch(client, sid, title="before anyone listens")
    end = sentinel()
    stop = is_title(end)
    count = 50
    opened = [threading.Event() for _ in range(count)]

    def listen(i: int) -> Follow:
        with served.client() as c:
            return follow(c, sid, stop, opened=opened[i], max_reconnects=0)

    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(listen, i) for i in range(count)]
        for flag in opened:
            assert flag.wait(BOUND)
        for i in range(30):
            patch(client, sid, title=f"to all {i}")
        patch(client, sid, title=end)
        results = [f.result(timeout=BOUND) for f in futures]

    final = stored_seqs(client, sid, stop)
    assert len(final) == 32
    live = final[1:]  # all but the event stored before the clients connected
    for result in results:
        assert result.seqs == live, describe_difference(result.seqs, live)
        assert [f.data for f in result.frames] == [f.data for f in results[0].frames]


def test_disconnected_clients_release_their_subscriptions(
    served: Served, client: httpx.Client
) -> None:
    sid = new_session(client)["id"]
    baseline = metric(client, "foya_broker_subscribers")
    clients = [served.client() for _ in range(3)]
    try:
        with contextlib.ExitStack() as stack:
            for c in clients:
                stack.enter_context(open_events(c, sid))
            assert metric(client, "foya_broker_subscribers") == baseline + 3
    finally:
        for c in clients:
            c.close()
    wait_until(
        lambda: metric(client, "foya_broker_subscribers") == baseline,
        "the subscriber gauge to drop back after the clients left",
        10,
    )
    patch(client, sid, title="nobody listens")  # publishing to a topic without subscribers


# ------------------------------------------------------------------------------ how streams end


def test_delete_sends_session_deleted_and_ends_the_stream(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    with open_events(client, sid) as live, open_events(client, sid, after=0) as replaying:
        patch(client, sid, title="last words")
        assert client.delete(f"/sessions/{sid}").status_code == 204
        streams = [live.rest(), replaying.rest()]
        assert live.ended and replaying.ended
    for frames in streams:
        assert [f.event for f in frames] == ["session_updated", "session_deleted"]
        gone = frames[-1]
        assert gone.id == "0", "session_deleted is not stored: id 0, as Foya writes it"
        assert gone.lines[:2] == ("id: 0", "event: session_deleted")
        assert gone.data["seq"] == 0
        assert gone.data["kind"] == "session_deleted"
        assert gone.data["session"] == sid
        assert gone.data["payload"] == {"id": sid}
    assert_error(client.get(f"/sessions/{sid}/events"), 404, "not_found")


def test_sigterm_ends_open_streams_and_exits_cleanly(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path / "procs")
    try:
        with short_tmpdir() as root:
            served = unix_kernel(launcher, root, "k")
            with served.client() as c:
                sid = new_session(c)["id"]
                patch(c, sid, title="one")
                outcome: dict[str, Any] = {}
                opened = [threading.Event() for _ in range(3)]

                def listen(name: str, after: int | None, flag: threading.Event) -> None:
                    with served.client() as lc, open_events(lc, sid, after=after) as stream:
                        flag.set()
                        outcome[name] = (stream.rest(), stream.ended, stream.comments)

                threads = [
                    threading.Thread(target=listen, args=(name, after, flag), daemon=True)
                    for (name, after), flag in zip(
                        [("live", None), ("replay", 0), ("live2", None)], opened, strict=True
                    )
                ]
                for t in threads:
                    t.start()
                for flag in opened:
                    assert flag.wait(BOUND)
                # a client that never reads, too
                with served.client() as idle_client, open_events(idle_client, sid):
                    patch(c, sid, title="two")
                    served.kernel.send(signal.SIGTERM)
                    code = served.kernel.wait_exit(STOP_DEADLINE)
                    assert code == 0, served.kernel.describe()
                for t in threads:
                    t.join(BOUND)
                    assert not t.is_alive()
            for name, want in (("live", ["two"]), ("replay", ["one", "two"]), ("live2", ["two"])):
                frames, ended, comments = outcome[name]
                assert ended, name
                assert [f.data["payload"]["title"] for f in frames] == want, name
                assert comments == ["ok"], name
            wait_until(lambda: not (root / "k.sock").exists(), "the socket to be removed", 5)
    finally:
        launcher.close()
