"""lark-oapi's long connection (`lark_oapi.ws.Client`): events pushed by Feishu over a
websocket, on a thread and an event loop of its own, bridged to ours by `deliver`.

How the SDK connects: it POSTs `{"AppID", "AppSecret"}` to `{domain}/callback/ws/endpoint`
(blocking `requests`), gets a `ws(s)://…?device_id=…&service_id=…` URL and a client config
(ping interval, reconnect count and interval), opens the websocket and speaks protobuf
`pbbp2.Frame`s: DATA frames carry events (split over several frames when large), each answered
by the same frame with a JSON `{"code": 200|500, "data": base64(<handler's return>)}`;
CONTROL frames are its pings and the server's pongs.

Why a thread of our own: the SDK module keeps one global `loop` (captured when it is first
imported) for every task it creates, blocks on `requests` inside its coroutines and calls our
handlers synchronously. So each connection runs `asyncio.run` on its own thread, with the
module's `loop` replaced by `_ThreadLoop` (the loop running in the calling thread), and
`close()` cancels every task of that loop, so nothing of it outlives the platform.

`deliver(kind, payload)` runs on that thread: kind `message` or `card`, payload the event's
JSON; its return (a card action's answer) goes back to Feishu; if it raises, the SDK answers
500 and Feishu delivers the event again later.

The SDK (5 s to import) is imported here, in the thread, only when a connection starts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from app.kernel.channels.feishu.events import MESSAGE_EVENT
from app.kernel.channels.platform import PlatformError
from app.kernel.channels.redaction import redact, watch

Deliver = Callable[[str, dict[str, Any]], dict[str, Any] | None]
GaveUp = Callable[[PlatformError], None]
_install_lock = threading.Lock()


class _ThreadLoop:
    """Stands in for the SDK's module-global `loop`: whatever loop runs in the calling
    thread, else the SDK's own (for its blocking `Client.start()`, which we never call)."""

    def __init__(self, fallback: object) -> None:
        self._fallback = fallback

    def __getattr__(self, name: str) -> Any:
        try:
            loop: object = asyncio.get_running_loop()
        except RuntimeError:
            loop = self._fallback
        return getattr(loop, name)


def _sdk() -> Any:
    """The SDK's ws client module, with its global loop replaced (once)."""
    lark = importlib.import_module("lark_oapi")
    module: Any = importlib.import_module("lark_oapi.ws.client")
    with _install_lock:
        if not isinstance(module.loop, _ThreadLoop):
            module.loop = _ThreadLoop(module.loop)
    _quiet_sdk_logger()
    module.lark = lark
    return module


def _quiet_sdk_logger() -> None:
    """Route the SDK's `Lark` logger through ours, redacted, at WARNING and above: it comes
    with a stdout handler of its own, which would break our one-format logs."""
    logger = logging.getLogger("Lark")
    for handler in list(logger.handlers):
        if isinstance(handler, logging.StreamHandler):
            logger.removeHandler(handler)
    logger.setLevel(logging.WARNING)
    # websockets logs the handshake's request line (with the URL's credentials) at DEBUG.
    watch("Lark", "websockets.client")


class LongConnection:
    """One app's long connection; `start` returns once it is connected."""

    def __init__(
        self,
        app_id: str,
        app_secret: str,
        domain: str,
        deliver: Deliver,
        gave_up: GaveUp,
        *,
        connect_timeout: float = 30.0,
    ) -> None:
        self._app_id, self._app_secret, self._domain = app_id, app_secret, domain.rstrip("/")
        self._deliver, self._gave_up = deliver, gave_up
        self._connect_timeout = connect_timeout
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._closed = False

    async def start(self) -> None:
        """Connect; a refused app raises a permanent `PlatformError`, anything else a
        transient one."""
        self._thread = threading.Thread(target=self._run, name="feishu-ws", daemon=True)
        self._thread.start()
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._ready), self._connect_timeout)
        except TimeoutError:
            await self.close()
            raise PlatformError("Feishu long connection: no answer in time") from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Disconnect and end the thread; idempotent."""
        self._closed = True
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None and self._thread is not threading.current_thread():
            await asyncio.to_thread(self._thread.join, 10.0)

    def _run(self) -> None:
        try:
            sdk = _sdk()
        except Exception as exc:  # an SDK that cannot be imported is not a retryable state
            self._settle(PlatformError(f"lark-oapi: {type(exc).__name__}", permanent=True))
            return
        asyncio.run(self._main(sdk))

    async def _main(self, sdk: Any) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        if self._closed:
            self._settle(PlatformError("Feishu long connection: closed"))
            return
        client = self._client(sdk)
        try:
            await client._connect()
        except Exception as exc:
            self._settle(_mapped(sdk, exc))
            return
        self._settle(None)
        pinging = asyncio.create_task(client._ping_loop())
        await self._stop.wait()
        client._auto_reconnect = False
        pinging.cancel()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await client._disconnect()

    def _client(self, sdk: Any) -> Any:
        lark, deliver, gave_up = sdk.lark, self._deliver, self._gave_up

        def as_dict(event: Any) -> dict[str, Any]:
            loaded: dict[str, Any] = json.loads(lark.JSON.marshal(event))
            return loaded

        handler = (
            lark.EventDispatcherHandler.builder("", "")
            # The raw event (a dict), not the SDK's typed model: one shape for our parser.
            .register_p2_customized_event(MESSAGE_EVENT, lambda e: deliver("message", as_dict(e)))
            .register_p2_card_action_trigger(lambda e: deliver("card", as_dict(e)) or {})
            .build()
        )

        class _Client(sdk.Client):  # type: ignore[misc]
            async def _reconnect(self) -> None:
                try:
                    await super()._reconnect()
                except Exception as exc:  # it stopped retrying: the runtime must hear of it
                    gave_up(_mapped(sdk, exc))
                    raise

        return _Client(
            self._app_id,
            self._app_secret,
            log_level=lark.LogLevel.WARNING,
            event_handler=handler,
            domain=self._domain,
            auto_reconnect=True,
            source="foya",
        )

    def _settle(self, error: PlatformError | None) -> None:
        if self._ready.done():
            return
        if error is None:
            self._ready.set_result(None)
        else:
            self._ready.set_exception(error)


def _mapped(sdk: Any, exc: Exception) -> PlatformError:
    """The SDK's failure as ours: a `ClientException` (the app refused: bad id or secret,
    too many connections) is permanent, anything else transient."""
    text = f"Feishu long connection: {type(exc).__name__}: {redact(str(exc))}"
    return PlatformError(text, permanent=isinstance(exc, sdk.ClientException))
