"""Telegram end to end through a real `foya serve`: the kernel long-polls a fake Bot API server
on loopback (tests/support/fake_telegram.py) and runs its turns against the fake provider.

A chat message runs a turn whose reply streams into the chat; a stranger is refused once; a
button approves a tool call; the platform's 429 and 5xx are waited out; and a kill at the
failpoints between receiving an update and committing it, and between committing and
acknowledging it, neither loses the message nor answers it twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import FakeProvider, answer, call, connect, tools
from support.fake_telegram import TOKEN, FakeTelegram, visible
from support.helpers import Kernel, Launcher, base_env

DEADLINE = 30.0
USER, STRANGER, CHAT = 7, 99, 5


@pytest.fixture
def fakes() -> Iterator[tuple[FakeProvider, FakeTelegram]]:
    with FakeProvider.running() as fake, FakeTelegram.running() as tg:
        yield fake, tg


def serve(spawn: Launcher, root: Path, tg: FakeTelegram, **env: str) -> Kernel:
    sock = root / "k.sock"
    return spawn(
        ["serve", "--data-dir", str(root / "data"), "--socket", str(sock)],
        uds=sock,
        env=base_env(FOYA_TELEGRAM_API_URL=tg.url, **env),
        ready=not env,
    )


def until(check: Callable[[], Any], what: str) -> Any:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def channel(client: httpx.Client, model: str, fake: FakeProvider) -> str:
    connection = connect(client, fake)["id"]
    body = {
        "kind": "telegram",
        "name": "Bot",
        "locale": "en-US",
        "token": TOKEN,
        "enabled": True,
        "connection_id": connection,
        "model": model,
        "allowed_users": [str(USER)],
    }
    made = client.post("/channels", json=body)
    assert made.status_code == 201, made.text
    assert TOKEN not in made.text and made.json()["has_token"] is True
    channel_id = str(made.json()["id"])
    until(lambda: client.get(f"/channels/{channel_id}").json()["status"] == "running", "running")
    return channel_id


def texts(tg: FakeTelegram, chat: int) -> list[str]:
    """What the chat shows of each message, as Telegram renders its HTML."""
    return [visible(text) for _, text, _ in tg.messages(chat)]


def test_a_message_runs_a_turn_and_a_stranger_is_refused_once(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, FakeTelegram]
) -> None:
    fake, tg = fakes
    kernel = serve(spawn, short_dir, tg)
    with kernel.client() as client:
        channel(client, "e2e-a", fake)
        fake.push("e2e-a", answer("Hello <there> & *you*_!"))
        tg.fail("getUpdates", 502)  # the platform down for a moment: polling goes on
        tg.fail("sendMessage", 429, retry_after=1)  # and flood control: waited out
        tg.push_message(chat=CHAT, text="hi", user=USER)
        until(lambda: "Hello <there> & *you*_!" in texts(tg, CHAT), "the reply in the chat")
        for _ in range(2):
            tg.push_message(chat=9, text="let me in", user=STRANGER, username="eve")
        until(lambda: not tg.pending(), "every update confirmed")
        refusals = texts(tg, 9)
        assert len(refusals) == 1 and str(STRANGER) in refusals[0]
        assert len(fake.chats("e2e-a", streaming=True)) == 1  # one turn; none for the stranger
        assert TOKEN not in kernel.stdout() + kernel.stderr()


def test_a_tool_call_is_approved_by_a_button(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, FakeTelegram]
) -> None:
    fake, tg = fakes
    kernel = serve(spawn, short_dir, tg)
    with kernel.client() as client:
        channel(client, "e2e-b", fake)
        fake.push("e2e-b", answer("ready"))
        tg.push_message(chat=CHAT, text="start", user=USER)
        until(lambda: "ready" in texts(tg, CHAT), "the first reply")
        session = client.get("/sessions").json()[0]["id"]
        assert client.patch(f"/sessions/{session}", json={"approval_mode": "manual"}).is_success
        fake.push("e2e-b", tools(call("c1", "bash", {"command": "echo approved-run"})))
        fake.push("e2e-b", answer("all done"))
        tg.push_message(chat=CHAT, text="run it", user=USER)
        asked = until(
            lambda: [(mid, m) for mid, _, m in tg.messages(CHAT) if m], "approval buttons"
        )
        message_id, markup = asked[-1]
        approve = next(b for b in markup["inline_keyboard"][0] if b["text"] == "Approve")
        tg.push_button(chat=CHAT, message_id=message_id, data=approve["callback_data"])
        until(lambda: any("all done" in t for t in texts(tg, CHAT)), "the reply after the tool")
        assert not tg.messages(CHAT)[0][2]  # the buttons were replaced by the outcome
        tool_result = fake.chats("e2e-b", streaming=True)[-1].body["messages"][-1]
        assert "approved-run" in str(tool_result)


@pytest.mark.parametrize("point", ["channel.received", "channel.recorded"])
def test_a_kill_around_the_commit_neither_loses_nor_repeats_a_message(
    point: str, spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, FakeTelegram]
) -> None:
    fake, tg = fakes
    model = f"e2e-{point}"
    first = serve(spawn, short_dir, tg)
    with first.client() as client:
        channel(client, model, fake)
    first.stop()
    dying = serve(spawn, short_dir, tg, FOYA_FAILPOINT=f"{point}:1")
    fake.push(model, answer("exactly once"))
    tg.push_message(chat=CHAT, text="hello", user=USER)
    assert dying.wait_exit() == 137
    assert tg.pending()  # not confirmed: Telegram delivers it again
    asked = len(fake.chats(model, streaming=True))  # after the commit, the request may be out
    again = serve(spawn, short_dir, tg)
    with again.client() as client:
        until(lambda: not tg.pending(), "the update confirmed")
        if point == "channel.received":  # died before the commit: the message runs now
            until(lambda: any("exactly once" in t for t in texts(tg, CHAT)), "the reply")
        else:  # died after it: the turn was interrupted, and is not run again
            until(lambda: client.get("/sessions").json(), "the session")
            time.sleep(1.0)
    assert len(fake.chats(model, streaming=True)) == (1 if point == "channel.received" else asked)
    assert sum("exactly once" in t for t in texts(tg, CHAT)) <= 1  # and at most one reply
