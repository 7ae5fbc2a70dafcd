"""A fake OpenAI-compatible model provider, plus the harness the agent-turn tests share.

The fake is a real HTTP server (hypercorn, raw ASGI) on 127.0.0.1, on a port the OS picked, run
on its own event loop in a background thread. The kernel under test talks to it through its
ordinary `openai` client, exactly as it would talk to a real provider.

Routes
    POST /v1/chat/completions   answers with the next script queued for the request's `model`
    GET  /v1/models             `{"object": "list", "data": [{"id": ...}, ...]}` of `fake.models`
                                (or HTTP `fake.models_error` when that is set)
    POST /v1/images/generations answers with the next image script queued for the request's
    POST /v1/images/edits       `model` (`fake.push_image`); an edit's multipart form is recorded
                                as `{"model", "prompt", "size", …, "image": [bytes, …]}`
    GET  /files/<name>          the bytes of an image answered by link (`image(png, url=True)`)

Scripting: two FIFOs of scripts per model name, one for streaming requests (agent steps,
`fake.push`) and one for non-streaming ones (guardian, compaction summaries, titles,
`fake.push_completion`). Give each test session its own model name so tests sharing a kernel
and a fake never consume each other's scripts::

    with FakeProvider.running() as fake:          # or the module fixture of each test file
        fake.push("m1", answer("Hello there"))     # text deltas + usage chunk + finish "stop"
        fake.push("m1", tools(call("c1", "bash", {"command": "ls"})))  # finish "tool_calls"
        fake.push("m1", [text("a"), sleep(0.2), text("b"), finish("stop")])  # by hand
        fake.push("m1", http_error(429, headers={"retry-after": "0"}))
        fake.push_completion("m1", reply("ALLOW"))  # the next non-streaming answer (guardian)
        fake.chats("m1")                           # recorded chat requests for m1, in order
        fake.chats("m1", streaming=False)          # only the non-streaming ones
        fake.push_image("img", image(png))         # the next images API answer for model img
        fake.push_image("img", [wait(gate), *image(png, url=True)])  # held, then by link
        fake.push_image("img", http_error(400, "content policy"))
        fake.images("img")                         # recorded images API requests for img

A script is a list of actions, played in order:

- `chunk(delta, finish_reason)`: one `chat.completion.chunk` with `choices[0].delta`; shortcuts
  `text(s)`, `reasoning(s)` (`reasoning_content`), `tool_call(index, id, name, arguments)` (a
  fragment: id and name come once, arguments in pieces) and `finish(reason)`.
- `usage(prompt, completion, cached)`: a choices-less chunk carrying `usage`, as sent with
  `stream_options.include_usage`.
- `sleep(seconds)`: pause between chunks (a slow stream); cut short if the client goes away.
- `wait(gate)`: pause until the test opens `gate` (a `threading.Event`, see `fake.gate()`) or
  the client goes away.
- `drop()`: close the connection mid-stream (no terminating chunk, no `[DONE]`).
- `garbage(data)`: raw bytes on the stream (e.g. a `data:` line that is not JSON).
- `http_error(status, message, code, headers)`: the whole answer is an HTTP error with an OpenAI
  error body; must be the script's only action.
- `reply(text)`: a non-streaming `chat.completion`; as the only action.

Builders: `answer(text)` (text split into word deltas, finish "stop", then the usage chunk last,
as OpenAI sends it), `tools(*calls)` (each call's id and name in one chunk, its JSON arguments
in three fragments, finish "tool_calls", usage), `call(id, name, arguments)`.

Started by a pytest fixture of each test module (`with FakeProvider.running() as fake: yield
fake`, or `agent_kernel(...)` below, which also starts a kernel); `stop()` opens every gate and
shuts the server down.

A streaming script pushed with `push_completion` is answered with its text joined, and a `reply`
pushed with `push` is streamed as one delta. A request for a model with no script left in its
queue gets HTTP 500 `fake provider: no … script for model …`. Every request is recorded
(`fake.requests`: path, lower-cased headers, parsed JSON body), including the `Authorization`
header, and `Recorded.disconnected` tells whether the client hung up before the end.

The harness part (bottom of the file) starts a real `foya serve` on a Unix socket with a
connection to the fake, and offers session/turn/event helpers on top of `streams_helpers`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email
import email.message
import email.policy
import itertools
import json
import socket
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
from hypercorn.asyncio import serve
from hypercorn.config import Config

from support.helpers import short_tmpdir, wait_until
from support.streams_helpers import (
    EventStream,
    Frame,
    Served,
    module_kernels,
    open_events,
)
from support.streams_helpers import parse_frame as parse_frame  # re-exported for the tests

BOUND = 20.0  # seconds: upper bound on any wait in the fake and the harness, only to never hang
READ_TIMEOUT = 10.0  # below the kernel's 15 s SSE heartbeat, so a silent stream fails the read

# ------------------------------------------------------------------------------------ actions


@dataclass(frozen=True)
class Chunk:
    delta: dict[str, Any]
    finish_reason: str | None = None


@dataclass(frozen=True)
class UsageChunk:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Wait:
    gate: threading.Event


@dataclass(frozen=True)
class Drop:
    pass


@dataclass(frozen=True)
class Garbage:
    data: bytes


@dataclass(frozen=True)
class HttpError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class Image:
    """An images API answer: one image, as `b64_json` or (`url`) as a link to `/files/…`."""

    data: bytes
    url: bool = False


Action = Chunk | UsageChunk | Sleep | Wait | Drop | Garbage | HttpError | Reply | Image
Script = list[Action]


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> Chunk:
    return Chunk(delta, finish_reason)


def text(s: str) -> Chunk:
    return Chunk({"content": s})


def reasoning(s: str) -> Chunk:
    return Chunk({"reasoning_content": s})


def tool_call(
    index: int, id: str | None = None, name: str | None = None, arguments: str = ""
) -> Chunk:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return Chunk({"tool_calls": [call]})


def finish(reason: str = "stop") -> Chunk:
    return Chunk({}, reason)


def usage(prompt: int = 10, completion: int = 5, cached: int = 0) -> UsageChunk:
    return UsageChunk(prompt, completion, cached)


def sleep(seconds: float) -> Sleep:
    return Sleep(seconds)


def wait(gate: threading.Event) -> Wait:
    return Wait(gate)


def drop() -> Drop:
    return Drop()


def garbage(data: str | bytes = b"data: {this is not json\n\n") -> Garbage:
    return Garbage(data.encode() if isinstance(data, str) else data)


def http_error(
    status: int,
    message: str = "fake provider error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> list[Action]:
    error: dict[str, Any] = {"message": message, "type": "invalid_request_error", "code": code}
    return [HttpError(status, {"error": error}, dict(headers or {}))]


def reply(s: str) -> list[Action]:
    return [Reply(s)]


def image(data: bytes, *, url: bool = False) -> list[Action]:
    """An images API answer carrying `data`; `sleep`/`wait` actions may come before it."""
    return [Image(data, url)]


def split_words(s: str) -> list[str]:
    """`"a b c"` → `["a ", "b ", "c"]` (joins back to `s`)."""
    parts = s.split(" ")
    return [p + " " for p in parts[:-1]] + [parts[-1]] if s else []


def answer(s: str, *, prompt: int = 10, completion: int = 5) -> Script:
    """A plain final reply: word deltas, usage, finish "stop"."""
    return [*(text(w) for w in split_words(s) if w), finish("stop"), usage(prompt, completion)]


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: dict[str, Any]


def call(id: str, name: str, arguments: dict[str, Any]) -> Call:
    return Call(id, name, arguments)


def call_chunks(index: int, c: Call, pieces: int = 3) -> list[Action]:
    """id and name in one chunk, then the JSON arguments in `pieces` fragments."""
    raw = json.dumps(c.arguments)
    size = max(1, -(-len(raw) // pieces))
    fragments = [raw[i : i + size] for i in range(0, len(raw), size)]
    return [tool_call(index, c.id, c.name), *(tool_call(index, arguments=f) for f in fragments)]


def tools(*calls: Call, before: str = "", prompt: int = 10, completion: int = 5) -> Script:
    """A step asking for tools (optionally after some text): finish "tool_calls"."""
    out: Script = [text(w) for w in split_words(before) if w]
    for index, c in enumerate(calls):
        out.extend(call_chunks(index, c))
    return [*out, finish("tool_calls"), usage(prompt, completion)]


# ---------------------------------------------------------------------------------- the server


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    disconnected: bool = False
    done: bool = False

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def streaming(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []


class _Gone(Exception):
    """The client disconnected."""


class FakeProvider:
    """The fake server; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (model, streaming?) -> scripts: streamed turns and plain completions never mix
        self._scripts: dict[tuple[str, bool], deque[Script]] = defaultdict(deque)
        self._gates: list[threading.Event] = []
        self.requests: list[Recorded] = []
        self.models: list[str] = ["fake-large", "fake-small"]
        self.models_error: int | None = None
        # Answers a chat request no pushed script is queued for (None: HTTP 500). bench.turns
        # uses it to stream as many deltas as each request asks for.
        self.respond: Callable[[Recorded], Script | None] | None = None
        self.keep_alive_timeout = 30.0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._image_scripts: dict[str, deque[Script]] = defaultdict(deque)
        self._files: dict[str, bytes] = {}

    # -- control (test thread) ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, model: str, *scripts: Script) -> None:
        """Queue scripts for the next streaming requests (agent steps) that name `model`."""
        with self._lock:
            self._scripts[model, True].extend(list(s) for s in scripts)

    def push_completion(self, model: str, *scripts: Script) -> None:
        """Queue scripts for the next non-streaming requests (the guardian, summaries, titles)
        that name `model`."""
        with self._lock:
            self._scripts[model, False].extend(list(s) for s in scripts)

    def push_image(self, model: str, *scripts: Script) -> None:
        """Queue scripts for the next images API requests (generations or edits) naming
        `model`."""
        with self._lock:
            self._image_scripts[model].extend(list(s) for s in scripts)

    def images(self, model: str | None = None) -> list[Recorded]:
        """Recorded images API requests (for `model`), in arrival order."""
        with self._lock:
            return [
                r
                for r in self.requests
                if "/images/" in r.path and (model is None or r.model == model)
            ]

    def pending(self, model: str, streaming: bool = True) -> int:
        """Scripts not yet played for `model`."""
        with self._lock:
            return len(self._scripts[model, streaming])

    def gate(self) -> threading.Event:
        """A gate for `wait(gate)`; every gate is opened when the fake stops."""
        gate = threading.Event()
        with self._lock:
            self._gates.append(gate)
        return gate

    def chats(self, model: str | None = None, streaming: bool | None = None) -> list[Recorded]:
        """Recorded chat completion requests (for `model`; only streaming or non-streaming
        ones if `streaming` is given), in arrival order."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path.endswith("/chat/completions")
                and (model is None or r.model == model)
                and (streaming is None or r.streaming == streaming)
            ]

    def wait_chats(self, model: str, count: int) -> list[Recorded]:
        """Wait until `count` chat requests for `model` arrived."""
        wait_until(lambda: len(self.chats(model)) >= count, f"{count} requests for {model}", BOUND)
        return self.chats(model)

    # -- lifecycle ------------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[Self]:
        fake = cls()
        fake.start()
        try:
            yield fake
        finally:
            fake.stop()

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = 1.0
        config.keep_alive_timeout = self.keep_alive_timeout
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            self._stop = asyncio.Event()
            ready.set()
            app: Any = self._app  # a raw ASGI callable; hypercorn's types want its TypedDicts
            loop.run_until_complete(serve(app, config, shutdown_trigger=self._stop.wait))
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-provider", daemon=True)
        self._thread.start()
        ready.wait(BOUND)
        wait_until(self._answers, "the fake provider to listen", BOUND)

    def _answers(self) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200
        return False

    def stop(self) -> None:
        with self._lock:
            for gate in self._gates:
                gate.set()
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(BOUND)

    # -- the ASGI app (server thread) -----------------------------------------------------------

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        record = Recorded(scope["method"], scope["path"], headers, body)
        with self._lock:
            self.requests.append(record)
        path = scope["path"]
        if scope["method"] == "GET" and path.endswith("/models"):
            await self._models(send)
        elif scope["method"] == "POST" and path.endswith("/chat/completions"):
            await self._chat(record, receive, send)
        elif scope["method"] == "POST" and path.endswith(("/images/generations", "/images/edits")):
            if path.endswith("/edits"):
                record.body = _form(headers.get("content-type", ""), raw)
            await self._image(record, receive, send)
        elif scope["method"] == "GET" and path.startswith("/files/") and path[7:] in self._files:
            await _raw(send, 200, self._files[path[7:]], b"image/png")
        else:
            await _json(send, 404, {"error": {"message": f"no route {path}"}})
        record.done = True

    async def _models(self, send: Any) -> None:
        if self.models_error is not None:
            await _json(send, self.models_error, {"error": {"message": "models unavailable"}})
            return
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        await _json(send, 200, {"object": "list", "data": data})

    async def _chat(self, record: Recorded, receive: Any, send: Any) -> None:
        model = record.model or ""
        key = (model, record.streaming)
        with self._lock:
            script = self._scripts[key].popleft() if self._scripts[key] else None
        if script is None and self.respond is not None:
            script = self.respond(record)
        if script is None:
            what = "streaming" if record.streaming else "non-streaming"
            message = f"fake provider: no {what} script for model {model}"
            await _json(send, 500, {"error": {"message": message, "type": "server_error"}})
            return
        if not record.streaming:  # a completion held back by `wait(gate)` before it is sent
            while script and isinstance(script[0], Wait):
                gate, end = script[0].gate, time.monotonic() + BOUND
                while not gate.is_set() and time.monotonic() < end:
                    await asyncio.sleep(0.01)
                script = script[1:]
        first = script[0] if script else None
        if isinstance(first, HttpError):
            headers = [(k.encode(), v.encode()) for k, v in first.headers.items()]
            await _json(send, first.status, first.body, headers)
            return
        if not record.streaming:
            content = first.text if isinstance(first, Reply) else _joined(script)
            await _json(send, 200, self._completion(model, content))
            return
        if isinstance(first, Reply):
            script = [text(first.text), usage(), finish("stop")]
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            await self._stream(model, script, send, gone)
        except _Gone:
            record.disconnected = True
        finally:
            watcher.cancel()

    async def _stream(self, model: str, script: Script, send: Any, gone: asyncio.Event) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        ident = f"chatcmpl-{next(self._ids)}"

        async def out(data: bytes) -> None:
            if gone.is_set():
                raise _Gone
            await send({"type": "http.response.body", "body": data, "more_body": True})

        for action in script:
            if isinstance(action, Chunk | UsageChunk):
                await out(encode(action, ident, model))
            elif isinstance(action, Sleep):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gone.wait(), action.seconds)
            elif isinstance(action, Wait):
                end = time.monotonic() + 60
                while not action.gate.is_set() and not gone.is_set() and time.monotonic() < end:
                    await asyncio.sleep(0.01)
            elif isinstance(action, Garbage):
                await out(action.data)
            elif isinstance(action, Drop):
                return  # ends the ASGI call mid-body: hypercorn closes the connection
            if gone.is_set():
                raise _Gone
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    async def _image(self, record: Recorded, receive: Any, send: Any) -> None:
        model = record.model or ""
        with self._lock:
            queue = self._image_scripts[model]
            script = queue.popleft() if queue else None
        if script is None:
            message = f"fake provider: no image script for model {model}"
            await _json(send, 500, {"error": {"message": message, "type": "server_error"}})
            return
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            for action in script:
                if isinstance(action, Sleep):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(gone.wait(), action.seconds)
                elif isinstance(action, Wait):
                    end = time.monotonic() + 60
                    while not (action.gate.is_set() or gone.is_set()) and time.monotonic() < end:
                        await asyncio.sleep(0.01)
                if gone.is_set():
                    record.disconnected = True
                    return
                if isinstance(action, HttpError):
                    headers = [(k.encode(), v.encode()) for k, v in action.headers.items()]
                    await _json(send, action.status, action.body, headers)
                    return
                if isinstance(action, Image):
                    await _json(send, 200, {"created": 0, "data": [self._image_item(action)]})
                    return
        finally:
            watcher.cancel()

    def _image_item(self, action: Image) -> dict[str, str]:
        if not action.url:
            return {"b64_json": base64.b64encode(action.data).decode()}
        name = f"image-{next(self._ids)}.png"
        with self._lock:
            self._files[name] = action.data
        return {"url": f"http://127.0.0.1:{self.port}/files/{name}"}

    def _completion(self, model: str, content: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
        }


def encode(action: Chunk | UsageChunk, ident: str, model: str) -> bytes:
    """The SSE frame of one streamed chunk, as an OpenAI-compatible provider sends it."""
    if isinstance(action, Chunk):
        choice = {"index": 0, "delta": action.delta, "finish_reason": action.finish_reason}
        return _sse(_chunk(ident, model, [choice]))
    body = _chunk(ident, model, [])
    body["usage"] = {
        "prompt_tokens": action.prompt_tokens,
        "completion_tokens": action.completion_tokens,
        "total_tokens": action.prompt_tokens + action.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": action.cached_tokens},
    }
    return _sse(body)


def _chunk(ident: str, model: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": choices,
    }


def _sse(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body)}\n\n".encode()


def _joined(script: Script) -> str:
    return "".join(str(a.delta.get("content") or "") for a in script if isinstance(a, Chunk))


def _form(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body: its text fields, and its files as a list under `image`."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.message_from_bytes(head + raw, policy=email.policy.HTTP)
    form: dict[str, Any] = {"image": []}
    for part in message.iter_parts():
        assert isinstance(part, email.message.EmailMessage)
        payload = part.get_payload(decode=True)
        if part.get_filename() is not None:
            form["image"].append(payload)
        else:
            name = str(part.get_param("name", header="content-disposition"))
            form[name] = payload.decode() if isinstance(payload, bytes) else payload
    return form


async def _raw(send: Any, status: int, data: bytes, content_type: bytes) -> None:
    head = [(b"content-type", content_type), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def _json(
    send: Any, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head + (headers or [])})
    await send({"type": "http.response.body", "body": data, "more_body": False})


# ------------------------------------------------------------------------------------- harness

API_KEY = "sk-fake-" + uuid.uuid4().hex  # the configured key; must never leave the kernel
TERMINAL = "turn_complete"
STEP_KINDS = (
    "message_delta",
    "reasoning_delta",
    "message_end",
    "turn_started",
    "turn_cancel_requested",
    "turn_complete",
    "tool_begin",
    "tool_update",
    "tool_end",
    "usage_updated",
    "approval_request",
    "approval_resolved",
    "error",
)


@dataclass
class Agent:
    """A real kernel (Unix socket) with a connection to the fake provider."""

    served: Served
    fake: FakeProvider
    client: httpx.Client
    connection_id: str

    @property
    def data_dir(self) -> Path:
        return self.served.data_dir

    def session(
        self, approval_mode: str = "full_access", title: str | None = "test", **fields: Any
    ) -> Session:
        """A new session on the fake connection with a model name of its own.

        It gets a manual `title` (unless None): the kernel then skips background title
        generation, so every request the fake sees for the model is one the test asked for."""
        model = fields.pop("model", None) or f"m-{uuid.uuid4().hex[:12]}"
        body = {"connection_id": self.connection_id, "model": model, **fields}
        body["approval_mode"] = approval_mode
        response = self.client.post("/sessions", json=body)
        assert response.status_code == 200, response.text
        row = response.json()
        if title is not None:
            response = self.client.patch(f"/sessions/{row['id']}", json={"title": title})
            assert response.status_code == 200, response.text
            row = response.json()
        return Session(self, row)


@dataclass
class Session:
    agent: Agent
    row: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.row["id"])

    @property
    def model(self) -> str:
        return str(self.row["model"])

    @property
    def workspace(self) -> Path:
        return self.agent.data_dir / "workspaces" / self.id

    @property
    def client(self) -> httpx.Client:
        return self.agent.client

    def push(self, *scripts: Script) -> None:
        self.agent.fake.push(self.model, *scripts)

    def push_completion(self, *scripts: Script) -> None:
        self.agent.fake.push_completion(self.model, *scripts)

    def chats(self, streaming: bool | None = None) -> list[Recorded]:
        return self.agent.fake.chats(self.model, streaming)

    def submit(self, message: str = "hello", **extra: Any) -> dict[str, Any]:
        response = self.client.post(
            f"/sessions/{self.id}/turns", json={"message": message, **extra}
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def history(self) -> list[dict[str, Any]]:
        response = self.client.get(f"/sessions/{self.id}/history")
        assert response.status_code == 200, response.text
        return list(response.json())

    def get(self) -> dict[str, Any]:
        response = self.client.get("/sessions")
        assert response.status_code == 200, response.text
        return next(s for s in response.json() if s["id"] == self.id)

    @contextlib.contextmanager
    def events(self, after: int | None = None) -> Iterator[Events]:
        """The session's SSE stream, subscribed (head received) when this returns."""
        with open_events(self.client, self.id, after=after) as stream:
            yield Events(stream)

    def turn(self, *scripts: Script, message: str = "hello") -> list[Frame]:
        """Push the scripts, submit, and return every frame up to `turn_complete`."""
        self.push(*scripts)
        with self.events() as events:
            self.submit(message)
            return events.until_kind(TERMINAL)

    def tool_turn(self, *calls: Call, final: str = "Done.") -> list[Frame]:
        """One step calling `calls`, then a final answer; every frame up to `turn_complete`."""
        return self.turn(tools(*calls), answer(final))

    def queue(self) -> list[dict[str, Any]]:
        response = self.client.get(f"/sessions/{self.id}/queue")
        assert response.status_code == 200, response.text
        return list(response.json())

    def wait_idle(self) -> None:
        wait_until(lambda: self.get()["phase"] == "idle", "the session to be idle", BOUND)

    def replay(self, stop: Callable[[Frame], bool]) -> list[Frame]:
        """Stored events from seq 0 until `stop`."""
        with open_events(self.client, self.id, after=0) as stream:
            return stream.frames_until(stop)


class Events:
    """Frames of one SSE connection, read on demand; everything read is kept in `frames`."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.frames: list[Frame] = []

    def next(self, deadline: float | None = None) -> Frame:
        """The next frame. Fails at `deadline` (monotonic; default BOUND from now) even while
        heartbeat comments keep arriving, and after READ_TIMEOUT of silence."""
        end = deadline if deadline is not None else time.monotonic() + BOUND
        try:
            frame = self.stream.next_frame(end)
        except TimeoutError:
            raise AssertionError(f"no awaited event in time; got {kinds(self.frames)}") from None
        assert frame is not None, f"the stream ended; got {kinds(self.frames)}"
        self.frames.append(frame)
        return frame

    def until(self, stop: Callable[[Frame], bool]) -> list[Frame]:
        """Frames read from now up to and including the first for which `stop` holds."""
        start = len(self.frames)
        deadline = time.monotonic() + BOUND
        while not stop(self.next(deadline)):
            pass
        return self.frames[start:]

    def until_count(self, kind: str, count: int) -> list[Frame]:
        """Frames read from now up to and including the `count`-th of `kind`."""
        seen = 0

        def stop(frame: Frame) -> bool:
            nonlocal seen
            seen += frame.event == kind
            return seen >= count

        return self.until(stop)

    def until_kind(self, kind: str, **payload: Any) -> list[Frame]:
        return self.until(lambda f: f.event == kind and matches(f, payload))


def matches(frame: Frame, payload: dict[str, Any]) -> bool:
    body = frame.data.get("payload")
    return all(isinstance(body, dict) and body.get(k) == v for k, v in payload.items())


def kinds(frames: list[Frame], keep: tuple[str, ...] = STEP_KINDS) -> list[str]:
    return [f.event or "" for f in frames if f.event in keep]


def payloads(frames: list[Frame], kind: str) -> list[Any]:
    return [f.data.get("payload") for f in frames if f.event == kind]


def only(frames: list[Frame], kind: str) -> Any:
    found = payloads(frames, kind)
    assert len(found) == 1, f"{len(found)} {kind} in {kinds(frames)}"
    return found[0]


def connect(client: httpx.Client, fake: FakeProvider, **fields: Any) -> dict[str, Any]:
    body = {"name": "fake", "base_url": fake.base_url, "api_key": API_KEY, **fields}
    response = client.post("/connections", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


@contextlib.contextmanager
def agent_kernel(workdir: Path, env: dict[str, str] | None = None) -> Iterator[Agent]:
    """A fake provider and a kernel on a Unix socket (in `env`) with a connection to it."""
    with (
        FakeProvider.running() as fake,
        short_tmpdir() as root,
        module_kernels(workdir, root, "k", env=env) as kernels,
        kernels["k"].client() as client,
    ):
        client.timeout = httpx.Timeout(READ_TIMEOUT)
        connection = connect(client, fake)
        yield Agent(kernels["k"], fake, client, connection["id"])
