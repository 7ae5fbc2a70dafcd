"""TelegramPlatform against a fake Bot API server on loopback (real httpx, real HTTP): start,
polling and its offset, retries, HTML escaping and splitting, edits, presses, redaction."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.fake_telegram import TOKEN, USERNAME, FakeTelegram, utf16_units, visible

from app.kernel.channels.platform import Button, Inbound, Outbound, PlatformError
from app.kernel.channels.telegram import TelegramPlatform
from app.kernel.channels.telegram.updates import addressed, clean

T = TypeVar("T")
# The library warns about its own `RetryAfter` (bot.py silences it; pytest resets filters).
pytestmark = pytest.mark.filterwarnings("ignore:.*`retry_after`")
BOUND = 20.0  # seconds: no wait of a test is longer, only to never hang
PROPERTY_BUDGET = 20.0  # seconds of examples for the escaping property; later ones are skipped
SPECIAL = "_*[]()~`>#+-=|{}.!<&;\"' \n\t/bi"


@pytest.fixture(scope="module")
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram.running() as fake:
        yield fake


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, BOUND))


class Sleeps:
    """An injected sleep: records each wait, waits (almost) not at all."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0.01)


def platform(fake: FakeTelegram, token: str = TOKEN, **kwargs: Any) -> TelegramPlatform:
    return TelegramPlatform(token, fake.url, poll_timeout=1, **kwargs)


async def take(
    items: AsyncIterator[Inbound], n: int, *, ack: TelegramPlatform | None
) -> list[Inbound]:
    got = []
    for _ in range(n):
        item = await anext(items)
        if ack is not None:
            await ack.ack(item)
        got.append(item)
    return got


def drain(fake: FakeTelegram) -> None:
    """Confirm whatever an earlier test left unconfirmed."""
    pending = fake.pending()
    if pending:
        fake.answer(TOKEN, "getUpdates", {"offset": max(pending) + 1})


# ----------------------------------------------------------------------------- start


def test_start_learns_the_username(tg: FakeTelegram) -> None:
    async def go() -> str:
        bot = platform(tg)
        await bot.start()
        await bot.close()
        await bot.close()  # idempotent
        return bot.username

    assert run(go()) == USERNAME
    assert tg.calls("getMe")


def test_a_bad_token_is_permanent(tg: FakeTelegram) -> None:
    bad = "999:not-a-valid-token"

    async def go() -> PlatformError:
        bot = platform(tg, bad)
        with pytest.raises(PlatformError) as caught:
            await bot.start()
        await bot.close()
        return caught.value

    error = run(go())
    assert error.permanent
    assert bad not in str(error)


def test_an_empty_token_is_refused() -> None:
    with pytest.raises(PlatformError, match="token is required"):
        TelegramPlatform("", "http://127.0.0.1:9")


def test_importing_the_package_does_not_import_the_library() -> None:
    code = "import sys, app.kernel.channels.telegram; print('telegram' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- polling


def test_polling_yields_messages_and_presses(tg: FakeTelegram) -> None:
    drain(tg)
    tg.push_message(5, "hello <there> & you")
    tg.push_message(-100, "just chatting", kind="supergroup")  # not for us: passed over
    tg.push_message(-100, "/new@Foya_Bot now", kind="supergroup")
    tg.push_message(-100, "/new@other_bot", kind="supergroup")  # another bot's command
    tg.push_message(-100, "hey @foya_bot what is up", kind="group")
    press = tg.push_button(5, 17, "approve:1")

    async def go() -> list[Inbound]:
        bot = platform(tg)
        await bot.start()
        items = await take(bot.inbound(), 4, ack=bot)
        await bot.answer_button(items[-1], "Approved")
        await bot.close()
        return items

    private, command, mention, button = run(go())
    assert (private.chat, private.chat_kind, private.text) == (
        "5",
        "private",
        "hello <there> & you",
    )
    assert (private.user, private.username, private.display_name) == ("7", "alice", "Alice")
    assert (command.chat, command.chat_kind, command.text) == ("-100", "group", "/new now")
    assert mention.text == "hey what is up"
    assert button == Inbound(
        key=str(press), chat="5", chat_kind="private", user="7", username="alice",
        display_name="Alice", button="approve:1", message="17",
    )  # fmt: skip
    answer = tg.calls("answerCallbackQuery")[-1].params
    assert answer["text"] == "Approved" and answer["callback_query_id"].startswith("q")
    assert tg.pending() == []  # everything acked was confirmed on close


def test_the_offset_moves_only_past_acked_updates(tg: FakeTelegram) -> None:
    drain(tg)
    first, second = tg.push_message(5, "one"), tg.push_message(5, "two")

    async def crash() -> None:  # takes `one`, acks nothing, and is gone without a close
        bot = platform(tg)
        await bot.start()
        items = bot.inbound()
        assert (await anext(items)).key == str(first)
        polls = len(tg.calls("getUpdates"))
        await asyncio.sleep(0.3)
        assert len(tg.calls("getUpdates")) == polls  # no poll while the batch is un-acked

    run(crash())
    assert tg.pending() == [first, second]

    async def partly() -> None:  # acks `one` only, then closes
        bot = platform(tg)
        await bot.start()
        items = bot.inbound()
        again = await anext(items)
        assert again.key == str(first)  # the same update, the same key
        await bot.ack(again)
        await bot.close()

    run(partly())
    assert tg.pending() == [second]

    async def rest() -> list[Inbound]:
        bot = platform(tg)
        await bot.start()
        items = await take(bot.inbound(), 1, ack=bot)
        await asyncio.sleep(0.2)  # the next poll confirms it
        await bot.close()
        return items

    assert [i.key for i in run(rest())] == [str(second)]
    assert tg.pending() == []


def test_a_429_on_polling_waits_its_retry_after(tg: FakeTelegram) -> None:
    drain(tg)
    tg.fail("getUpdates", 429, retry_after=3)
    tg.push_message(5, "after the flood")
    sleeps = Sleeps()

    async def go() -> list[Inbound]:
        bot = platform(tg, sleep=sleeps)
        await bot.start()
        items = await take(bot.inbound(), 1, ack=bot)
        await bot.close()
        return items

    assert run(go())[0].text == "after the flood"
    assert sleeps.waits == [3.0]


def test_network_errors_and_5xx_are_retried_with_backoff(tg: FakeTelegram) -> None:
    drain(tg)
    tg.fail("getUpdates", 502, times=2)
    tg.fail("getUpdates", 500, times=5)
    tg.push_message(5, "made it")
    sleeps = Sleeps()

    async def go() -> list[Inbound]:
        bot = platform(tg, sleep=sleeps, backoff=(0.5, 4.0))
        await bot.start()
        items = await take(bot.inbound(), 1, ack=bot)
        await bot.close()
        return items

    assert run(go())[0].text == "made it"
    assert sleeps.waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]


def test_a_revoked_token_ends_polling_for_good(tg: FakeTelegram) -> None:
    token = "555:to-be-revoked"
    tg.tokens.add(token)

    async def go() -> PlatformError:
        bot = platform(tg, token)
        await bot.start()
        tg.revoke(token)
        with pytest.raises(PlatformError) as caught:
            await anext(bot.inbound())
        await bot.close()
        return caught.value

    error = run(go())
    assert error.permanent and token not in str(error)


# ----------------------------------------------------------------------- sending


@pytest.fixture(scope="module")
def bot(tg: FakeTelegram) -> Iterator[tuple[asyncio.Runner, TelegramPlatform]]:
    with asyncio.Runner() as runner:
        started = platform(tg)
        runner.run(started.start())
        yield runner, started
        runner.run(started.close())


def sent_texts(fake: FakeTelegram, since: int) -> list[str]:
    return [visible(c.params["text"]) for c in fake.calls("sendMessage")[since:]]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(text=st.text(st.sampled_from(SPECIAL) | st.characters(codec="utf-8"), max_size=300))
@example(text="<b>bold</b> & &amp; &lt; <")
@example(text="_*[]()~`>#+-=|{}.!")
@example(text="   ")
def test_any_text_is_accepted_and_shown_unchanged(
    tg: FakeTelegram, bot: tuple[asyncio.Runner, TelegramPlatform], text: str
) -> None:
    if time.monotonic() > _budget_end():
        return  # the budget is spent: the remaining examples pass without a call
    runner, started = bot
    since = len(tg.calls("sendMessage"))
    runner.run(started.send("5", Outbound(text, status="> running <tool> & co")))
    shown = "\n".join(sent_texts(tg, since))
    status, _, body = shown.partition("\n")
    assert status == "> running <tool> & co"
    assert body.split() == text.split() or (not text.strip() and shown == status)


_BUDGET: list[float] = []


def _budget_end() -> float:
    if not _BUDGET:
        _BUDGET.append(time.monotonic() + PROPERTY_BUDGET)
    return _BUDGET[0]


def test_a_long_text_is_split_within_4096_with_the_buttons_last(
    tg: FakeTelegram, bot: tuple[asyncio.Runner, TelegramPlatform]
) -> None:
    runner, started = bot
    text = ("a<b>&c " * 700) + ("\U0001f600" * 3000) + "x" * 5000
    since = len(tg.calls("sendMessage"))
    buttons = [Button("Yes", "yes"), Button("No", "no")]
    ids = runner.run(started.send("5", Outbound(text, buttons, status="thinking")))
    calls = tg.calls("sendMessage")[since:]
    assert len(ids) == len(calls) > 2
    assert calls[0].params["text"].startswith("<i>thinking</i>\n")
    shown = [visible(c.params["text"]) for c in calls]
    assert all(utf16_units(s) <= 4096 for s in shown)
    assert "".join("\n".join(shown).split()) == "thinking" + "".join(text.split())
    assert [("reply_markup" in c.params) for c in calls] == [False] * (len(calls) - 1) + [True]
    keyboard = calls[-1].params["reply_markup"]["inline_keyboard"]
    assert [[b["callback_data"] for b in row] for row in keyboard] == [["yes", "no"]]


def test_button_data_over_64_bytes_is_refused_before_sending(
    tg: FakeTelegram, bot: tuple[asyncio.Runner, TelegramPlatform]
) -> None:
    runner, started = bot
    since = len(tg.calls("sendMessage"))
    with pytest.raises(PlatformError) as caught:
        runner.run(started.send("5", Outbound("q", [Button("x", "é" * 33)])))
    assert caught.value.permanent and len(tg.calls("sendMessage")) == since


def test_edits_an_unchanged_one_is_not_an_error_a_429_says_when(
    tg: FakeTelegram, bot: tuple[asyncio.Runner, TelegramPlatform]
) -> None:
    runner, started = bot
    [message] = runner.run(started.send("5", Outbound("draft")))
    runner.run(started.edit("5", message, Outbound("draft <2>", status="writing")))
    runner.run(started.edit("5", message, Outbound("draft <2>", status="writing")))  # same
    assert tg.text_of(5, int(message)) == "<i>writing</i>\ndraft &lt;2&gt;"
    tg.fail("editMessageText", 429, retry_after=2)
    with pytest.raises(PlatformError) as caught:
        runner.run(started.edit("5", message, Outbound("final")))
    assert caught.value.retry_after == 2.0 and not caught.value.permanent
    with pytest.raises(PlatformError) as gone:
        runner.run(started.edit("5", "99999", Outbound("final")))
    assert gone.value.permanent and "message to edit not found" in str(gone.value).lower()
    runner.run(started.edit("5", message, Outbound("y" * 5000)))  # cut to one message
    assert utf16_units(visible(tg.text_of(5, int(message)))) <= 4096


def test_a_429_on_send_raises_retry_after(
    tg: FakeTelegram, bot: tuple[asyncio.Runner, TelegramPlatform]
) -> None:
    runner, started = bot
    tg.fail("sendMessage", 429, retry_after=7)
    with pytest.raises(PlatformError) as caught:
        runner.run(started.send("5", Outbound("hi")))
    assert caught.value.retry_after == 7.0


# ------------------------------------------------------------------------ redaction


def test_the_token_is_in_no_log_line_and_no_error(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    bad = "777:a-wrong-token-for-the-logs"
    errors: list[BaseException] = []

    async def go() -> None:
        wrong = platform(tg, bad)
        try:
            await wrong.start()
        except PlatformError as error:
            errors.append(error)
        await wrong.close()
        good = platform(tg, sleep=Sleeps())
        await good.start()
        tg.fail("getUpdates", 503)
        tg.push_message(5, "x")
        await take(good.inbound(), 1, ack=good)
        await good.send("5", Outbound("logged"))
        tg.fail("sendMessage", 500)
        for call in (good.send("5", Outbound("x")), good.edit("5", "424242", Outbound("x"))):
            try:
                await call
            except PlatformError as error:
                errors.append(error)
        await good.close()

    drain(tg)
    run(go())
    assert len(errors) == 3
    chained = [e for error in errors for e in (error, error.__cause__, error.__context__) if e]
    texts = [caplog.text, capsys.readouterr().out, *map(str, chained), *map(repr, chained)]
    for text in texts:
        assert TOKEN not in text and bad not in text
    assert "HTTP Request: POST" in caplog.text and "/bot[redacted]/getMe" in caplog.text


# --------------------------------------------------------------------------- updates


def test_group_addressing_and_cleaning() -> None:
    assert addressed("/new", "foya_bot") and addressed("/new@FOYA_bot x", "foya_bot")
    assert not addressed("/new@other_bot", "foya_bot")
    assert addressed("ping @Foya_Bot", "foya_bot") and not addressed("@foya_bot2 hi", "foya_bot")
    assert clean("/bind@foya_bot  CODE\nmore", "foya_bot") == "/bind  CODE\nmore"
    assert clean("@foya_bot hello @FOYA_BOT", "foya_bot") == "hello"
    assert clean("/new@other_bot", "foya_bot") == "/new@other_bot"
