"""The channel conversation runtime across crashes: a real kernel and the runtime in a child
process, killed at a failpoint (`FOYA_FAILPOINT`, app/failpoints.py: like SIGKILL), then
started again on the same data dir.

The child's platform keeps its state in files, as a real one keeps it upstream: the items to
deliver (`items.jsonl`), the acks (`acks.jsonl`: an item not acked is delivered again after a
restart, like a Telegram update below the offset) and every write (`writes.jsonl`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_provider import API_KEY, FakeProvider, finish, sleep, text
from support.helpers import base_env

from app.kernel.channels.platform import Inbound, Outbound

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 30.0
CHANNEL = "telegram-00000000000000aa"


class FilePlatform:
    """Our contract, kept in files of `root`."""

    edit_interval = 0.1
    max_text = 4000

    def __init__(self, root: Path) -> None:
        self.root = root
        self._ids = itertools.count(1)

    def _log(self, name: str, record: dict[str, Any]) -> None:
        with (self.root / name).open("a") as out:
            out.write(json.dumps(record) + "\n")
            out.flush()

    async def start(self) -> None:
        return None

    async def inbound(self) -> AsyncIterator[Inbound]:
        delivered: set[str] = set()
        while True:
            acked = {r["key"] for r in lines(self.root / "acks.jsonl")}
            for raw in lines(self.root / "items.jsonl"):
                if raw["key"] not in acked and raw["key"] not in delivered:
                    delivered.add(raw["key"])
                    yield Inbound(**raw)
            await asyncio.sleep(0.05)

    async def ack(self, item: Inbound) -> None:
        self._log("acks.jsonl", {"key": item.key})

    async def send(self, chat: str, message: Outbound) -> list[str]:
        message_id = f"{os.getpid()}-{next(self._ids)}"
        self._log("writes.jsonl", {"op": "send", "id": message_id, "text": message.text})
        return [message_id]

    async def edit(self, chat: str, message_id: str, message: Outbound) -> None:
        self._log("writes.jsonl", {"op": "edit", "id": message_id, "text": message.text})

    async def answer_button(self, item: Inbound, notice: str) -> None:
        return None

    async def close(self) -> None:
        return None


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def child(root: Path, base_url: str, model: str) -> None:
    """The child process: a kernel and the channel's runtime on `root`."""
    from app.kernel import Kernel
    from app.kernel.channels.bindings import Bindings
    from app.kernel.channels.conversation import run_channel
    from app.kernel.channels.conversation_parts import ConversationParts
    from app.kernel.channels.pairings import Pairings
    from app.kernel.channels.records import ChannelConfig
    from app.metrics import Metrics
    from app.settings import Settings

    kernel = Kernel(Settings(data_dir=root / "d"), Metrics())
    await kernel.start()
    known = [c for c in kernel.connections.all() if c["base_url"] == base_url]
    body = {"name": "fake", "base_url": base_url, "api_key": API_KEY}
    connection = known[0] if known else await kernel.connections.create(body)
    config = ChannelConfig(
        id=CHANNEL,
        kind="telegram",
        name="bot",
        locale="en-US",
        enabled=True,
        connection_id=str(connection["id"]),
        model=model,
        allow_all=True,
    )
    parts = ConversationParts(
        store=kernel.store,
        broker=kernel.broker,
        sessions=kernel.sessions,
        turns=kernel.turns,
        queues=kernel.queues,
        approvals=kernel.approvals,
        questions=kernel.questions,
        bindings=Bindings(kernel.store),
        pairings=Pairings(lambda: __import__("datetime").datetime.now().astimezone()),
        metrics=kernel.metrics,
    )
    await run_channel(config, FilePlatform(root), parts)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as fake:
        yield fake


def start(root: Path, fake: FakeProvider, model: str, failpoint: str = "") -> subprocess.Popen[str]:
    extra = {"PYTHONPATH": str(ROOT)}
    if failpoint:
        extra["FOYA_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, __file__, str(root), fake.base_url, model],
        cwd=ROOT,
        env=base_env(**extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def until(what: str, check: Any, proc: subprocess.Popen[str]) -> Any:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"the child ended ({proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def died(proc: subprocess.Popen[str]) -> None:
    assert proc.wait(DEADLINE) == 137, proc.stderr.read() if proc.stderr else ""


def stopped(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(DEADLINE)


def item(root: Path, key: str, words: str) -> None:
    record = {
        "key": key,
        "chat": "100",
        "chat_kind": "private",
        "user": "42",
        "username": "alice",
        "display_name": "Alice",
        "text": words,
    }
    with (root / "items.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")


def stored_messages(root: Path) -> list[tuple[str, Any]]:
    """(role, content) of every session's messages, read from the database once the child is
    gone (sqlite3 straight: the test is outside the app's layers)."""
    import sqlite3

    with sqlite3.connect(root / "d" / "foya.db") as db:
        rows = db.execute(
            "SELECT payload_json FROM events WHERE kind = 'message_end' ORDER BY seq"
        ).fetchall()
    return [(m["role"], m.get("content")) for m in (json.loads(r[0]) for r in rows)]


def final(root: Path) -> dict[str, str]:
    """Each message's last text, by id."""
    shown: dict[str, str] = {}
    for write in lines(root / "writes.jsonl"):
        shown[write["id"]] = write["text"]
    return shown


def test_a_crash_between_receive_and_commit_loses_nothing(
    tmp_path: Path, fake: FakeProvider
) -> None:
    fake.push("crash-a", [text("Hello"), text(" world."), finish()])
    item(tmp_path, "u1", "hi")
    died(start(tmp_path, fake, "crash-a", "channel.received:1"))
    assert lines(tmp_path / "acks.jsonl") == [] and lines(tmp_path / "writes.jsonl") == []
    proc = start(tmp_path, fake, "crash-a")
    try:
        until("the reply", lambda: "Hello world." in final(tmp_path).values(), proc)
        until("the ack", lambda: lines(tmp_path / "acks.jsonl") == [{"key": "u1"}], proc)
    finally:
        stopped(proc)
    assert [m for m in stored_messages(tmp_path) if m[0] == "user"] == [("user", "hi")]
    assert len(fake.chats("crash-a", streaming=True)) == 1


def test_a_crash_between_commit_and_ack_runs_no_second_turn(
    tmp_path: Path, fake: FakeProvider
) -> None:
    fake.push("crash-b", [text("Once"), sleep(5), finish()])
    item(tmp_path, "u1", "only once")
    died(start(tmp_path, fake, "crash-b", "channel.recorded:1"))
    assert lines(tmp_path / "acks.jsonl") == []  # recorded, but the platform was never told
    proc = start(tmp_path, fake, "crash-b")
    try:
        until("the ack", lambda: lines(tmp_path / "acks.jsonl") == [{"key": "u1"}], proc)
    finally:
        stopped(proc)
    assert [m for m in stored_messages(tmp_path) if m[0] == "user"] == [("user", "only once")]
    # The killed turn's request may or may not have left before the kill; none after it.
    assert len(fake.chats("crash-b", streaming=True)) <= 1


def test_a_reply_cut_by_a_crash_is_finished_after_restart_not_resent(
    tmp_path: Path, fake: FakeProvider
) -> None:
    fake.push("crash-c", [text("Partial"), sleep(5), text(" never"), finish()])
    item(tmp_path, "u1", "go")
    died(start(tmp_path, fake, "crash-c", "channel.reply_sent:1"))
    sent = [w for w in lines(tmp_path / "writes.jsonl") if w["op"] == "send"]
    assert len(sent) == 1
    proc = start(tmp_path, fake, "crash-c")
    try:
        until(
            "the interrupted reply",
            lambda: final(tmp_path)[sent[0]["id"]].endswith("(The reply was interrupted.)"),
            proc,
        )
    finally:
        stopped(proc)
    writes = lines(tmp_path / "writes.jsonl")
    assert [w["op"] for w in writes].count("send") == 1  # finished by editing, never resent
    assert len(fake.chats("crash-c", streaming=True)) == 1


def test_a_message_queued_when_the_kernel_dies_is_answered_after_restart(
    tmp_path: Path, fake: FakeProvider
) -> None:
    fake.push("crash-d", [text("Busy"), sleep(30), finish()])
    fake.push("crash-d", [text("Queued one answered."), finish()])
    item(tmp_path, "u1", "first")
    proc = start(tmp_path, fake, "crash-d")
    until("the first reply", lambda: "Busy" in str(final(tmp_path)), proc)
    item(tmp_path, "u2", "second")
    until("the queued notice", lambda: "Queued" in str(final(tmp_path)), proc)
    until("the ack", lambda: len(lines(tmp_path / "acks.jsonl")) == 2, proc)
    stopped(proc)  # SIGKILL: the queue was only in memory, and in its stored fact
    proc = start(tmp_path, fake, "crash-d")
    try:
        until("the answer", lambda: "Queued one answered." in final(tmp_path).values(), proc)
    finally:
        stopped(proc)
    users = [m for m in stored_messages(tmp_path) if m[0] == "user"]
    assert users == [("user", "first"), ("user", "second")]
    assert len(fake.chats("crash-d", streaming=True)) == 2  # each message asked once


if __name__ == "__main__":
    asyncio.run(child(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
