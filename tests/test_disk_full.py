"""A full disk: input is refused with 507 and leaves nothing behind; once space is freed the
kernel carries on. A real kernel whose data directory is a small tmpfs this test mounts (CI
runs as root), filled to the last block by a filler file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.fake_provider import (
    Agent,
    FakeProvider,
    Session,
    answer,
    connect,
    finish,
    only,
    payloads,
    text,
    usage,
    wait,
)
from support.helpers import Launcher, short_tmpdir, wait_until
from support.streams_helpers import Served, assert_error, unix_kernel

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

# Each write must need blocks the WAL does not hold yet (a rolled-back write leaves its frames
# for the next one to reuse), so each step stores more than every step before it.
MID_TURN = "m" * (1 << 20)
QUEUED = "q" * (3 << 20)
IDLE = "i" * (5 << 20)


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    with short_tmpdir() as root:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "fy", str(root)])
        try:
            yield root
        finally:
            subprocess.run(["umount", "-l", str(root)], check=False)


def fill(root: Path) -> Path:
    """Write a filler file until the file system has no block left; its path."""
    filler = root / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, FakeProvider]]:
    with FakeProvider.running() as fake, tmpfs("24m") as root:
        launcher = Launcher(tmp_path_factory.mktemp("disk-full"))
        try:
            yield unix_kernel(launcher, root, "k"), fake
        finally:
            launcher.close()


def test_a_full_disk_refuses_input_and_a_running_turn_waits_for_room(
    kernel: tuple[Served, FakeProvider],
) -> None:
    served, fake = kernel
    root = served.data_dir.parent
    with served.kernel.client() as client:
        client.timeout = httpx.Timeout(30)
        connection = connect(client, fake)
        row = client.post("/sessions", json={"connection_id": connection["id"]}).json()
        s = Session(Agent(served, fake, client, connection["id"]), row)
        s.turn(answer("Before the disk filled up."), message="first")

        # 1. The disk fills while a turn streams: its reply cannot be stored. The turn is not
        # lost: it waits (busy) and ends with turn_complete once there is room again.
        gate = fake.gate()
        s.push([text("working "), wait(gate), text(MID_TURN), usage(), finish()])
        with s.events() as events:
            s.submit("second")
            events.until_kind("message_delta")
            filler = fill(root)
            try:
                gate.set()
                wait_until(lambda: "turn_complete waits" in served.kernel.stdout(), "a retry", 10)
                assert s.get()["phase"] == "turn"
                # 2. Input queued meanwhile is refused, and the queue does not keep it.
                queued = client.post(f"/sessions/{s.id}/queue", json={"message": QUEUED})
                assert_error(queued, 507, "insufficient_storage")
                assert s.queue() == []
            finally:
                filler.unlink()
            done = events.until_kind("turn_complete")
        assert only(done, "turn_complete")["status"] == "failed"
        reply = payloads(done, "message_end")[-1]
        assert reply["content"] == "working " + MID_TURN and reply["turn_status"] == "failed"
        s.wait_idle()

        # 3. An idle session: a turn is refused, never answered `started` and then lost.
        history = s.history()
        filler = fill(root)
        try:
            refused = client.post(f"/sessions/{s.id}/turns", json={"message": IDLE})
            body = assert_error(refused, 507, "insufficient_storage")
            assert "full" in body["message"]
            assert s.get()["phase"] == "idle" and s.history() == history
        finally:
            filler.unlink()

        # Room again: the kernel serves turns as before.
        frames = s.turn(answer("After."), message="third")
        assert only(frames, "turn_complete")["status"] == "completed"
        assert [m["content"] for m in s.history() if m["role"] == "user"] == [
            "first",
            "second",
            "third",
        ]
