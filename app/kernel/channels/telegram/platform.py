"""`TelegramPlatform`: the channel runtime's `Platform` over the Bot API, by long polling.

The offset of `getUpdates` is ours (`cursor`): it moves past an update only once the runtime
acked it. A poll that fails for the network or a 5xx is retried with backoff (0.5 s doubling
to 30 s) forever; a 429 waits its `retry_after`; a refused token (401/404) ends `inbound` with
a permanent `PlatformError`. Sends and edits raise at once (the runtime paces them and
decides when to call again). python-telegram-bot is imported on `start`, not before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from app.kernel.channels import redaction
from app.kernel.channels.platform import Inbound, Outbound, PlatformError
from app.kernel.channels.telegram import formatting
from app.kernel.channels.telegram.cursor import Cursor
from app.kernel.channels.telegram.updates import to_inbound
from app.logs import get_logger

if TYPE_CHECKING:
    from app.kernel.channels.telegram.bot import BotApi

DEFAULT_API_URL = "https://api.telegram.org"
POLL_TIMEOUT = 30.0
BACKOFF = (0.5, 30.0)  # seconds: the first retry of a failed poll, and the longest wait
_QUERIES_KEPT = 1024  # button presses whose callback query can still be answered
# The loggers whose records can hold a Bot API URL, and so the token.
_LOGGERS = (
    "httpx",
    "httpcore",
    "telegram",
    "telegram.Bot",
    "telegram.request.BaseRequest",
    "telegram.request.HTTPXRequest",
)

Sleep = Callable[[float], Awaitable[None]]


class TelegramPlatform:
    """One bot (one token) on the Bot API at `api_url` (`FOYA_TELEGRAM_API_URL`)."""

    edit_interval: float = 1.0
    max_text: int = formatting.MAX_TEXT

    def __init__(
        self,
        token: str,
        api_url: str = DEFAULT_API_URL,
        *,
        poll_timeout: float = POLL_TIMEOUT,
        backoff: tuple[float, float] = BACKOFF,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not token:
            raise PlatformError("Telegram bot token is required", permanent=True)
        redaction.remember(token)
        redaction.watch(*_LOGGERS)
        self._token = token
        self._api_url = api_url.rstrip("/")
        self._poll_timeout = poll_timeout
        self._backoff = backoff
        self._sleep = sleep
        self._api: BotApi | None = None
        self._cursor = Cursor()
        self._queries: OrderedDict[str, str] = OrderedDict()  # item key → callback query id
        self._closed = False
        self.username = ""
        self._log = get_logger("foya.channels.telegram")

    async def start(self) -> None:
        """Check the token (`getMe`) and learn the bot's username."""
        from app.kernel.channels.telegram.bot import BotApi  # the library, only when used

        if self._closed:
            raise PlatformError("Telegram platform is closed", permanent=True)
        if self._api is None:
            self._api = BotApi(self._token, self._api_url)
        self.username = await self._api.me()

    async def inbound(self) -> AsyncIterator[Inbound]:
        """Messages and button presses, forever (see the module docstring for failures)."""
        api = self._started()
        first, longest = self._backoff
        delay = first
        while not self._closed:
            await self._cursor.wait_settled()
            offset = self._cursor.offset
            try:
                batch = await api.updates(offset, self._poll_timeout)
            except PlatformError as error:
                if self._closed:
                    return
                if error.permanent:
                    raise
                wait = error.retry_after if error.retry_after is not None else delay
                if error.retry_after is None:
                    delay = min(delay * 2, longest)
                self._log.warning("telegram_poll_failed", error=str(error), retry_in=wait)
                await self._sleep(wait)
                continue
            delay = first
            self._cursor.confirmed(offset)
            self._cursor.begin([u.update_id for u in batch])
            for update in batch:
                item = to_inbound(update, self.username)
                if item is None:
                    self._cursor.settle(update.update_id)
                    continue
                if update.callback_query is not None:
                    self._remember_query(item.key, update.callback_query.id)
                yield item

    async def ack(self, item: Inbound) -> None:
        """`item` is recorded; the next poll confirms it (once its whole batch is acked)."""
        with contextlib.suppress(ValueError):
            self._cursor.settle(int(item.key))

    async def send(self, chat: str, message: Outbound) -> list[str]:
        """Send `message`, in as many messages as its length takes; their ids, in order."""
        api = self._started()
        parts = formatting.render(message, self.max_text)
        ids = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            ids.append(await api.send(chat, part, message.buttons if last else ()))
        return ids

    async def edit(self, chat: str, message_id: str, message: Outbound) -> None:
        """Replace a message's text and buttons (a text too long is cut with an ellipsis)."""
        api = self._started()
        text = formatting.render_one(message, self.max_text)
        await api.edit(chat, message_id, text, message.buttons)

    async def answer_button(self, item: Inbound, notice: str) -> None:
        """answerCallbackQuery for a press this platform delivered (others are let go)."""
        query = self._queries.pop(item.key, None)
        if query is not None:
            await self._started().answer(query, notice)

    async def close(self) -> None:
        """Confirm what was acked (best effort), close the connections; idempotent."""
        if self._closed:
            return
        self._closed = True
        api, self._api = self._api, None
        if api is not None:
            if self._cursor.unconfirmed:
                # Confirms the acked updates; it returns the next ones, which stay unconfirmed.
                with contextlib.suppress(PlatformError, TimeoutError):
                    await asyncio.wait_for(api.updates(self._cursor.offset, 0, limit=1), 5.0)
            await api.close()
        redaction.forget(self._token)

    def _started(self) -> BotApi:
        if self._api is None:
            raise PlatformError("Telegram platform is not started (or closed)", permanent=True)
        return self._api

    def _remember_query(self, key: str, query_id: str) -> None:
        self._queries[key] = query_id
        while len(self._queries) > _QUERIES_KEPT:
            self._queries.popitem(last=False)
