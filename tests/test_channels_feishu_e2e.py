"""Feishu end to end through a real `foya serve`: the kernel's long connection (lark-oapi's own
client) reaches a fake Feishu on loopback (tests/support/fake_feishu.py, via
`FOYA_FEISHU_API_URL`) and runs its turns against the fake provider.

A message event runs a turn whose reply is a card, sent and then patched to the final text; a
stranger is refused once; an event pushed twice runs once; a card button approves a tool call;
`/bind CODE` pairs a chat with a session; and a kill at the failpoints between receiving an
event and committing it, and between committing and answering it, neither loses the message
nor answers it twice when Feishu delivers it again.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from support.fake_feishu import FakeFeishu, card_event, message_event
from support.fake_provider import (
    FakeProvider,
    Recorded,
    answer,
    call,
    connect,
    finish,
    text,
    tools,
    wait,
)
from support.helpers import Kernel, Launcher, base_env

DEADLINE = 30.0
ALICE, EVE, BOB = "ou_alice", "ou_eve", "ou_bob"
CHAT = "oc_chat"
Card = dict[str, Any]


@dataclass
class Feishu(FakeFeishu):
    """The fake Feishu, also keeping each created message's id, so a chat reads as it would
    now: its messages in order, each with its last card."""

    created: list[tuple[str, str, Card]] = field(default_factory=list)  # (id, chat, card)

    async def _create(self, request: web.Request) -> web.Response:
        response = await super()._create(request)
        data = json.loads(response.text or "{}").get("data") or {}
        if "message_id" in data:  # `sent` has just got its card (no await in between)
            chat, card = self.sent[-1]
            self.created.append((data["message_id"], chat, card))
        return response

    def chat(self, chat: str) -> list[tuple[str, Card]]:
        """(message id, card as it reads now) of each message sent to `chat`, in order."""
        latest = dict(list(self.patched))
        return [(mid, latest.get(mid, card)) for mid, c, card in list(self.created) if c == chat]

    def connected(self, count: int) -> None:
        """Wait for the `count`-th long connection ever, and for it to be the only one open
        (a killed kernel's socket is gone once the fake has read its end)."""
        self.wait_connected(count)
        until(lambda: len(self._sockets) == 1, "one long connection")


@pytest.fixture
def fakes() -> Iterator[tuple[FakeProvider, Feishu]]:
    with FakeProvider.running() as fake, Feishu.running() as fs:
        yield fake, fs


def serve(spawn: Launcher, root: Path, fs: Feishu, **env: str) -> Kernel:
    sock = root / "k.sock"
    return spawn(
        ["serve", "--data-dir", str(root / "data"), "--socket", str(sock)],
        uds=sock,
        env=base_env(FOYA_FEISHU_API_URL=fs.url, **env),
    )


def until(check: Callable[[], Any], what: str) -> Any:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def channel(client: httpx.Client, model: str, fake: FakeProvider, fs: Feishu) -> dict[str, Any]:
    """A running Feishu channel for `model` (ALICE allowed), connected to `fs`."""
    seen = fs.connections
    body = {
        "kind": "feishu",
        "name": "Bot",
        "locale": "en-US",
        "app_id": fs.app_id,
        "app_secret": fs.app_secret,
        "enabled": True,
        "connection_id": connect(client, fake)["id"],
        "model": model,
        "allowed_users": [ALICE],
    }
    # The answer waits for the bot's start (the SDK's import takes seconds): longer than
    # httpx's 5 s default on a busy machine.
    made = client.post("/channels", json=body, timeout=30)
    assert made.status_code == 201, made.text
    assert fs.app_secret not in made.text and made.json()["has_app_secret"] is True
    path = f"/channels/{made.json()['id']}"
    running = until(lambda: (c := client.get(path).json())["status"] == "running" and c, "running")
    assert fs.app_secret not in json.dumps(running)
    fs.connected(seen + 1)
    return dict(running)


def shown(card: Card) -> str:
    """What a card's text reads as (its markdown is escaped with character references)."""
    markdown = next(e["content"] for e in card["elements"] if e["tag"] == "markdown")
    return html.unescape(str(markdown)).replace("\u200b", "")


def buttons(card: Card) -> list[tuple[str, str]]:
    actions = [a for e in card["elements"] if e["tag"] == "action" for a in e["actions"]]
    return [(a["text"]["content"], a["value"]["data"]) for a in actions]


def has_status(card: Card) -> bool:
    return any(e["tag"] == "note" for e in card["elements"])


def texts(fs: Feishu, chat: str) -> list[str]:
    return [shown(card) for _, card in fs.chat(chat)]


def delivered(fs: Feishu, event: dict[str, Any]) -> None:
    """Push `event` as Feishu does: again while the kernel answers 500 (not recorded within
    its wait, as a first message may be while the kernel builds its turn core), until taken."""
    end = time.monotonic() + DEADLINE
    while fs.ack(fs.push(event), DEADLINE)["code"] != 200:
        assert time.monotonic() < end, "the event was never taken"


def said(fs: Feishu, words: str, event_id: str, chat: str = CHAT, sender: str = ALICE) -> None:
    """A private message from `sender`, delivered until the kernel has taken it."""
    delivered(fs, message_event(words, event_id=event_id, chat=chat, sender=sender))


def users(request: Recorded) -> list[str]:
    """The user messages a model request carries, as text."""
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


def asked_of(client: httpx.Client, session: str, words: str) -> int:
    """How many of the session's stored user messages are `words`."""
    history = client.get(f"/sessions/{session}/history").json()
    return sum(m["role"] == "user" and str(m["content"]) == words for m in history)


def test_a_message_runs_a_turn_a_stranger_is_refused_once_and_a_repeat_runs_nothing(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, Feishu]
) -> None:
    fake, fs = fakes
    kernel = serve(spawn, short_dir, fs)
    head, tail = "Hello *you* ", "<there> & _all_\n1. done"  # escaped for the card, shown as is
    gate = fake.gate()
    with kernel.client() as client:
        channel(client, "fs-a", fake, fs)
        fake.push("fs-a", [text(head), wait(gate), text(tail), finish()])
        fake.push("fs-a", answer("second"))
        said(fs, "hi", "ev-1")
        until(lambda: any(t.startswith(head) for t in texts(fs, CHAT)), "the card")
        gate.set()
        until(lambda: head + tail in texts(fs, CHAT), "the final text")
        ((message_id, card),) = fs.chat(CHAT)  # one card: sent, then patched to the end
        assert message_id in {mid for mid, _ in fs.patched}
        assert not has_status(card) and not buttons(card)

        said(fs, "hi", "ev-1")  # the same event again: answered, not run
        said(fs, "again", "ev-2")
        until(lambda: "second" in texts(fs, CHAT), "the second reply")
        requests = fake.chats("fs-a", streaming=True)
        assert len(requests) == 2 and users(requests[-1])[-2:] == ["hi", "again"]

        for n in range(2):
            said(fs, "let me in", f"eve-{n}", chat="oc_eve", sender=EVE)
        refusals = texts(fs, "oc_eve")
        assert len(refusals) == 1 and EVE in refusals[0]
        assert len(fake.chats("fs-a", streaming=True)) == 2  # none for the stranger
    assert fs.app_secret not in kernel.stdout() + kernel.stderr()


def test_a_tool_call_is_approved_by_a_card_button(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, Feishu]
) -> None:
    fake, fs = fakes
    kernel = serve(spawn, short_dir, fs)
    with kernel.client() as client:
        channel(client, "fs-b", fake, fs)
        fake.push("fs-b", answer("ready"))
        said(fs, "start", "b-1")
        until(lambda: "ready" in texts(fs, CHAT), "the first reply")
        session = client.get("/sessions").json()[0]["id"]
        assert client.patch(f"/sessions/{session}", json={"approval_mode": "manual"}).is_success
        fake.push("fs-b", tools(call("c1", "bash", {"command": "echo approved-run"})))
        fake.push("fs-b", answer("all done"))
        said(fs, "run it", "b-2")
        asked = until(lambda: [(m, c) for m, c in fs.chat(CHAT) if buttons(c)], "the buttons")
        message_id, card = asked[-1]
        approve = next(data for label, data in buttons(card) if label == "Approve")
        delivered(fs, card_event(approve, event_id="b-press", message=message_id))
        until(lambda: any("all done" in t for t in texts(fs, CHAT)), "the reply after the tool")
        outcome = until(lambda: not buttons(c := dict(fs.chat(CHAT))[message_id]) and c, "outcome")
        assert shown(outcome).endswith("Approved.")  # the buttons were replaced by the outcome
        tool_result = fake.chats("fs-b", streaming=True)[-1].body["messages"][-1]
        assert "approved-run" in str(tool_result)


def test_bind_pairs_a_chat_with_a_session(
    spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, Feishu]
) -> None:
    fake, fs = fakes
    kernel = serve(spawn, short_dir, fs)
    with kernel.client() as client:
        made = channel(client, "fs-c", fake, fs)
        fields = {"connection_id": made["connection_id"], "model": "fs-c-paired"}
        session = client.post("/sessions", json={**fields, "approval_mode": "auto"}).json()["id"]
        pairing = client.post(
            f"/sessions/{session}/channel-pairings", json={"channel_id": made["id"]}
        )
        assert pairing.status_code == 201, pairing.text
        # Bob is not allowed: the code alone lets his chat in.
        said(fs, f"/bind {pairing.json()['code']}", "c-1", chat="oc_bob", sender=BOB)
        binding = client.get(f"/sessions/{session}/channel-binding").json()
        assert (binding["channel_id"], binding["external_id"]) == (made["id"], "oc_bob")
        assert binding["active_session_id"] == session
        assert texts(fs, "oc_bob") == ["This chat is now connected to Foya."]

        fake.push("fs-c-paired", answer("in the paired session"))
        said(fs, "hello session", "c-2", chat="oc_bob", sender=BOB)
        until(lambda: "in the paired session" in texts(fs, "oc_bob"), "the reply")
        (request,) = fake.chats("fs-c-paired", streaming=True)  # the session's model
        assert users(request)[-1] == "hello session"
        assert [s["id"] for s in client.get("/sessions").json()] == [session]

        assert client.delete(f"/sessions/{session}/channel-binding").status_code == 204
        assert client.get(f"/sessions/{session}/channel-binding").json() is None
        said(fs, "still there?", "c-3", chat="oc_bob", sender=BOB)
        assert BOB in texts(fs, "oc_bob")[-1]  # unbound: a stranger again
        assert len(fake.chats("fs-c-paired", streaming=True)) == 1


@pytest.mark.parametrize("point", ["channel.received", "channel.recorded"])
def test_a_kill_around_the_commit_neither_loses_nor_repeats_an_event(
    point: str, spawn: Launcher, short_dir: Path, fakes: tuple[FakeProvider, Feishu]
) -> None:
    fake, fs = fakes
    model = f"fs-{point}"
    dying = serve(spawn, short_dir, fs, FOYA_FAILPOINT=f"{point}:1")
    with dying.client() as client:
        channel(client, model, fake, fs)
    fake.push(model, answer("exactly once"))
    event = message_event("hello", event_id="k-1")
    frame = fs.push(event)
    assert dying.wait_exit() == 137
    assert fs.acks.get(frame, {}).get("code") != 200  # not taken: Feishu delivers it again
    asked = len(fake.chats(model, streaming=True))  # after the commit, the request may be out
    seen = fs.connections
    again = serve(spawn, short_dir, fs)
    with again.client() as client:
        fs.connected(seen + 1)
        delivered(fs, event)  # the redelivery; a restart finishes cut replies before it
        session = client.get("/sessions").json()[0]["id"]
        assert asked_of(client, session, "hello") == 1
        if point == "channel.received":  # died before the commit: the event runs now
            until(lambda: "exactly once" in texts(fs, CHAT), "the reply")
            assert len(fake.chats(model, streaming=True)) == 1
        else:  # died after it: the turn was interrupted, and is not run again
            assert len(fake.chats(model, streaming=True)) == asked
            assert not any(has_status(card) for _, card in fs.chat(CHAT))  # all finished
        assert len(fs.chat(CHAT)) <= 1  # and at most one reply
