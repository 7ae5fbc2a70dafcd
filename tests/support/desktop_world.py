"""The harness of the desktop contract test (tests/test_desktop_contract.py): one real
`foya serve` over TCP with a bearer token (remote mode), the fake model provider, a fake MCP
registry and a fake Bing on loopback, and a client that sends requests exactly as the desktop's
host does.

The host (`apps/desktop/src-tauri/src/kernel.rs`, remote mode) sends every request with
`Authorization: Bearer <token>` and `content-type: application/json` — also when the command has
no body, which it then sends empty — and uploads as `multipart/form-data` with its own boundary.
Bodies are `serde_json::Value::to_string()` of what the views built: compact JSON. Streams are
read as the host reads them: only `data: ` lines are forwarded, each one JSON envelope.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from support.fake_provider import API_KEY, BOUND, FakeProvider, Script
from support.fake_video_provider import FakeVideoProvider
from support.helpers import Kernel, Launcher, base_env, threaded_server, wait_until

JSON = "application/json"


@dataclass(frozen=True)
class Call:
    """One HTTP request as the desktop's host builds it."""

    method: str
    path: str
    body: Any = None  # None: the host sends no body (an empty one, in remote mode)
    raw: bytes | None = None  # a multipart upload, sent as is with `content_type`
    content_type: str = JSON


def compact(body: Any) -> bytes:
    """`serde_json::Value::to_string()`: compact JSON."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def multipart(boundary: str, name: str, media_type: str, data: bytes) -> bytes:
    """The upload body the host writes by hand (one `file` part)."""
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{name}"\r\nContent-Type: {media_type}\r\n\r\n'
    ).encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode()


class Stream:
    """One SSE subscription read on a thread as the host reads it: the JSON of each `data: `
    line, in order."""

    def __init__(self, world: World, path: str) -> None:
        self.path = path
        self.items: list[Any] = []
        self.status: int | None = None
        self._cond = threading.Condition()
        self._ready = threading.Event()
        self._client = world.new_client()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(BOUND):
            raise AssertionError(f"no answer to GET {path}")
        assert self.status == 200, f"GET {path}: {self.status}"

    def _run(self) -> None:
        headers = {"accept": "text/event-stream"}
        with (
            contextlib.suppress(httpx.HTTPError, RuntimeError, ValueError),
            self._client.stream("GET", self.path, headers=headers) as response,
        ):
            self.status = response.status_code
            self._ready.set()
            for line in response.iter_lines():
                if line.startswith("data: "):
                    with self._cond:
                        self.items.append(json.loads(line[len("data: ") :]))
                        self._cond.notify_all()
        self._ready.set()

    def wait(self, what: str, found: Callable[[Any], bool], start: int = 0) -> Any:
        """The first item from index `start` for which `found` holds."""
        end = time.monotonic() + BOUND
        with self._cond:
            while True:
                for item in self.items[start:]:
                    if found(item):
                        return item
                left = end - time.monotonic()
                if left <= 0:
                    kinds = [i.get("kind") for i in self.items if isinstance(i, dict)]
                    raise AssertionError(f"{self.path}: no {what} in time; got {kinds}")
                self._cond.wait(left)

    def kind(self, kind: str, start: int = 0, **payload: Any) -> dict[str, Any]:
        def found(item: Any) -> bool:
            body = item.get("payload") if isinstance(item, dict) else None
            wanted = all(isinstance(body, dict) and body.get(k) == v for k, v in payload.items())
            return isinstance(item, dict) and item.get("kind") == kind and wanted

        return dict(self.wait(kind, found, start))

    def mark(self) -> int:
        with self._cond:
            return len(self.items)

    def close(self) -> None:
        self._client.close()


@dataclass
class World:
    """Everything the cases share: the kernel, its fakes, the directories and what was made."""

    kernel: Kernel
    token: str
    fake: FakeProvider
    home: Path
    root: Path
    client: httpx.Client  # for preparation, not for the checked requests
    connection_id: str = ""
    streams: dict[str, Stream] = field(default_factory=dict)
    stash: dict[str, Any] = field(default_factory=dict)

    def new_client(self) -> httpx.Client:
        assert self.kernel.url is not None
        auth = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.kernel.url, headers=auth, timeout=BOUND)

    def send(self, call: Call) -> httpx.Response:
        """The request exactly as the host sends it in remote mode."""
        if call.raw is not None:
            content = call.raw
        else:
            content = b"" if call.body is None else compact(call.body)
        headers = {"content-type": call.content_type}
        return self.client.request(call.method, call.path, content=content, headers=headers)

    def prep(self, method: str, path: str, body: Any = None) -> Any:
        """A preparation request (not a checked case); fails unless it succeeds."""
        response = self.send(Call(method, path, body))
        assert response.is_success, f"{method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    # ------------------------------------------------------------------ sessions and turns

    def session(
        self, approval_mode: str = "full_access", *, project_id: str = "", title: str = "t"
    ) -> dict[str, Any]:
        """A new session with a model of its own, its stream already open (as the desktop
        subscribes to the chat it opens); titled, so no background title request is made."""
        body: dict[str, Any] = {
            "connection_id": self.connection_id,
            "model": f"m-{uuid.uuid4().hex[:10]}",
            "approval_mode": approval_mode,
        }
        if project_id:
            body["project_id"] = project_id
        row = self.prep("POST", "/sessions", body)
        row = self.prep("PATCH", f"/sessions/{row['id']}", {"title": title})
        self.streams[row["id"]] = Stream(self, f"/sessions/{row['id']}/events")
        return dict(row)

    def stream(self, session_id: str) -> Stream:
        return self.streams[session_id]

    def push(self, session: dict[str, Any], *scripts: Script) -> None:
        self.fake.push(session["model"], *scripts)

    def submit(self, session: dict[str, Any], message: str, **extra: Any) -> int:
        """Submit a turn as the composer does; returns the stream mark before it."""
        mark = self.stream(session["id"]).mark()
        body = {
            "message": message,
            "skill_ref": "",
            "attachments": [],
            "browser_elements": [],
            **extra,
        }
        self.prep("POST", f"/sessions/{session['id']}/turns", body)
        return mark

    def turn(self, session: dict[str, Any], *scripts: Script, message: str = "go") -> int:
        """Push the scripts, submit, wait for `turn_complete`; returns the stream mark."""
        self.push(session, *scripts)
        mark = self.submit(session, message)
        self.stream(session["id"]).kind("turn_complete", mark)
        self.idle(session)
        return mark

    def idle(self, session: dict[str, Any]) -> None:
        def quiet() -> bool:
            rows = self.client.get("/sessions").json()
            row = next((r for r in rows if r["id"] == session["id"]), None)
            return row is None or row["phase"] == "idle"

        wait_until(quiet, "the session to be idle", BOUND)

    def history(self, session: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.prep("GET", f"/sessions/{session['id']}/history"))

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """`make()` the first time `key` is asked for; the same value afterwards."""
        if key not in self.stash:
            self.stash[key] = make()
        return self.stash[key]


# ---------------------------------------------------------------------- fakes of outside services

REGISTRY_ITEM = {
    "server": {
        "name": "io.github.example/notes",
        "description": "Notes over stdio",
        "version": "1.2.0",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "@example/notes-mcp",
                "version": "1.2.0",
                "transport": {"type": "stdio"},
            }
        ],
    },
    "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active"}},
}
BING_HITS = [{"name": "Foya", "url": "https://bing.example/foya", "snippet": "An agent kernel."}]


@contextlib.contextmanager
def outside_services() -> Iterator[str]:
    """One loopback server: the MCP registry at `/v0.1/servers`, Bing at `/bing`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            if self.path.startswith("/v0.1/servers"):
                body: Any = {"servers": [REGISTRY_ITEM], "metadata": {"count": 1}}
            elif self.path.startswith("/bing"):
                body = {"webPages": {"value": BING_HITS}}
            else:
                body = {"error": "unknown"}
            data = json.dumps(body).encode()
            self.send_response(200 if "error" not in body else 404)
            self.send_header("Content-Type", JSON)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with threaded_server(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


# ---------------------------------------------------------------------------------- the kernel

# One agent per purpose, each with a model of its own, so children never take each other's
# scripts from the fake: `helper` answers, `failer` meets a provider error, `holder` waits.
AGENTS = {
    name: f"---\nname: {name}\ndescription: {what}\nmodel: {name}-model\ntools: [read]\n---\n"
    "You help. Answer in one line.\n"
    for name, what in (
        ("helper", "Answers delegated questions"),
        ("failer", "Meets a provider error"),
        ("holder", "Waits until released"),
    )
}
SKILL = "---\nname: review\ndescription: Reviews a change\n---\nReview it carefully.\n"


def write_home(home: Path) -> None:
    """A user's `~/.foya` and `~/.agents`: one skill and the agent definitions."""
    skill = home / ".foya" / "skills" / "review" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL)
    agents = home / ".agents" / "agents"
    agents.mkdir(parents=True)
    for name, text in AGENTS.items():
        (agents / f"{name}.md").write_text(text)


@contextlib.contextmanager
def desktop_world(base: Path, token: str, digest: str) -> Iterator[World]:
    """The kernel (TCP, plaintext on 127.0.0.1, bearer token), its fakes and a connection."""
    home, root = base / "home", base / "files"
    home.mkdir()
    root.mkdir()
    write_home(home)
    launcher = Launcher(base / "procs")
    try:
        with (
            FakeProvider.running() as fake,
            FakeVideoProvider.running() as video,
            outside_services() as outside,
        ):
            env = base_env(
                FOYA_AUTH_TOKEN_SHA256=digest,
                HOME=str(home),
                # The video fake's results are on 127.0.0.1, behind web_fetch's guard.
                FOYA_WEB_FETCH_ALLOW_HOSTS="127.0.0.1",
                FOYA_MCP_REGISTRY_URL=f"{outside}/v0.1/servers",
                FOYA_MCP_CONNECT_TIMEOUT="5",
            )
            kernel = launcher.tcp(["--allow-plaintext", "--data-dir", str(base / "data")], env=env)
            world = World(kernel, token, fake, home, root, httpx.Client())
            world.client = world.new_client()
            world.stash["outside"] = outside
            world.stash["video"] = video
            try:
                body = {"name": "fake", "base_url": fake.base_url, "api_key": API_KEY}
                world.connection_id = world.prep("POST", "/connections", body)["id"]
                yield world
            finally:
                # The kernel's stop ends every open stream; then their clients are closed.
                launcher.close()
                for stream in world.streams.values():
                    stream.close()
                world.client.close()
    finally:
        launcher.close()
