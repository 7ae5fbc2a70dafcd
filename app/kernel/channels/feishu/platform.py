"""`FeishuPlatform`: one Feishu (or Lark) bot as a channel `Platform`.

In: the long connection (`longconn`) pushes events on its thread; `_deliver` turns each into
an `Inbound` (`events`), queues it on our loop (`call_soon_threadsafe`) and holds Feishu's
acknowledgement until the runtime's `ack` (at most `ack_wait` s; past it the SDK answers 500
and Feishu delivers the event again, by which nothing recorded is lost). Keys already acked
are answered at once and not queued again (the last 10,000). A card action waits at most
`answer_wait` s for `answer_button`, whose notice goes back as the callback's toast (Feishu
wants the answer within 3 s; later, the press is still delivered, with no toast).

Out: interactive cards (`cards`) created and patched through `api`. `edit_interval` 0.5 s:
Feishu allows 5 updates a second per message, and the app's 50 calls a second are shared by
all its chats.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from app.kernel.channels.feishu import cards
from app.kernel.channels.feishu.api import FeishuApi, Transport
from app.kernel.channels.feishu.events import card_inbound, message_inbound
from app.kernel.channels.feishu.longconn import LongConnection
from app.kernel.channels.platform import ChatKind, Inbound, Outbound, PlatformError

DEFAULT_API_URL = "https://open.feishu.cn"
_REMEMBERED = 10_000
_SEND_PATH = "/open-apis/im/v1/messages"


@dataclass
class _Held:
    """An event Feishu waits on: its ack, then (a button) its notice."""

    acked: threading.Event = field(default_factory=threading.Event)
    answered: threading.Event = field(default_factory=threading.Event)
    notice: str = ""


class _NotRecorded(Exception):
    """Not acked in time: the SDK answers 500, so Feishu delivers it again."""


class FeishuPlatform:
    """One running Feishu bot (an internal app's id and secret)."""

    edit_interval: float = 0.5
    max_text: int = cards.MAX_TEXT

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        api_url: str = DEFAULT_API_URL,
        *,
        ack_wait: float = 2.0,
        answer_wait: float = 2.0,
        connect_timeout: float = 30.0,
        transport: Transport | None = None,
    ) -> None:
        self._app_id, self._app_secret = app_id, app_secret
        self._api_url = api_url.rstrip("/")
        self._api = FeishuApi(self._api_url, app_id, app_secret, transport=transport)
        self._ack_wait, self._answer_wait = ack_wait, answer_wait
        self._connect_timeout = connect_timeout
        self._queue: asyncio.Queue[Inbound | PlatformError] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._conn: LongConnection | None = None
        self._bot_open_id = ""
        self._lock = threading.Lock()  # what the SDK thread and our loop share, below
        self._held: dict[str, _Held] = {}
        self._done: OrderedDict[str, None] = OrderedDict()
        self._kinds: OrderedDict[str, ChatKind] = OrderedDict()
        self._closed = False

    @property
    def bot_open_id(self) -> str:
        """The bot's own `open_id` (known once started)."""
        return self._bot_open_id

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._api.token()
        info = await self._api.call("GET", "/open-apis/bot/v3/info")
        bot = info.get("bot")
        self._bot_open_id = str(bot.get("open_id") or "") if isinstance(bot, dict) else ""
        self._conn = LongConnection(
            self._app_id,
            self._app_secret,
            self._api_url,
            self._deliver,
            self._gave_up,
            connect_timeout=self._connect_timeout,
        )
        await self._conn.start()

    async def inbound(self) -> AsyncIterator[Inbound]:
        while True:
            item = await self._queue.get()
            if isinstance(item, PlatformError):
                raise item
            yield item

    async def ack(self, item: Inbound) -> None:
        with self._lock:
            self._remember(self._done, item.key, None)
            # A button's press stays held until `answer_button`, for its notice.
            held = self._held.get(item.key) if item.button else self._held.pop(item.key, None)
        if held is not None:
            held.acked.set()

    async def send(self, chat: str, message: Outbound) -> list[str]:
        pieces = cards.split(message.text, self.max_text)
        ids: list[str] = []
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            card = cards.card(
                piece, message.status if n == 0 else "", message.buttons if last else ()
            )
            body = {"receive_id": chat, "msg_type": "interactive", "content": cards.content(card)}
            answer = await self._api.call(
                "POST", _SEND_PATH, params={"receive_id_type": "chat_id"}, json=body
            )
            data = answer.get("data")
            message_id = data.get("message_id") if isinstance(data, dict) else None
            if not isinstance(message_id, str) or not message_id:
                raise PlatformError("Feishu send: no message_id in the answer")
            ids.append(message_id)
        return ids

    async def edit(self, chat: str, message_id: str, message: Outbound) -> None:
        card = cards.card(cards.fit(message.text, self.max_text), message.status, message.buttons)
        await self._api.call(
            "PATCH", f"{_SEND_PATH}/{message_id}", json={"content": cards.content(card)}
        )

    async def answer_button(self, item: Inbound, notice: str) -> None:
        with self._lock:
            held = self._held.pop(item.key, None)
        if held is not None:
            held.notice = notice
            held.answered.set()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for h in held:  # release the SDK thread at once
            h.acked.set()
            h.answered.set()
        if self._conn is not None:
            await self._conn.close()
        await self._api.aclose()

    # ---------------------------------------------------------------- the SDK's thread

    def _deliver(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """An event from the long connection (on its thread); the card action's answer."""
        item = self._parse(kind, payload)
        if item is None:
            return None
        with self._lock:
            if item.key in self._done and item.key not in self._held:
                return None  # recorded before: Feishu may forget it
            held = self._held.get(item.key)
            if held is None:
                held = self._held[item.key] = _Held()
                self._post(item)
        if item.button is None:
            if not held.acked.wait(self._ack_wait) and not self._closed:
                raise _NotRecorded(item.key)
            return None
        answered = held.answered.wait(self._answer_wait)
        with self._lock:
            self._held.pop(item.key, None)
        if answered and held.notice:
            return {"toast": {"type": "info", "content": held.notice}}
        return {}

    def _parse(self, kind: str, payload: dict[str, Any]) -> Inbound | None:
        if kind == "message":
            item = message_inbound(payload, self._bot_open_id)
            if item is not None:
                with self._lock:
                    self._remember(self._kinds, item.chat, item.chat_kind)
            return item
        if kind == "card":
            with self._lock:
                kinds = dict(self._kinds)
            return card_inbound(payload, kinds)
        return None

    def _gave_up(self, error: PlatformError) -> None:
        self._post(error)

    def _post(self, item: Inbound | PlatformError) -> None:
        loop = self._loop
        if loop is None or self._closed:
            return
        with contextlib.suppress(RuntimeError):  # our loop is gone: the kernel is stopping
            loop.call_soon_threadsafe(self._queue.put_nowait, item)

    @staticmethod
    def _remember(table: OrderedDict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > _REMEMBERED:
            table.popitem(last=False)
