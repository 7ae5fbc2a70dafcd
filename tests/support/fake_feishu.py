"""A fake Feishu: a real HTTP and websocket server (aiohttp.web) on 127.0.0.1, on its own
event loop in a background thread, which `FeishuPlatform` and `FeishuRegistrar` reach exactly
as they reach Feishu (its base URL stands for both `open.feishu.cn` and `accounts.feishu.cn`).

Routes
    POST  /open-apis/auth/v3/tenant_access_token/internal  `t-<n>` for `app_id`/`app_secret`
          (else HTTP 400 code 10014), expiring in `fake.token_expire` s
    GET   /open-apis/bot/v3/info                           `{"bot": {"open_id": bot_open_id}}`
    POST  /open-apis/im/v1/messages?receive_id_type=chat_id  `om_<n>`; the card is checked
    PATCH /open-apis/im/v1/messages/{id}                   the card is checked
    POST  /callback/ws/endpoint                            the SDK's endpoint discovery
    GET   /ws                                              the long connection (pbbp2 frames)
    POST  /oauth/v1/app/registration, /lark/oauth/v1/app/registration  the QR device flow

Every OpenAPI call needs a token it issued and not revoked (`fake.revoke()`: code 99991663).
`fake.fail(status, body, headers)` makes the next message create or patch answer that.
Recorded: `fake.tokens` (token requests), `fake.sent` and `fake.patched` (chat or message id,
parsed card), `fake.acks` (the SDK's answers to pushed frames: message id → JSON, `data`
decoded), `fake.requests` (method, path, headers).

Long connection: `fake.push(payload)` sends one event (the JSON Feishu would) as a DATA frame
(`type: event`) built with the SDK's own `pbbp2.Frame`, to every connected client, and
`fake.ack(message_id)` waits for that frame's answer. `fake.drop()` closes the connections.

Registration: `fake.begin` is the begin answer; `fake.polls` a list of poll answers
(`(status, json)`), used in order, then `authorization_pending` forever; `fake.polled` the
forms received.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import WSMsgType, web

BOUND = 20.0


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeFeishu:
    app_id: str = "cli_test"
    app_secret: str = "s3cr3t-app-secret-value"
    bot_open_id: str = "ou_bot"
    token_expire: int = 7200
    url: str = ""
    tokens: list[Recorded] = field(default_factory=list)
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    patched: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    acks: dict[str, dict[str, Any]] = field(default_factory=dict)
    begin: dict[str, Any] = field(default_factory=dict)
    polls: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    polled: list[dict[str, str]] = field(default_factory=list)
    connections: int = 0
    _issued: set[str] = field(default_factory=set)
    _failures: list[tuple[int, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    _sockets: list[web.WebSocketResponse] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _loop: asyncio.AbstractEventLoop | None = None
    _acked: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    @contextlib.contextmanager
    def running(cls, **kwargs: Any) -> Iterator[Self]:
        fake = cls(**kwargs)
        started = threading.Event()
        stop: list[asyncio.Event] = []

        async def serve() -> None:
            fake._loop = asyncio.get_running_loop()
            runner = web.AppRunner(fake._app())
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            fake.url = f"http://127.0.0.1:{port}"
            stop.append(asyncio.Event())
            started.set()
            await stop[0].wait()
            for ws in list(fake._sockets):
                await ws.close()
            await runner.cleanup()

        thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        thread.start()
        assert started.wait(BOUND)
        try:
            yield fake
        finally:
            assert fake._loop is not None
            fake._loop.call_soon_threadsafe(stop[0].set)
            thread.join(BOUND)

    # ------------------------------------------------------------------ test controls

    def revoke(self) -> None:
        self._issued.clear()

    def fail(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._failures.append((status, body, headers or {}))

    def push(self, payload: dict[str, Any], message_id: str | None = None) -> str:
        """Send `payload` as one event frame to every client; the frame's message id."""
        frame_id = message_id or f"frame-{next(self._ids)}"
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._push(payload, frame_id), self._loop)
        future.result(BOUND)
        return frame_id

    def ack(self, frame_id: str, timeout: float = BOUND) -> dict[str, Any]:
        """The client's answer to the frame `frame_id` (waits for it)."""
        with self._acked:
            assert self._acked.wait_for(lambda: frame_id in self.acks, timeout), frame_id
            return self.acks[frame_id]

    def wait_connected(self, count: int = 1) -> None:
        deadline = time.monotonic() + BOUND
        while self.connections < count:
            assert time.monotonic() < deadline, "no long connection"
            time.sleep(0.02)

    def drop(self) -> None:
        assert self._loop is not None

        async def close() -> None:
            for ws in list(self._sockets):
                await ws.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(BOUND)

    # ------------------------------------------------------------------ the server

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/open-apis/auth/v3/tenant_access_token/internal", self._token)
        app.router.add_get("/open-apis/bot/v3/info", self._bot_info)
        app.router.add_post("/open-apis/im/v1/messages", self._create)
        app.router.add_patch("/open-apis/im/v1/messages/{id}", self._patch)
        app.router.add_post("/callback/ws/endpoint", self._endpoint)
        app.router.add_get("/ws", self._ws)
        app.router.add_post("/oauth/v1/app/registration", self._registration)
        app.router.add_post("/lark/oauth/v1/app/registration", self._registration)
        return app

    async def _record(self, request: web.Request) -> Recorded:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode()
        rec = Recorded(request.method, request.path_qs, dict(request.headers), body)
        self.requests.append(rec)
        return rec

    async def _token(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        self.tokens.append(rec)
        body = rec.body or {}
        if body.get("app_id") != self.app_id or body.get("app_secret") != self.app_secret:
            return web.json_response({"code": 10014, "msg": "app secret invalid"}, status=400)
        token = f"t-{next(self._ids)}"
        self._issued.add(token)
        return web.json_response(
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": self.token_expire}
        )

    def _authorized(self, rec: Recorded) -> web.Response | None:
        auth = rec.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self._issued:
            return web.json_response(
                {"code": 99991663, "msg": "Invalid access token for authorization."}, status=400
            )
        return None

    async def _bot_info(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        refused = self._authorized(rec)
        return refused or web.json_response(
            {"code": 0, "msg": "ok", "bot": {"open_id": self.bot_open_id, "app_name": "Foya"}}
        )

    def _failure(self) -> web.Response | None:
        if not self._failures:
            return None
        status, body, headers = self._failures.pop(0)
        return web.json_response(body, status=status, headers=headers)

    async def _create(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        refused = self._authorized(rec) or self._failure()
        if refused is not None:
            return refused
        assert request.query.get("receive_id_type") == "chat_id", request.query
        body = rec.body
        assert body["msg_type"] == "interactive", body
        card = check_card(body["content"])
        message_id = f"om_{next(self._ids)}"
        self.sent.append((body["receive_id"], card))
        return web.json_response({"code": 0, "msg": "ok", "data": {"message_id": message_id}})

    async def _patch(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        refused = self._authorized(rec) or self._failure()
        if refused is not None:
            return refused
        card = check_card(rec.body["content"])
        self.patched.append((request.match_info["id"], card))
        return web.json_response({"code": 0, "msg": "ok", "data": {}})

    async def _endpoint(self, request: web.Request) -> web.Response:
        rec = await self._record(request)
        body = rec.body or {}
        if body.get("AppID") != self.app_id or body.get("AppSecret") != self.app_secret:
            return web.json_response({"code": 1000040345, "msg": "invalid app credentials"})
        host = self.url.removeprefix("http://")
        config = {"ReconnectCount": 2, "ReconnectInterval": 1, "ReconnectNonce": 0}
        return web.json_response(
            {
                "code": 0,
                "msg": "ok",
                "data": {
                    "URL": f"ws://{host}/ws?device_id=dev1&service_id=7&access_key=ak-secret",
                    "ClientConfig": {**config, "PingInterval": 120},
                },
            }
        )

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        Frame = _frame_class()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        self.connections += 1
        try:
            async for msg in ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                frame = Frame()
                frame.ParseFromString(msg.data)
                headers = {h.key: h.value for h in frame.headers}
                if frame.method == 0 and headers.get("type") == "ping":
                    pong = Frame(SeqID=0, LogID=0, service=frame.service, method=0)
                    pong.headers.add(key="type", value="pong")
                    await ws.send_bytes(pong.SerializeToString())
                elif frame.method == 1:
                    answer = json.loads(frame.payload)
                    if answer.get("data"):
                        answer["data"] = json.loads(base64.b64decode(answer["data"]))
                    with self._acked:
                        self.acks[headers["message_id"]] = answer
                        self._acked.notify_all()
        finally:
            self._sockets.remove(ws)
        return ws

    async def _push(self, payload: dict[str, Any], frame_id: str) -> None:
        Frame = _frame_class()
        frame = Frame(SeqID=1, LogID=1, service=7, method=1, payload=json.dumps(payload).encode())
        for key, value in (
            ("type", "event"),
            ("message_id", frame_id),
            ("trace_id", "trace-" + frame_id),
            ("sum", "1"),
            ("seq", "0"),
        ):
            frame.headers.add(key=key, value=value)
        assert self._sockets, "no client connected"
        for ws in list(self._sockets):
            await ws.send_bytes(frame.SerializeToString())

    async def _registration(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        self.requests.append(Recorded(request.method, request.path, dict(request.headers), form))
        if form.get("action") == "begin":
            return web.json_response(self.begin)
        self.polled.append({**form, "path": request.path})
        if self.polls:
            status, body = self.polls.pop(0)
            return web.json_response(body, status=status)
        return web.json_response({"error": "authorization_pending"}, status=400)


def _frame_class() -> Any:
    """The SDK's own `pbbp2.Frame` (imported on first use: the SDK takes seconds)."""
    from lark_oapi.ws.pb.pbbp2_pb2 import Frame  # type: ignore[import-untyped]

    return Frame


def check_card(content: str) -> dict[str, Any]:
    """The card of a message `content`, after checking it has the shape Feishu takes."""
    assert len(content.encode()) <= 30_000, "card over 30 KB"
    card: dict[str, Any] = json.loads(content)
    assert card["config"]["update_multi"] is True
    elements = card["elements"]
    assert elements, "a card needs elements"
    for element in elements:
        tag = element["tag"]
        if tag == "markdown":
            assert isinstance(element["content"], str) and element["content"]
        elif tag == "note":
            assert [e["tag"] for e in element["elements"]] == ["plain_text"]
        elif tag == "action":
            for button in element["actions"]:
                assert button["tag"] == "button"
                assert button["text"]["tag"] == "plain_text"
                assert isinstance(button["value"]["data"], str)
        else:
            raise AssertionError(f"unexpected card element {tag}")
    return card


def message_event(
    text: str,
    *,
    event_id: str,
    chat: str = "oc_chat",
    chat_type: str = "p2p",
    sender: str = "ou_alice",
    sender_type: str = "user",
    mentions: list[dict[str, Any]] | None = None,
    message_type: str = "text",
    content: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An `im.message.receive_v1` payload as Feishu sends it."""
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "event_type": "im.message.receive_v1",
            "create_time": str(int(time.time() * 1000)),
            "token": "",
            "app_id": "cli_test",
            "tenant_key": "tk",
        },
        "event": {
            "sender": {
                "sender_id": {"open_id": sender, "union_id": "on_x", "user_id": "u1"},
                "sender_type": sender_type,
                "tenant_key": "tk",
            },
            "message": {
                "message_id": f"om_in_{event_id}",
                "chat_id": chat,
                "chat_type": chat_type,
                "message_type": message_type,
                "content": json.dumps(content if content is not None else {"text": text}),
                "mentions": mentions or [],
            },
        },
    }


def card_event(
    data: str, *, event_id: str, chat: str = "oc_chat", message: str = "om_1"
) -> dict[str, Any]:
    """A `card.action.trigger` payload (a button press) as Feishu sends it."""
    return {
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "card.action.trigger", "token": ""},
        "event": {
            "operator": {"open_id": "ou_alice", "user_id": "u1"},
            "token": "c-token",
            "action": {"tag": "button", "value": {"data": data}},
            "context": {"open_message_id": message, "open_chat_id": chat},
        },
    }


def mention(key: str, open_id: str, name: str) -> dict[str, Any]:
    return {"key": key, "id": {"open_id": open_id, "union_id": "", "user_id": ""}, "name": name}
