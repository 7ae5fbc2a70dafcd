"""Queued input across a restart, through a real `foya serve`: each session's queue is its last
stored `queue_updated`, and a start puts it back and runs it (where Foya's restart loses it).

A kill -9 while a turn runs with input queued behind it, and a clean stop (SIGTERM) alike: the
next start runs each queued input once, in order, after the interrupted turn.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import FakeProvider, answer, connect, finish, text, wait
from support.helpers import Kernel, Launcher, base_env

DEADLINE = 30.0


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as fake:
        yield fake


def serve(spawn: Launcher, root: Path) -> Kernel:
    sock = root / "k.sock"
    data = ["--data-dir", str(root / "data"), "--socket", str(sock)]
    return spawn(["serve", *data], uds=sock, env=base_env())


def until(check: Callable[[], Any], what: str) -> Any:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if got := check():
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def users(client: httpx.Client, session: str) -> list[str]:
    history = client.get(f"/sessions/{session}/history").json()
    return [m["content"] for m in history if m["role"] == "user"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "stop"])
def test_input_queued_behind_a_turn_runs_after_a_restart(
    sig: int, spawn: Launcher, short_dir: Path, fake: FakeProvider
) -> None:
    model = f"restart-{sig}"
    fake.push(model, [text("working"), wait(fake.gate()), finish()])  # never lets go
    fake.push(model, answer("second done."), answer("third done."))
    first = serve(spawn, short_dir)
    with first.client() as client:
        connection = connect(client, fake)["id"]
        body = {"connection_id": connection, "model": model}
        session = client.post("/sessions", json=body).json()["id"]
        turns = f"/sessions/{session}/turns"
        assert client.post(turns, json={"message": "first"}).json()["status"] == "started"
        until(lambda: fake.chats(model, streaming=True), "the first request")
        for words in ("second", "third"):
            assert client.post(turns, json={"message": words}).json()["status"] == "queued"
        assert len(client.get(f"/sessions/{session}/queue").json()) == 2
    first.stop(sig)
    again = serve(spawn, short_dir)
    with again.client() as client:
        history = f"/sessions/{session}/history"
        until(lambda: "third done." in str(client.get(history).json()), "the queue run")
        assert client.get(f"/sessions/{session}/queue").json() == []
        assert users(client, session) == ["first", "second", "third"]
        said = [m["content"] for m in client.get(history).json()]
    assert said[-3:] == ["second done.", "third", "third done."]
    assert len(fake.chats(model, streaming=True)) == 3  # each input asked once
