"""FeishuPlatform against a fake Feishu (tests/support/fake_feishu.py): a real HTTP server for
the OpenAPI and a real websocket speaking the SDK's pbbp2 frames, so the SDK's own
long-connection client delivers the events and its acknowledgements are read back."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from support.fake_feishu import FakeFeishu, card_event, mention, message_event
from support.helpers import REPO

from app.kernel.channels.feishu import FeishuPlatform, cards
from app.kernel.channels.feishu.api import FeishuApi
from app.kernel.channels.platform import Button, Inbound, Outbound, PlatformError


@pytest.fixture
def fake() -> Iterator[FakeFeishu]:
    with FakeFeishu.running() as server:
        yield server


async def _started(fake: FakeFeishu, **kwargs: Any) -> FeishuPlatform:
    platform = FeishuPlatform(fake.app_id, fake.app_secret, fake.url, **kwargs)
    await platform.start()
    return platform


async def _next(items: AsyncIterator[Inbound], timeout: float = 10.0) -> Inbound:
    return await asyncio.wait_for(anext(items), timeout)


def _markdown(card: dict[str, Any]) -> str:
    return str(next(e["content"] for e in card["elements"] if e["tag"] == "markdown"))


# ------------------------------------------------------------------------ lazy import


def test_importing_the_package_does_not_import_the_sdk() -> None:
    code = (
        "import sys, app.kernel.channels.feishu as f, app.kernel.channels.feishu.longconn;"
        "f.FeishuPlatform('a', 'b'); assert 'lark_oapi' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


# ------------------------------------------------------------------------ outbound


def test_token_is_fetched_once_and_sent_as_bearer(fake: FakeFeishu) -> None:
    async def go() -> None:
        platform = await _started(fake)
        try:
            await platform.send("oc_chat", Outbound("one"))
            await platform.send("oc_chat", Outbound("two"))
        finally:
            await platform.close()

    asyncio.run(go())
    assert len(fake.tokens) == 1
    assert fake.tokens[0].body == {"app_id": fake.app_id, "app_secret": fake.app_secret}
    creates = [r for r in fake.requests if r.path.startswith("/open-apis/im/v1/messages")]
    assert {r.headers["Authorization"] for r in creates} == {"Bearer t-1"}


def test_token_is_refreshed_before_expiry_and_when_refused(fake: FakeFeishu) -> None:
    now = [1000.0]

    async def go() -> None:
        api = FeishuApi(fake.url, fake.app_id, fake.app_secret, clock=lambda: now[0])
        try:
            first = await api.token()
            now[0] += 7200 - 301  # still five minutes and a second before `expire`
            assert await api.token() == first
            now[0] += 2
            second = await api.token()
            assert second != first
            fake.revoke()  # Feishu no longer takes it: fetched again, the call retried once
            await api.call("GET", "/open-apis/bot/v3/info")
            assert await api.token() not in (first, second)
        finally:
            await api.aclose()

    asyncio.run(go())
    assert len(fake.tokens) == 3


def test_bad_secret_is_permanent_and_never_in_the_error(fake: FakeFeishu) -> None:
    async def go() -> PlatformError:
        platform = FeishuPlatform(fake.app_id, "wrong-secret-value", fake.url)
        try:
            with pytest.raises(PlatformError) as caught:
                await platform.start()
            return caught.value
        finally:
            await platform.close()

    error = asyncio.run(go())
    assert error.permanent
    assert "10014" in str(error)
    assert "wrong-secret-value" not in str(error)


def test_send_is_a_card_with_status_text_and_buttons(fake: FakeFeishu) -> None:
    buttons = (Button("Allow", "ap:1:allow"), Button("Deny", "ap:1:deny"))

    async def go() -> list[str]:
        platform = await _started(fake)
        try:
            return await platform.send("oc_chat", Outbound("Run `rm`?", buttons, "running bash"))
        finally:
            await platform.close()

    ids = asyncio.run(go())
    assert len(ids) == 1 and ids[0].startswith("om_")
    chat, card = fake.sent[0]
    assert chat == "oc_chat"
    assert [e["tag"] for e in card["elements"]] == ["note", "markdown", "action"]
    assert card["elements"][0]["elements"][0]["content"] == "running bash"
    assert _markdown(card) == "Run &#96;rm&#96;?"
    actions = card["elements"][2]["actions"]
    assert [(a["text"]["content"], a["value"]["data"]) for a in actions] == [
        ("Allow", "ap:1:allow"),
        ("Deny", "ap:1:deny"),
    ]


def test_a_long_text_is_split_and_the_buttons_go_with_the_last(fake: FakeFeishu) -> None:
    text = "\n".join(f"line {n} " + "x" * 90 for n in range(100))  # about 10,000 characters

    async def go() -> list[str]:
        platform = await _started(fake)
        try:
            return await platform.send("oc_chat", Outbound(text, (Button("Stop", "stop"),), "s"))
        finally:
            await platform.close()

    ids = asyncio.run(go())
    assert len(ids) == len(fake.sent) == 3
    tags = [[e["tag"] for e in card["elements"]] for _, card in fake.sent]
    assert tags == [["note", "markdown"], ["markdown"], ["markdown", "action"]]
    assert "".join(cards.split(text)) == text
    assert all(len(piece) <= FeishuPlatform.max_text for piece in cards.split(text))


def test_pieces_of_escaped_or_wide_characters_stay_under_the_card_limit() -> None:
    for text in ("<" * 20_000, "😀" * 20_000, "飞" * 20_000):
        for piece in cards.split(text):
            cards.card(piece)  # builds
            assert len(cards.content(cards.card(piece)).encode()) < 30_000


def test_markdown_is_escaped_so_text_shows_as_typed() -> None:
    assert cards.escape("*a* _b_ [x](y) <at id=1> # h") == (
        "&#42;a&#42; &#95;b&#95; &#91;x&#93;(y) &#60;at id=1&#62; &#35; h"
    )
    assert cards.escape("- item\n  1. two\n3 apples") == "&#45; item\n  1&#46; two\n3 apples"


def test_edit_patches_the_card(fake: FakeFeishu) -> None:
    async def go() -> None:
        platform = await _started(fake)
        try:
            (message_id,) = await platform.send("oc_chat", Outbound("draft", status="thinking"))
            await platform.edit("oc_chat", message_id, Outbound("final answer"))
            await platform.edit("oc_chat", message_id, Outbound("final answer"))  # unchanged
        finally:
            await platform.close()

    asyncio.run(go())
    assert len(fake.patched) == 2
    message_id, card = fake.patched[0]
    assert message_id.startswith("om_")
    assert [e["tag"] for e in card["elements"]] == ["markdown"]
    assert _markdown(card) == "final answer"


@pytest.mark.parametrize(
    ("status", "body", "headers", "retry_after", "permanent"),
    [
        (429, {"code": 99991400, "msg": "too many"}, {"x-ogw-ratelimit-reset": "7"}, 7.0, False),
        (429, {"code": 99991400, "msg": "too many"}, {}, 1.0, False),
        (400, {"code": 230020, "msg": "chat rate limited"}, {}, 1.0, False),
        (503, {"code": 1, "msg": "busy"}, {}, None, False),
        (502, {}, {"retry-after": "3"}, 3.0, False),
        (400, {"code": 230001, "msg": "bad content"}, {}, None, True),
        (200, {"code": 230031, "msg": "message too old"}, {}, None, True),
    ],
)
def test_refusals_map_to_platform_errors(
    fake: FakeFeishu,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str],
    retry_after: float | None,
    permanent: bool,
) -> None:
    async def go() -> PlatformError:
        platform = await _started(fake)
        try:
            fake.fail(status, body, headers)
            with pytest.raises(PlatformError) as caught:
                await platform.edit("oc_chat", "om_9", Outbound("x"))
            return caught.value
        finally:
            await platform.close()

    error = asyncio.run(go())
    assert (error.retry_after, error.permanent) == (retry_after, permanent)
    assert f"HTTP {status}" in str(error) and "t-1" not in str(error)


def test_an_unreachable_feishu_is_transient() -> None:
    async def go() -> PlatformError:
        api = FeishuApi("http://127.0.0.1:9", "cli", "secret-value")
        try:
            with pytest.raises(PlatformError) as caught:
                await api.token()
            return caught.value
        finally:
            await api.aclose()

    error = asyncio.run(go())
    assert not error.permanent and "ConnectError" in str(error)


def test_transport_failures_are_mapped_with_a_mock_transport() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>not json</html>")

    async def go() -> PlatformError:
        api = FeishuApi(
            "https://open.feishu.cn", "cli", "k", transport=httpx.MockTransport(handler)
        )
        try:
            with pytest.raises(PlatformError) as caught:
                await api.token()
            return caught.value
        finally:
            await api.aclose()

    assert asyncio.run(go()).permanent


# ------------------------------------------------------------------------ inbound


def test_a_message_arrives_over_the_long_connection_and_is_acked(fake: FakeFeishu) -> None:
    async def go() -> tuple[Inbound, dict[str, Any]]:
        platform = await _started(fake)
        try:
            items = platform.inbound()
            frame = fake.push(message_event("hello there", event_id="ev-1"))
            item = await _next(items)
            await platform.ack(item)
            return item, await asyncio.to_thread(fake.ack, frame)
        finally:
            await platform.close()

    item, answer = asyncio.run(go())
    assert item == Inbound(
        key="ev-1",
        chat="oc_chat",
        chat_kind="private",
        user="ou_alice",
        username="",
        display_name="ou_alice",
        text="hello there",
        message="om_in_ev-1",
    )
    assert answer["code"] == 200
    endpoint = [r for r in fake.requests if r.path == "/callback/ws/endpoint"]
    assert endpoint[0].body == {"AppID": fake.app_id, "AppSecret": fake.app_secret}


def test_group_messages_need_the_bots_mention_which_is_removed(fake: FakeFeishu) -> None:
    bot = mention("@_user_1", "ou_bot", "Foya")
    bob = mention("@_user_2", "ou_bob", "Bob")

    async def go() -> list[Inbound]:
        platform = await _started(fake)
        got = []
        try:
            items = platform.inbound()
            fake.push(
                message_event("@_user_2 hi", event_id="g1", chat_type="group", mentions=[bob])
            )
            fake.push(message_event("from a bot", event_id="g2", sender_type="app"))
            fake.push(
                message_event(
                    "@_user_1 /new  ask @_user_2 ",
                    event_id="g3",
                    chat_type="group",
                    chat="oc_group",
                    mentions=[bot, bob],
                )
            )
            post = {
                "title": "",
                "content": [
                    [{"tag": "at", "user_id": "@_user_1"}, {"tag": "text", "text": " in a post"}]
                ],
            }
            fake.push(
                message_event(
                    "",
                    event_id="g4",
                    chat_type="group",
                    chat="oc_group",
                    mentions=[bot],
                    message_type="post",
                    content=post,
                )
            )
            fake.push(
                message_event(
                    "", event_id="g5", message_type="image", content={"image_key": "img_1"}
                )
            )
            for _ in range(3):
                got.append(await _next(items))
                await platform.ack(got[-1])
        finally:
            await platform.close()
        return got

    first, second, third = asyncio.run(go())
    assert (first.key, first.chat_kind, first.text) == ("g3", "group", "/new ask @Bob")
    assert first.display_name == "oc_group"
    assert (second.key, second.text) == ("g4", "in a post")
    assert (third.key, third.text, third.chat_kind) == ("g5", "", "private")


def test_a_button_press_becomes_an_inbound_and_its_notice_a_toast(fake: FakeFeishu) -> None:
    async def go() -> tuple[Inbound, dict[str, Any]]:
        platform = await _started(fake)
        try:
            items = platform.inbound()
            fake.push(message_event("hi", event_id="m1", chat="oc_dm"))
            await platform.ack(await _next(items))
            frame = fake.push(card_event("ap:1:allow", event_id="c1", chat="oc_dm"))
            item = await _next(items)
            await platform.ack(item)
            await platform.answer_button(item, "Allowed")
            return item, await asyncio.to_thread(fake.ack, frame)
        finally:
            await platform.close()

    item, answer = asyncio.run(go())
    assert (item.key, item.button, item.text, item.message) == ("c1", "ap:1:allow", "", "om_1")
    assert (item.chat, item.chat_kind, item.user) == ("oc_dm", "private", "ou_alice")
    assert answer["code"] == 200
    assert answer["data"] == {"toast": {"type": "info", "content": "Allowed"}}


def test_an_unanswered_press_is_answered_in_time_without_a_toast(fake: FakeFeishu) -> None:
    async def go() -> dict[str, Any]:
        platform = await _started(fake, answer_wait=0.2)
        try:
            items = platform.inbound()
            frame = fake.push(card_event("x", event_id="c2"))
            assert (await _next(items)).chat_kind == "group"  # a chat never seen
            return await asyncio.to_thread(fake.ack, frame)
        finally:
            await platform.close()

    answer = asyncio.run(go())
    assert answer["code"] == 200 and answer.get("data") == {}


def test_a_recorded_event_is_not_delivered_again(fake: FakeFeishu) -> None:
    async def go() -> dict[str, Any]:
        platform = await _started(fake)
        try:
            items = platform.inbound()
            fake.push(message_event("once", event_id="dup"))
            await platform.ack(await _next(items))
            again = fake.push(message_event("once", event_id="dup"))
            answer = await asyncio.to_thread(fake.ack, again)
            with pytest.raises(TimeoutError):
                await _next(items, timeout=0.5)
            return answer
        finally:
            await platform.close()

    assert asyncio.run(go())["code"] == 200


def test_an_event_not_recorded_in_time_is_refused_then_taken_once(fake: FakeFeishu) -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        platform = await _started(fake, ack_wait=0.3)
        try:
            items = platform.inbound()
            first = fake.push(message_event("slow", event_id="late"))
            item = await _next(items)
            refused = await asyncio.to_thread(fake.ack, first)  # 500: Feishu will redeliver
            second = fake.push(message_event("slow", event_id="late"))
            await asyncio.sleep(0.1)
            await platform.ack(item)
            taken = await asyncio.to_thread(fake.ack, second)
            with pytest.raises(TimeoutError):
                await _next(items, timeout=0.5)  # the redelivery was not queued again
            return refused, taken
        finally:
            await platform.close()

    refused, taken = asyncio.run(go())
    assert refused["code"] == 500 and taken["code"] == 200


def test_close_ends_the_sdk_thread_and_the_connection(fake: FakeFeishu) -> None:
    async def go() -> None:
        platform = await _started(fake)
        fake.wait_connected()
        assert any(t.name == "feishu-ws" for t in threading.enumerate())
        await platform.close()
        await platform.close()  # idempotent

    asyncio.run(go())
    assert not any(t.name == "feishu-ws" for t in threading.enumerate())
    assert not fake._sockets


def test_secrets_never_reach_the_logs(fake: FakeFeishu, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def go() -> None:
        platform = await _started(fake, ack_wait=0.2)
        try:
            items = platform.inbound()
            frame = fake.push(message_event("x", event_id="log-1"))
            await _next(items)
            await asyncio.to_thread(fake.ack, frame)  # refused: the SDK logs an error
            logging.getLogger("Lark").warning(
                "connected to ws://h/ws?device_id=1&access_key=ak-secret&ticket=tk1 with %s",
                fake.app_secret,
            )
            fake.fail(500, {"code": 1, "msg": f"echo {fake.app_secret}"})
            with pytest.raises(PlatformError) as caught:
                await platform.send("oc_chat", Outbound("x"))
            assert fake.app_secret not in str(caught.value)
        finally:
            await platform.close()

    asyncio.run(go())
    ours = [r for r in caplog.records if not r.name.startswith("aiohttp")]  # not the fake's
    logged = "\n".join(r.getMessage() for r in ours)
    assert "handle message failed" in logged  # the SDK's records do reach our logs
    for secret in (fake.app_secret, "ak-secret", "tk1", "t-1"):
        assert secret not in logged


def test_a_dropped_connection_is_reconnected_by_the_sdk(fake: FakeFeishu) -> None:
    async def go() -> Inbound:
        platform = await _started(fake)
        try:
            items = platform.inbound()
            fake.wait_connected()
            fake.drop()
            await asyncio.to_thread(fake.wait_connected, 2)
            fake.push(message_event("after", event_id="r1"))
            item = await _next(items)
            await platform.ack(item)
            return item
        finally:
            await platform.close()

    assert asyncio.run(go()).text == "after"


def test_inbound_fails_when_the_sdk_gives_up_reconnecting(fake: FakeFeishu) -> None:
    async def go() -> PlatformError:
        platform = await _started(fake)
        try:
            items = platform.inbound()
            fake.wait_connected()
            fake.app_secret = "revoked"  # the endpoint now refuses the app
            fake.drop()
            with pytest.raises(PlatformError) as caught:
                await _next(items)
            return caught.value
        finally:
            await platform.close()

    error = asyncio.run(go())
    assert error.permanent and "ClientException" in str(error)
    assert "s3cr3t" not in str(error)
