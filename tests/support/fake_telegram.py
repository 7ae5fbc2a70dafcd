"""A fake Telegram Bot API server: real HTTP on 127.0.0.1 (stdlib `ThreadingHTTPServer` in a
thread), spoken to by python-telegram-bot's ordinary httpx client.

Routes: `POST /bot<token>/<method>` for getMe, getUpdates, sendMessage, editMessageText and
answerCallbackQuery; form or JSON bodies (the library sends forms, with lists and objects as
JSON text); answers `{"ok": true, "result": …}` or `{"ok": false, "error_code", "description"}`.

    with FakeTelegram.running() as tg:             # token "123:secret" is valid by default
        tg.url                                     # the api_url to give the platform
        tg.push_message(chat=5, text="hi")          # → its update id
        tg.push_button(chat=5, message_id=1, data="yes")
        tg.fail("getUpdates", 502)                  # the next getUpdates answers a 502
        tg.fail("sendMessage", 429, retry_after=1)  # a flood-control answer
        tg.revoke(token)                            # every call with it is a 401 from now on
        tg.calls("sendMessage")                     # recorded calls (params parsed)

Telegram's rules, enforced: updates below a getUpdates `offset` are confirmed and dropped, and
without one the call waits up to its `timeout` for an update; `parse_mode=HTML` texts are
parsed as Telegram does (known tags, balanced, `&` only in an entity, a bare `<` refused) with
its "Bad Request: can't parse entities: …" text; the text after parsing is 1-4096 UTF-16
units; an edit to the same text and markup is "message is not modified"; callback data is at
most 64 bytes.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

TOKEN = "123:secret-token-abcdef"
USERNAME = "foya_bot"
_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "pre", "a",
         "span", "tg-spoiler", "blockquote", "tg-emoji"}  # fmt: skip
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);")
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^<>]*)?)>")


class BadRequest(Exception):
    """An answer of 400 with Telegram's description."""


@dataclass
class Call:
    method: str
    token: str
    params: dict[str, Any]


def visible(text: str) -> str:
    """Telegram's parse of an HTML text: the text it shows; `BadRequest` if it is invalid."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        at = _Offset(text, i)
        if char == "<":
            tag = _TAG.match(text, i)
            if tag is None:
                raise _unparsable(f"unsupported start tag at byte offset {at}")
            closing, name = tag.group(1) == "/", tag.group(2).lower()
            if name not in _TAGS:
                raise _unparsable(f'unsupported start tag "{name}" at byte offset {at}')
            if not closing:
                stack.append(name)
            elif not stack or stack.pop() != name:
                raise _unparsable(f'unmatched end tag at byte offset {at}, found "</{name}>"')
            i = tag.end()
        elif char == "&":
            entity = _ENTITY.match(text, i)
            if entity is None:
                raise _unparsable(f"character entity expected at byte offset {at}")
            out.append(html.unescape(entity.group(0)))
            i = entity.end()
        else:
            out.append(char)
            i += 1
    if stack:
        raise _unparsable(f'can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


class _Offset:
    """A byte offset, worked out only when an error message shows it."""

    def __init__(self, text: str, index: int) -> None:
        self.text, self.index = text, index

    def __format__(self, spec: str) -> str:
        return str(len(self.text[: self.index].encode()))


def _unparsable(reason: str) -> BadRequest:
    return BadRequest(f"Bad Request: can't parse entities: {reason}")


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class FakeTelegram:
    """The server and its state; every method is safe to call from the test's thread."""

    def __init__(self) -> None:
        self.tokens = {TOKEN}
        self._lock = threading.Condition()
        self._updates: list[dict[str, Any]] = []
        self._ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._failures: dict[str, list[tuple[int, str, float | None]]] = {}
        self._messages: dict[tuple[str, int], tuple[str, Any]] = {}
        self._calls: list[Call] = []
        self._stopping = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[Self]:
        fake = cls()
        fake._thread.start()
        try:
            yield fake
        finally:
            fake.stop()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------------ scripting

    def push_message(
        self, chat: int, text: str, *, kind: str = "private", user: int = 7,
        username: str = "alice", caption: bool = False,
    ) -> int:  # fmt: skip
        """Queue a message update; its update id."""
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "date": int(time.time()),
            "chat": {"id": chat, "type": kind, **({"title": "Team"} if kind != "private" else {})},
            "from": {"id": user, "is_bot": False, "first_name": "Alice", "username": username},
        }  # fmt: skip
        message["caption" if caption else "text"] = text
        return self._push({"message": message})

    def push_button(self, chat: int, message_id: int, data: str, *, user: int = 7) -> int:
        """Queue a callback query (a press under our message `message_id`); its update id."""
        query = {
            "id": f"q{next(self._ids)}", "chat_instance": "ci", "data": data,
            "from": {"id": user, "is_bot": False, "first_name": "Alice", "username": "alice"},
            "message": {"message_id": message_id, "date": int(time.time()),
                        "chat": {"id": chat, "type": "private"}, "text": "question"},
        }  # fmt: skip
        return self._push({"callback_query": query})

    def fail(
        self, method: str, status: int, description: str = "", *,
        retry_after: float | None = None, times: int = 1,
    ) -> None:  # fmt: skip
        """The next `times` calls of `method` answer `status` (429 with `retry_after`)."""
        with self._lock:
            entry = (status, description, retry_after)
            self._failures.setdefault(method, []).extend([entry] * times)

    def revoke(self, token: str) -> None:
        with self._lock:
            self.tokens.discard(token)

    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def pending(self) -> list[int]:
        """Ids of the updates not confirmed yet."""
        with self._lock:
            return [u["update_id"] for u in self._updates]

    def text_of(self, chat: int, message_id: int) -> str:
        with self._lock:
            return self._messages[(str(chat), message_id)][0]

    def messages(self, chat: int) -> list[tuple[int, str, Any]]:
        """(message id, text as sent, reply markup or None) of each message in `chat`, in
        the order they were sent, as they read now."""
        with self._lock:
            mine = [(key[1], value) for key, value in self._messages.items() if key[0] == str(chat)]
        return [(mid, text, markup) for mid, (text, markup) in sorted(mine)]

    def _push(self, update: dict[str, Any]) -> int:
        with self._lock:
            update["update_id"] = next(self._ids)
            self._updates.append(update)
            self._lock.notify_all()
            return int(update["update_id"])

    # ------------------------------------------------------------------------- the API

    def answer(self, token: str, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            self._calls.append(Call(method, token, params))
            if token not in self.tokens:
                return 401, _error(401, "Unauthorized")
            failures = self._failures.get(method)
            if failures:
                status, description, retry_after = failures.pop(0)
                body = _error(status, description or f"fake failure {status}")
                if retry_after is not None:
                    body["description"] = description or "Too Many Requests: retry after"
                    body["parameters"] = {"retry_after": retry_after}
                return status, body
        handler = getattr(self, "_" + re.sub(r"(?<!^)([A-Z])", r"_\1", method).lower(), None)
        if handler is None:
            return 404, _error(404, "Not Found")
        try:
            return 200, {"ok": True, "result": handler(params)}
        except BadRequest as error:
            return 400, _error(400, str(error))

    def _get_me(self, params: dict[str, Any]) -> Any:
        return {"id": 42, "is_bot": True, "first_name": "Foya", "username": USERNAME}

    def _get_updates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        until = time.monotonic() + float(params.get("timeout") or 0)
        with self._lock:
            if offset:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            while not self._updates and not self._stopping:
                left = until - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(left)
            return list(self._updates[:limit])

    def _send_message(self, params: dict[str, Any]) -> Any:
        shown, markup = self._checked(params)
        chat = str(params["chat_id"])
        with self._lock:
            message_id = next(self._message_ids)
            self._messages[(chat, message_id)] = (params["text"], markup)
        return _message(chat, message_id, shown)

    def _edit_message_text(self, params: dict[str, Any]) -> Any:
        shown, markup = self._checked(params)
        key = (str(params["chat_id"]), int(params["message_id"]))
        with self._lock:
            if key not in self._messages:
                raise BadRequest("Bad Request: message to edit not found")
            if self._messages[key] == (params["text"], markup):
                raise BadRequest(
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup "
                    "of the message"
                )
            self._messages[key] = (params["text"], markup)
        return _message(key[0], key[1], shown)

    def _answer_callback_query(self, params: dict[str, Any]) -> Any:
        return True

    @staticmethod
    def _checked(params: dict[str, Any]) -> tuple[str, Any]:
        text = str(params.get("text", ""))
        shown = visible(text) if params.get("parse_mode") == "HTML" else text
        if not shown.strip():
            raise BadRequest("Bad Request: message text is empty")
        if utf16_units(shown.strip()) > 4096:
            raise BadRequest("Bad Request: message is too long")
        markup = params.get("reply_markup")
        for row in (markup or {}).get("inline_keyboard", []):
            for button in row:
                if len(str(button.get("callback_data", "")).encode()) > 64:
                    raise BadRequest("Bad Request: BUTTON_DATA_INVALID")
        return shown, markup


def _message(chat: str, message_id: int, text: str) -> dict[str, Any]:
    return {
        "message_id": message_id, "date": int(time.time()), "text": text,
        "chat": {"id": int(chat), "type": "private"},
    }  # fmt: skip


def _error(status: int, description: str) -> dict[str, Any]:
    return {"ok": False, "error_code": status, "description": description}


def _params(content_type: str, body: bytes) -> dict[str, Any]:
    if content_type.startswith("application/json"):
        loaded: dict[str, Any] = json.loads(body or b"{}")
        return loaded
    form = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
    params: dict[str, Any] = {}
    for key, value in form.items():
        # The library sends lists and objects as JSON text in a form field.
        if value[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                params[key] = json.loads(value)
                continue
        params[key] = value
    return params


def _handler(fake: FakeTelegram) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            match = re.fullmatch(r"/bot([^/]+)/(\w+)", self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if match is None:
                status, answer = 404, _error(404, "Not Found")
            else:
                params = _params(self.headers.get("Content-Type", ""), body)
                status, answer = fake.answer(match.group(1), match.group(2), params)
            data = json.dumps(answer).encode()
            # A poll still waiting when its client stopped (a kernel shutting down) has no one
            # to answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        do_GET = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test's output is the calls recorded

    return Handler
