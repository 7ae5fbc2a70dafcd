"""A fake video-generation provider speaking both of Foya's video protocols, on loopback.

A real HTTP server (`helpers.threaded_server`, 127.0.0.1, a port the OS picked). Each task is
scripted by the test before it is submitted (`fake.script(model, Script(...))`, one script per
model name, used by every task of that model) and recorded (`fake.tasks(model)`).

Routes
    POST /api/v3/contents/generations/tasks          seedance: submit, answers `{"id"}`
    GET  /api/v3/contents/generations/tasks/<id>     seedance: `{"id", "status", "content":
                                                     {"video_url"}}` or `{"error": {"message"}}`
    POST /v2/video_generation                        minimax_h3: submit, `{"task_id", "base_resp"}`
    GET  /v2/query/video_generation/<id>             minimax_h3: the task inside `data`, its
                                                     URL as `result.urls[0]`, a failure as
                                                     `fail_reason`
    GET  /files/<name>                               the bytes of a finished task's video (or
                                                     of a file given with `put_file`)
    GET  /redirect?to=<url>                          302 to `to`

Every poll moves a task one step along its script's `states` (by default `running`, then
`succeeded`), so a client sees each state once; the last state stays. Every request is
recorded with its method, path, `Authorization` header and JSON body (`fake.requests`).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from support.helpers import threaded_server

API_KEY = "sk-video-fake-key-0123456789"
SEEDANCE = "/api/v3/contents/generations/tasks"
MINIMAX_SUBMIT = "/v2/video_generation"
MINIMAX_QUERY = "/v2/query/video_generation/"


def mp4(size: int, seed: int = 0) -> bytes:
    """Bytes that look like an MP4 (an `ftyp` box of brand `isom`), `size` long."""
    head = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + b"\x00\x00\x00\x08free"
    filler = bytes((i * 131 + seed) % 251 for i in range(4096))
    body = (filler * (size // len(filler) + 1))[: max(size - len(head), 0)]
    return (head + body)[:size]


@dataclass
class Script:
    """What the tasks of one model do: the states polls walk through, then the result.

    `video_url` None means the fake's own `/files/<task>.mp4`; `{base}` in it is replaced by
    the fake's base URL. `data` is what that file holds."""

    states: tuple[str, ...] = ("running", "succeeded")
    video_url: str | None = None
    reason: str = ""
    data: bytes = field(default_factory=lambda: mp4(64 * 1024))


@dataclass
class Task:
    id: str
    protocol: str
    model: str
    body: dict[str, Any]
    script: Script
    polls: int = 0


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    authorization: str | None
    body: Any


class FakeVideoProvider:
    """The server's state: scripts, tasks and requests (see the module docstring)."""

    def __init__(self) -> None:
        self.base_url = ""
        self.requests: list[Request] = []
        self._scripts: dict[str, Script] = {}
        self._tasks: dict[str, Task] = {}
        self._files: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[FakeVideoProvider]:
        fake = cls()
        with threaded_server(_handler(fake)) as server:
            fake.base_url = f"http://127.0.0.1:{server.server_address[1]}"
            yield fake

    def script(self, model: str, script: Script) -> None:
        with self._lock:
            self._scripts[model] = script

    def put_file(self, name: str, data: bytes) -> str:
        """Serve `data` at `/files/<name>`; its URL."""
        with self._lock:
            self._files[name] = data
        return f"{self.base_url}/files/{name}"

    def tasks(self, model: str) -> list[Task]:
        with self._lock:
            return [t for t in self._tasks.values() if t.model == model]

    def served(self, path: str) -> list[Request]:
        """The recorded requests for `path`."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def file_of(self, task: Task) -> bytes:
        return task.script.data

    # ------------------------------------------------------------------------- the server

    def handle(
        self, method: str, target: str, auth: str | None, raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(target)
        path = parts.path
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        with self._lock:
            self.requests.append(Request(method, path, auth, body))
        if method == "POST" and path in (SEEDANCE, MINIMAX_SUBMIT):
            return self._submit("seedance" if path == SEEDANCE else "minimax_h3", body)
        if method == "GET" and path.startswith(SEEDANCE + "/"):
            return self._poll(path.removeprefix(SEEDANCE + "/"))
        if method == "GET" and path.startswith(MINIMAX_QUERY):
            return self._poll(path.removeprefix(MINIMAX_QUERY))
        if method == "GET" and path.startswith("/files/"):
            data = self._files.get(path.removeprefix("/files/"))
            if data is None:
                return _json(404, {"error": {"message": "no such file"}})
            return 200, {"Content-Type": "video/mp4"}, data
        if method == "GET" and path == "/redirect":
            return 302, {"Location": parse_qs(parts.query)["to"][0]}, b""
        return _json(404, {"error": {"message": f"no route {method} {path}"}})

    def _submit(self, protocol: str, body: Any) -> tuple[int, dict[str, str], bytes]:
        model = body.get("model", "") if isinstance(body, dict) else ""
        with self._lock:
            script = self._scripts.get(model)
            if script is None:
                return _json(400, {"error": {"message": f"unknown model {model}"}})
            task = Task(uuid.uuid4().hex, protocol, model, body, script)
            self._tasks[task.id] = task
            self._files[f"{task.id}.mp4"] = script.data
        if protocol == "seedance":
            return _json(200, {"id": task.id})
        return _json(200, {"task_id": task.id, "base_resp": {"status_code": 0, "status_msg": "ok"}})

    def _poll(self, task_id: str) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                return _json(404, {"error": {"message": "no such task"}})
            states = task.script.states
            state = states[min(task.polls, len(states) - 1)]
            task.polls += 1
        url = task.script.video_url or f"{self.base_url}/files/{task.id}.mp4"
        url = url.replace("{base}", self.base_url)
        if task.protocol == "seedance":
            answer: dict[str, Any] = {"id": task.id, "model": task.model, "status": state}
            if state == "succeeded":
                answer["content"] = {"video_url": url}
            if state == "failed":
                answer["error"] = {"code": "Rejected", "message": task.script.reason}
            return _json(200, answer)
        inner: dict[str, Any] = {"task_id": task.id, "status": state.capitalize()}
        if state == "succeeded":
            inner["status"] = "Success"
            inner["result"] = {"urls": [url]}
        if state == "failed":
            inner["fail_reason"] = task.script.reason
        return _json(200, {"code": 0, "data": inner})


def _json(status: int, body: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _handler(fake: FakeVideoProvider) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            status, headers, body = fake.handle(
                self.command, self.path, self.headers.get("Authorization"), raw
            )
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
