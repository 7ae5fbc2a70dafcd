"""Telegram end to end through a real `foya serve`: the kernel long-polls a fake Bot API server
on loopback (tests/support/fake_telegram.py) and runs its turns against the fake provider.

A chat message runs a turn whose reply streams into the chat; a stranger is refused once; a
button approves a tool call; `/bind CODE` pairs a chat with a session; the platform's 429 and
5xx are waited out; a kill at the failpoints between receiving an update and committing it,
and between committing and acknowledging it, neither loses the message nor answers it twice;
and a reply cut by a kill after its first message went out is finished by an edit after the
restart, never sent again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import (
    FakeProvider,
    answer,
    call,
    connect,
    finish,
    sleep,
    text,
    tools,
)
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
        outcome = until(
            lambda: next((t for mid, t, m in tg.messages(CHAT) if mid == message_id and not m), ""),
            "the buttons replaced by the outcome",
        )
        assert visible(outcome).endswith("Approved.")
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


def test_bind_pairs_a_chat_with_a_session(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, FakeTelegram]
) -> None:
    fake, tg = fakes
    kernel = serve(spawn, short_dir, tg)
    with kernel.client() as client:
        channel_id = channel(client, "e2e-c", fake)
        connection = client.get(f"/channels/{channel_id}").json()["connection_id"]
        fields = {"connection_id": connection, "model": "e2e-paired", "approval_mode": "auto"}
        session = client.post("/sessions", json=fields).json()["id"]
        pairing = client.post(
            f"/sessions/{session}/channel-pairings", json={"channel_id": channel_id}
        )
        assert pairing.status_code == 201, pairing.text
        # The stranger is not allowed: the code alone lets his chat in.
        code = pairing.json()["code"]
        tg.push_message(chat=11, text=f"/bind {code}", user=STRANGER, username="eve")
        until(lambda: texts(tg, 11), "the pairing's answer")
        assert texts(tg, 11) == ["This chat is now connected to Foya."]
        binding = client.get(f"/sessions/{session}/channel-binding").json()
        assert (binding["channel_id"], binding["external_id"]) == (channel_id, "11")
        assert binding["active_session_id"] == session

        fake.push("e2e-paired", answer("in the paired session"))
        tg.push_message(chat=11, text="hello session", user=STRANGER, username="eve")
        until(lambda: "in the paired session" in texts(tg, 11), "the reply")
        (request,) = fake.chats("e2e-paired", streaming=True)  # the session's model
        assert request.messages[-1] == {"role": "user", "content": "hello session"}
        assert [s["id"] for s in client.get("/sessions").json()] == [session]

        assert client.delete(f"/sessions/{session}/channel-binding").status_code == 204
        assert client.get(f"/sessions/{session}/channel-binding").json() is None
        tg.push_message(chat=11, text="still there?", user=STRANGER, username="eve")
        until(lambda: len(texts(tg, 11)) == 3, "the refusal")
        assert str(STRANGER) in texts(tg, 11)[-1]  # unbound: a stranger again
        until(lambda: not tg.pending(), "every update confirmed")
        assert len(fake.chats("e2e-paired", streaming=True)) == 1


def test_a_reply_cut_by_a_kill_is_finished_after_the_restart_not_sent_again(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, FakeTelegram]
) -> None:
    fake, tg = fakes
    model = "e2e-cut"
    first = serve(spawn, short_dir, tg)
    with first.client() as client:
        channel(client, model, fake)
    first.stop()
    dying = serve(spawn, short_dir, tg, FOYA_FAILPOINT="channel.reply_sent:1")
    fake.push(model, [text("Partial"), sleep(5), text(" never"), finish()])
    tg.push_message(chat=CHAT, text="go", user=USER)
    assert dying.wait_exit() == 137
    ((cut, _, _),) = tg.messages(CHAT)  # the reply's first message went out, then the kill
    again = serve(spawn, short_dir, tg)
    with again.client():
        until(
            lambda: texts(tg, CHAT)[-1].endswith("(The reply was interrupted.)"),
            "the cut reply finished",
        )
        until(lambda: not tg.pending(), "the update confirmed")
    assert [mid for mid, _, _ in tg.messages(CHAT)] == [cut]  # edited, never sent again
    assert len(tg.calls("sendMessage")) == 1
    assert len(fake.chats(model, streaming=True)) == 1  # the turn is not run again
