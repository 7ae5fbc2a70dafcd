"""The Bot API through python-telegram-bot's `Bot` (the only module that imports the library),
and the one map from its exceptions to `PlatformError`.

Exception map (every text redacted, the library's exception not chained):

- `RetryAfter` (a 429 with `retry_after`) → `retry_after` set;
- `InvalidToken` (401, 404: a wrong or revoked token) → `permanent`;
- `BadRequest` (400: an edit of a deleted message, a chat that does not exist),
  `Forbidden` (403: the bot was blocked or removed), `ChatMigrated` → `permanent`;
- anything else (`NetworkError`, `TimedOut`: no connection, a 5xx, a 409 `Conflict` with
  another poller, a 429 without `retry_after`) → neither: worth retrying.

The library maps HTTP statuses itself and keeps no status code; "message is not modified" (a
`BadRequest`) is recognised by its text, the only way Telegram tells it apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import warnings
from collections.abc import Iterator, Sequence

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from app.kernel.channels.platform import Button, PlatformError
from app.kernel.channels.redaction import redact

ALLOWED_UPDATES = ("message", "callback_query")
_NOT_MODIFIED = "message is not modified"
_TOO_OLD = "query is too old"

# `RetryAfter` reads its own `retry_after` as a number when it is made, which warns that the
# next major version makes it a timedelta; we read both kinds. Narrow: that attribute only.
warnings.filterwarnings("ignore", r".*`retry_after`", PTBDeprecationWarning)


class BotApi:
    """The five Bot API methods we call, each raising only `PlatformError`."""

    def __init__(self, token: str, api_url: str, *, timeout: float = 10.0) -> None:
        self._bot = Bot(
            token,
            base_url=f"{api_url}/bot",
            base_file_url=f"{api_url}/file/bot",
            request=HTTPXRequest(connection_pool_size=8, read_timeout=timeout),
            # Two: the long poll, and the confirming call `close` may make beside it. The
            # library adds the poll's own `timeout` to this read timeout.
            get_updates_request=HTTPXRequest(connection_pool_size=2, read_timeout=timeout),
        )

    async def me(self) -> str:
        """Check the token (`getMe`); the bot's username, without `@`."""
        with _mapped("getMe"):
            await self._bot.initialize()  # its getMe checks the token
        return (self._bot.bot.username or "").lstrip("@")

    async def updates(self, offset: int, wait: float, limit: int = 100) -> list[Update]:
        """`getUpdates` from `offset` (0: the first unconfirmed), waiting up to `wait` s."""
        with _mapped("getUpdates"):
            got = await self._bot.get_updates(
                offset=offset or None,
                timeout=int(wait),
                limit=limit,
                allowed_updates=list(ALLOWED_UPDATES),
            )
        return list(got)

    async def send(self, chat: str, text: str, buttons: Sequence[Button]) -> str:
        """`sendMessage` of HTML `text`; the new message's id."""
        with _mapped("sendMessage"):
            sent = await self._bot.send_message(
                chat_id=chat,
                text=text,
                parse_mode=ParseMode.HTML,
                reply_markup=_keyboard(buttons),
            )
        return str(sent.message_id)

    async def edit(self, chat: str, message_id: str, text: str, buttons: Sequence[Button]) -> None:
        """`editMessageText`; an unchanged text (and buttons) is not an error."""
        try:
            with _mapped("editMessageText"):
                await self._bot.edit_message_text(
                    text=text,
                    chat_id=chat,
                    message_id=int(message_id),
                    parse_mode=ParseMode.HTML,
                    reply_markup=_keyboard(buttons),
                )
        except PlatformError as error:
            if _NOT_MODIFIED not in str(error).lower():
                raise

    async def answer(self, query_id: str, notice: str) -> None:
        """`answerCallbackQuery`; a query too old to answer is let go (nothing to redo)."""
        try:
            with _mapped("answerCallbackQuery"):
                await self._bot.answer_callback_query(query_id, text=notice[:200] or None)
        except PlatformError as error:
            if _TOO_OLD not in str(error).lower():
                raise

    async def close(self) -> None:
        """Close the HTTP clients."""
        with contextlib.suppress(Exception):
            await self._bot.shutdown()


def _keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup | None:
    if not buttons:
        return None
    for button in buttons:
        if len(button.data.encode()) > 64:
            raise PlatformError(
                f"button data of {button.label!r} is over Telegram's 64 bytes", permanent=True
            )
    row = [InlineKeyboardButton(b.label, callback_data=b.data) for b in buttons]
    return InlineKeyboardMarkup([row])


@contextlib.contextmanager
def _mapped(method: str) -> Iterator[None]:
    try:
        yield
    except (TelegramError, RuntimeError) as error:
        # RuntimeError: the library's "not initialized", a call racing `close`.
        _scrub(error)
        raise _platform_error(method, error) from None


def _platform_error(method: str, error: Exception) -> PlatformError:
    if isinstance(error, RetryAfter):
        wait = _seconds(error)
        return PlatformError(
            f"Telegram {method}: flood control, retry in {wait:g} s", retry_after=wait
        )
    permanent = isinstance(error, InvalidToken | BadRequest | Forbidden | ChatMigrated)
    return PlatformError(_text(method, error), permanent=permanent)


def _scrub(error: BaseException) -> None:
    # `from None` hides the library's exception from tracebacks, yet it stays reachable as
    # `__context__` (with the httpx error under it): their texts are redacted in place too.
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(redact(a) if isinstance(a, str) else a for a in current.args)
        if isinstance(current, TelegramError):
            current.message = redact(current.message)
        current = current.__cause__ or current.__context__


def _text(method: str, error: Exception) -> str:
    if isinstance(error, InvalidToken):
        return f"Telegram {method}: the bot token was refused ({redact(str(error))})"
    return f"Telegram {method} failed: {redact(str(error))}"


def _seconds(error: RetryAfter) -> float:
    wait = error.retry_after
    return wait.total_seconds() if isinstance(wait, dt.timedelta) else float(wait)
