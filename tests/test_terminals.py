"""Terminals: the user's shell on a real PTY.

Every test drives a real `foya serve` on a Unix socket, with a HOME of its own and
`SHELL=/bin/sh`, through the routes: start, input, resize, stop, the snapshot and the terminal's
SSE stream (its own seqs, replay with `after`/`Last-Event-ID`, the gap marker when output was
dropped from memory). Whether processes are gone is read from /proc: the shell's session id is
its PID, so every process it started (jobs have process groups of their own) is found by it.
Processes orphaned here are reparented to a PID 1 that may not reap them: a zombie counts as
gone.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.helpers import Kernel, Launcher, base_env, short_tmpdir, wait_until
from support.streams_helpers import (
    SSE_HEADERS,
    EventStream,
    Frame,
    Served,
    assert_error,
    metric,
    new_session,
    unix_kernel,
)

MIB = 1024 * 1024
SNAPSHOT_KEYS = {"ref", "session_id", "running", "seq"}
BOUND = 60.0  # seconds: only so that a broken test ends, never a figure under test


def kernel_env(home: Path, **extra: str) -> dict[str, str]:
    return base_env(HOME=str(home), SHELL="/bin/sh", **extra)


@contextlib.contextmanager
def started(name: str, **extra: str) -> Iterator[Served]:
    """A kernel of its own (HOME, data dir, socket); stopped by PID afterwards."""
    with short_tmpdir() as root:
        launcher = Launcher(root / "procs")
        try:
            (root / "home").mkdir()
            yield unix_kernel(launcher, root, name, env=kernel_env(root / "home", **extra))
        finally:
            launcher.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with started("k") as kernel:
        yield kernel


def client_of(kernel: Kernel) -> httpx.Client:
    assert kernel.uds is not None
    transport = httpx.HTTPTransport(uds=str(kernel.uds))
    return httpx.Client(transport=transport, base_url="http://foya", timeout=BOUND)


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with client_of(served.kernel) as c:
        yield c


# ------------------------------------------------------------------------------------ helpers


def start(client: httpx.Client, session: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/sessions/{session}/terminals", json=body or None)
    assert response.status_code == 201, response.text
    out: dict[str, Any] = response.json()
    return out


def send(client: httpx.Client, session: str, ref: str, text: str) -> None:
    response = client.post(f"/sessions/{session}/terminals/{ref}/input", json={"input": text})
    assert response.status_code == 204, response.text


def snapshot(client: httpx.Client, session: str, ref: str) -> dict[str, Any]:
    response = client.get(f"/sessions/{session}/terminals/{ref}")
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


@contextlib.contextmanager
def events(client: httpx.Client, session: str, ref: str, **params: Any) -> Iterator[EventStream]:
    headers = params.pop("headers", {})
    path = f"/sessions/{session}/terminals/{ref}/events"
    with client.stream("GET", path, params=params, headers=headers) as response:
        if response.status_code != 200:
            response.read()
            raise AssertionError(f"events: {response.status_code} {response.text}")
        for key, value in SSE_HEADERS.items():
            assert response.headers[key] == value
        yield EventStream(response)


def text_of(frames: list[Frame]) -> str:
    return "".join(f.data.get("data", "") for f in frames)


def read_until(stream: EventStream, done: Callable[[str, Frame], bool]) -> list[Frame]:
    """Frames until `done(output so far, frame)`; fails at the end of the stream."""
    frames: list[Frame] = []
    output = ""
    while True:
        frame = stream.next_frame()
        assert frame is not None, f"stream ended; output so far: {output[-500:]!r}"
        frames.append(frame)
        output += frame.data.get("data", "")
        if done(output, frame):
            return frames


def next_seq(stream: EventStream) -> int:
    frame = stream.next_frame()
    assert frame is not None, "the stream ended"
    return frame.seq


def until_text(pattern: str) -> Callable[[str, Frame], bool]:
    return lambda output, _: re.search(pattern, output) is not None


def exited(_: str, frame: Frame) -> bool:
    return bool(frame.data.get("exited"))


def assert_frames(frames: list[Frame], session: str, ref: str, first: int) -> None:
    """Foya's framing: `id:` = the terminal's seq, `event: terminal`, contiguous seqs."""
    assert [f.seq for f in frames] == list(range(first, first + len(frames)))
    for f in frames:
        assert f.event == "terminal" and f.id == str(f.seq)
        assert f.data["session_id"] == session and f.data["ref"] == ref
        assert set(f.data) <= {"session_id", "ref", "seq", "data", "exited", "exit_code"}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat.rpartition(b")")[2].split()[0] != b"Z"


def members(sid: int) -> list[int]:
    """Live processes of session `sid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile
            fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
            if fields[0] != b"Z" and int(fields[3]) == sid:
                found.append(int(entry.name))
    return found


FAMILY = (
    "echo SH=$$; sleep 1000 & echo BG=$!; (trap '' HUP TERM; exec sleep 1001) & echo STUBBORN=$!\n"
)


def spawn_family(client: httpx.Client, session: str, ref: str) -> list[int]:
    """In the terminal: a background job, a job that ignores SIGHUP and SIGTERM, and a
    foreground `sleep`; every live process of the shell's session (the shell's PID first)."""
    with events(client, session, ref, after=0) as stream:
        send(client, session, ref, FAMILY)
        output = text_of(read_until(stream, until_text(r"STUBBORN=\d+")))
    shell = int(re.findall(r"SH=(\d+)", output)[0])
    send(client, session, ref, "sleep 1002\n")
    wait_until(lambda: len(members(shell)) == 4, "shell, two jobs and a foreground sleep")
    return [shell, *(p for p in members(shell) if p != shell)]


# -------------------------------------------------------------------------------- round trip


def test_a_shell_runs_on_a_real_pty_resizes_and_reports_its_exit(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    body = start(client, sid, cols=100, rows=30)
    ref = body["ref"]
    assert body["session_id"] == sid and body["running"] is True
    assert SNAPSHOT_KEYS <= set(body) <= {*SNAPSHOT_KEYS, "buffer"}
    assert "exit_code" not in body and re.fullmatch(r"[0-9a-f]{24}", ref)

    with events(client, sid, ref, after=0) as stream:
        send(client, sid, ref, "stty size; echo MARK-$((6*7))\n")
        frames = read_until(stream, until_text(r"MARK-42"))
        assert "30 100" in text_of(frames)

        resized = client.post(
            f"/sessions/{sid}/terminals/{ref}/resize", json={"cols": 120, "rows": 40}
        )
        assert resized.status_code == 204, resized.text
        unchanged = client.post(f"/sessions/{sid}/terminals/{ref}/resize", json={"cols": 0})
        assert unchanged.status_code == 204, unchanged.text  # 0: left as it is (Foya)
        send(client, sid, ref, "stty size\n")
        frames += read_until(stream, until_text(r"40 120"))

        send(client, sid, ref, "exit 3\n")
        frames += read_until(stream, exited)
    assert_frames(frames, sid, ref, 1)
    assert frames[-1].data == {
        "session_id": sid, "ref": ref, "seq": frames[-1].seq, "exited": True, "exit_code": 3
    }  # fmt: skip
    assert all("data" in f.data for f in frames[:-1])

    after = snapshot(client, sid, ref)
    assert after["running"] is False and after["exit_code"] == 3
    assert after["seq"] == frames[-1].seq and "MARK-42" in after["buffer"]
    # Input to, and resizing of, an exited shell: Foya's 404.
    gone = client.post(f"/sessions/{sid}/terminals/{ref}/input", json={"input": "x"})
    assert "exited" in assert_error(gone, 404, "terminal_not_found")["message"]
    resize = client.post(f"/sessions/{sid}/terminals/{ref}/resize", json={"cols": 9, "rows": 9})
    assert_error(resize, 404, "terminal_not_found")

    # No body: 80 x 24; a plain `exit` is exit code 0, stated.
    plain = start(client, sid)
    with events(client, sid, plain["ref"]) as stream:  # neither after nor Last-Event-ID: all kept
        send(client, sid, plain["ref"], "stty size; exit\n")
        frames = read_until(stream, exited)
    assert "24 80" in text_of(frames) and frames[-1].data["exit_code"] == 0
    assert_frames(frames, sid, plain["ref"], 1)

    assert client.delete(f"/sessions/{sid}/terminals/{ref}").status_code == 204
    assert_error(client.get(f"/sessions/{sid}/terminals/{ref}"), 404, "terminal_not_found")
    assert_error(client.delete(f"/sessions/{sid}/terminals/{ref}"), 404, "terminal_not_found")


def test_a_character_split_across_reads_arrives_whole(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    ref = start(client, sid)["ref"]
    with events(client, sid, ref, after=0) as stream:
        # € is E2 82 AC and 😀 F0 9F 98 80: each written in two parts, read apart; FF is no UTF-8.
        send(
            client, sid, ref,
            r"printf 'A\342\202'; sleep 0.5; printf '\254B\360'; sleep 0.5; "
            r"printf '\237\230\200C\377D\n'" "\n",
        )  # fmt: skip
        frames = read_until(stream, until_text("C\ufffdD"))
    output = text_of(frames)
    assert "A€B😀C\ufffdD" in output
    assert output.count("\ufffd") == 1, output
    assert "A€B😀C\ufffdD" in snapshot(client, sid, ref)["buffer"]


# ------------------------------------------------------------------------------------- replay


def test_a_reconnecting_client_gets_what_it_missed_once(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    ref = start(client, sid)["ref"]
    with events(client, sid, ref, after=0) as stream:
        send(client, sid, ref, "echo R$((1+1))\n")
        seen = read_until(stream, until_text("R2"))
    last = seen[-1].seq

    send(client, sid, ref, "echo R$((2+2))\n")  # while nobody listens
    wait_until(lambda: "R4" in snapshot(client, sid, ref).get("buffer", ""), "output kept")
    now = snapshot(client, sid, ref)

    for params in ({"after": last}, {"headers": {"Last-Event-ID": str(last)}}):
        with events(client, sid, ref, **params) as stream:
            missed = read_until(stream, lambda _, f: f.seq == now["seq"])
        assert_frames(missed, sid, ref, last + 1)
        assert "R4" in text_of(missed) and "R2" not in text_of(missed)

    with events(client, sid, ref, after=0) as stream:
        everything = read_until(stream, lambda _, f: f.seq == now["seq"])
    assert_frames(everything, sid, ref, 1)
    assert text_of(everything) == now["buffer"]
    # `after` wins over Last-Event-ID.
    with events(client, sid, ref, after=last, headers={"Last-Event-ID": "1"}) as stream:
        assert next_seq(stream) == last + 1

    beyond = client.get(f"/sessions/{sid}/terminals/{ref}/events", params={"after": now["seq"] + 1})
    assert "only reached" in assert_error(beyond, 400, "bad_request")["message"]


def test_a_client_behind_the_buffer_is_told_what_it_lost(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    ref = start(client, sid)["ref"]
    # 1.5 MB of "y\n" (2.25 MB through the tty's \r\n), nobody listening: the start is dropped.
    send(client, sid, ref, "yes | head -c 1500000; echo DONE-$((40+2))\n")
    wait_until(lambda: "DONE-42" in snapshot(client, sid, ref).get("buffer", ""), "output done")
    now = snapshot(client, sid, ref)
    assert MIB - 64 * 1024 <= len(now["buffer"].encode()) <= MIB

    with events(client, sid, ref, after=0) as stream:
        frames = read_until(stream, lambda _, f: f.seq == now["seq"])
    marker, kept = frames[0], frames[1:]
    first = kept[0].seq
    assert marker.id == str(first - 1) and marker.event == "terminal"
    assert marker.data == {
        "session_id": sid, "ref": ref, "seq": first - 1, "truncated": True, "missed": first - 1
    }  # fmt: skip
    assert_frames(kept, sid, ref, first)
    assert len(kept) <= 2048 and len(text_of(kept).encode()) <= MIB
    assert text_of(kept).endswith(now["buffer"][-1000:])

    # A cursor inside the lost part is told how much it missed; one inside the kept part is not.
    with events(client, sid, ref, after=2) as stream:
        told = stream.next_frame()
        assert told is not None and told.data["missed"] == first - 3 and told.seq == first - 1
        assert next_seq(stream) == first
    with events(client, sid, ref, after=first) as stream:
        assert next_seq(stream) == first + 1


def test_a_slow_reader_misses_nothing(client: httpx.Client) -> None:
    """A connected stream that falls behind holds the shell back instead of losing output."""
    sid = new_session(client)["id"]
    ref = start(client, sid)["ref"]
    with events(client, sid, ref, after=0) as stream:
        read_until(stream, lambda _, f: f.seq >= 1)  # the prompt
        # Far more than the kernel's send buffers and the replay buffer hold together.
        send(client, sid, ref, "yes | head -c 6000000; echo END-$((2+3))\n")
        time.sleep(3.0)  # not reading meanwhile: the kernel's buffers fill up, then it waits
        frames = read_until(stream, until_text("END-5"))
    assert not any(f.data.get("truncated") for f in frames)
    assert_frames(frames, sid, ref, frames[0].seq)
    assert text_of(frames).count("y\r\n") == 3_000_000


# ----------------------------------------------------------------------------- many at once


def test_twenty_terminals_at_once(client: httpx.Client, served: Served) -> None:
    sid = new_session(client)["id"]
    before = metric(client, "foya_terminals_open")

    def one(i: int) -> tuple[str, int]:
        with client_of(served.kernel) as own:
            ref = start(own, sid, cols=80 + i, rows=24)["ref"]
            with events(own, sid, ref, after=0) as stream:
                send(own, sid, ref, f"echo T{i}-$((1000+{i}))-$$-$(stty size)\n")
                output = text_of(read_until(stream, until_text(rf"T{i}-{1000 + i}-\d+-")))
            found = re.search(rf"T{i}-{1000 + i}-(\d+)-24 {80 + i}", output)
            assert found, output
            assert not re.search(rf"T(?!{i}-)\d+-1\d{{3}}-", output), output  # no cross-talk
            return ref, int(found.group(1))

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        results = list(pool.map(one, range(20)))
    refs, shells = [r for r, _ in results], [p for _, p in results]
    assert len(set(refs)) == 20 and len(set(shells)) == 20
    assert metric(client, "foya_terminals_open") == before + 20
    assert all(alive(p) for p in shells)
    output = labelled(client, "foya_terminal_bytes_total")
    assert output[("direction", "output")] > 0 and output[("direction", "input")] > 0

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        stops = list(pool.map(lambda r: client.delete(f"/sessions/{sid}/terminals/{r}"), refs))
    assert [s.status_code for s in stops] == [204] * 20
    assert metric(client, "foya_terminals_open") == before
    assert not any(alive(p) for p in shells)


def labelled(client: httpx.Client, name: str) -> dict[tuple[str, str], float]:
    samples = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name:
                samples.update({item: sample.value for item in sample.labels.items()})
    return samples


# ------------------------------------------------------------------------------ their ending


def test_deleting_the_session_ends_every_process_of_its_terminals(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    ref = start(client, sid)["ref"]
    family = spawn_family(client, sid, ref)
    with events(client, sid, ref) as stream:
        assert client.delete(f"/sessions/{sid}").status_code == 204
        assert [p for p in family if alive(p)] == []  # the stubborn job got SIGKILL
        rest = stream.rest()  # the stream ends, after the shell's end
    assert rest[-1].data["exited"] is True and rest[-1].data["exit_code"] == -1  # a signal
    assert_error(client.get(f"/sessions/{sid}/terminals/{ref}"), 404, "terminal_not_found")


def test_shutdown_ends_every_terminal_and_a_restart_forgets_them() -> None:
    with started("s") as served, client_of(served.kernel) as client:
        sid = new_session(client)["id"]
        ref = start(client, sid)["ref"]
        family = spawn_family(client, sid, ref)
        exited_ref = start(client, sid)["ref"]
        left = spawn_family(client, sid, exited_ref)
        send(client, sid, exited_ref, "\x03exit\n")  # its jobs outlive the shell, for now
        wait_until(lambda: not snapshot(client, sid, exited_ref)["running"], "shell exited")
        assert [p for p in left[1:] if alive(p)]

        assert served.kernel.stop() == 0
        assert [p for p in family + left if alive(p)] == []

        root = served.data_dir.parent
        launcher = Launcher(root / "again")
        try:
            restarted = unix_kernel(launcher, root, "s", env=kernel_env(root / "home"))
            with client_of(restarted.kernel) as again:
                base = f"/sessions/{sid}/terminals/{ref}"
                assert_error(again.get(base), 404, "terminal_not_found")
                assert_error(again.get(base + "/events"), 404, "terminal_not_found")
                gone = again.post(base + "/input", json={"input": "x"})
                assert_error(gone, 404, "terminal_not_found")
        finally:
            launcher.close()


# ------------------------------------------------------------------------- limits and errors


def test_terminal_limits_per_session_and_in_all() -> None:
    limits = {"FOYA_MAX_TERMINALS_PER_SESSION": "2", "FOYA_MAX_TERMINALS": "3"}
    with started("l", **limits) as served, client_of(served.kernel) as client:
        first, second = new_session(client)["id"], new_session(client)["id"]

        def post(session: str) -> httpx.Response:
            with client_of(served.kernel) as own:
                return own.post(f"/sessions/{session}/terminals", json={})

        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(post, [first] * 5))
        made = [a.json()["ref"] for a in answers if a.status_code == 201]
        refused = [a for a in answers if a.status_code != 201]
        assert len(made) == 2 and len(refused) == 3
        for answer in refused:
            assert "this session" in assert_error(answer, 409, "too_many_terminals")["message"]

        assert post(second).status_code == 201
        in_all = assert_error(post(second), 409, "too_many_terminals")
        assert "the kernel" in in_all["message"]
        assert metric(client, "foya_terminals_open") == 3

        assert client.delete(f"/sessions/{first}/terminals/{made[0]}").status_code == 204
        assert post(second).status_code == 201


def test_bad_requests_are_refused_and_change_nothing(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    ref = start(client, sid)["ref"]
    base = f"/sessions/{sid}/terminals"
    before = metric(client, "foya_terminals_open")
    for body in ({"cols": -1}, {"rows": 65536}, {"cols": "wide"}):
        assert_error(client.post(base, json=body), 400, "bad_request")
    bad_json = client.post(base, content=b"{", headers={"content-type": "application/json"})
    assert_error(bad_json, 400, "bad_request")
    assert metric(client, "foya_terminals_open") == before

    for typed in ({}, {"input": 5}):
        assert_error(client.post(f"{base}/{ref}/input", json=typed), 400, "bad_request")
    lone = b'{"input": "\\ud800"}'
    answer = client.post(
        f"{base}/{ref}/input", content=lone, headers={"content-type": "application/json"}
    )
    assert "surrogate" in assert_error(answer, 400, "bad_request")["message"]
    huge = client.post(f"{base}/{ref}/input", json={"input": "x" * (MIB + 1)})
    assert_error(huge, 413, "payload_too_large")
    for size in ({"cols": 70000}, {"rows": -3}):
        assert_error(client.post(f"{base}/{ref}/resize", json=size), 400, "bad_request")
    for params, headers in (
        ({"after": -1}, {}),
        ({"after": "x"}, {}),
        ({}, {"Last-Event-ID": "x"}),
    ):
        answer = client.get(f"{base}/{ref}/events", params=params, headers=headers)
        assert_error(answer, 400, "bad_request")

    # The terminal took none of it: nothing was typed, its size is the default.
    with events(client, sid, ref, after=0) as stream:
        send(client, sid, ref, "stty size; echo OK-$((5+5))\n")
        output = text_of(read_until(stream, until_text("OK-10")))
    assert "24 80" in output and "xxx" not in output and "ls" not in output


def test_unknown_sessions_and_refs_are_terminal_not_found(client: httpx.Client) -> None:
    sid, other = new_session(client)["id"], new_session(client)["id"]
    ref = start(client, sid)["ref"]
    assert_error(client.post("/sessions/nope/terminals", json={}), 404, "terminal_not_found")
    for session, name in (("nope", ref), (sid, "0" * 24), (other, ref)):
        base = f"/sessions/{session}/terminals/{name}"
        for answer in (
            client.get(base),
            client.post(base + "/input", json={"input": "exit\n"}),
            client.post(base + "/resize", json={"cols": 10, "rows": 10}),
            client.get(base + "/events"),
            client.delete(base),
        ):
            assert_error(answer, 404, "terminal_not_found")
    assert snapshot(client, sid, ref)["running"] is True  # none of it reached the terminal


def test_a_sessions_terminals_are_listed_oldest_first_without_their_output(
    client: httpx.Client,
) -> None:
    """`GET /sessions/{id}/terminals` (ours): another device finds the shells to attach to."""
    sid, other = new_session(client)["id"], new_session(client)["id"]
    assert client.get(f"/sessions/{sid}/terminals").json() == []
    first, second = start(client, sid)["ref"], start(client, sid)["ref"]
    start(client, other)
    send(client, sid, first, "echo listed\n")
    wait_until(lambda: "listed" in snapshot(client, sid, first).get("buffer", ""), "the echo")
    listed = client.get(f"/sessions/{sid}/terminals").json()
    assert [t["ref"] for t in listed] == [first, second]
    assert all(set(t) == SNAPSHOT_KEYS and t["running"] for t in listed), listed
    assert 0 < listed[0]["seq"] <= snapshot(client, sid, first)["seq"]
    assert client.delete(f"/sessions/{sid}/terminals/{first}").status_code == 204
    assert [t["ref"] for t in client.get(f"/sessions/{sid}/terminals").json()] == [second]
    assert_error(client.get("/sessions/nope/terminals"), 404, "terminal_not_found")
