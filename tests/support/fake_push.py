"""A push service on loopback, and a browser's side of a push subscription.

`FakePushService` speaks what a browser vendor's push service does for a sender (RFC 8030): it
takes `POST <endpoint>` with an encrypted body and answers 201, or the status a test sets for
an endpoint's path (410 for one the browser dropped). It keeps every message it took.

`FakeBrowser` holds what a browser makes when it subscribes: a P-256 key pair and a 16-byte
auth secret. `subscription(endpoint)` is its `PushSubscription.toJSON()`; `open(body)`
decrypts a message sealed to it (RFC 8291, `aes128gcm`) as the browser would.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import http_ece  # type: ignore[import-untyped]
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from support.helpers import wait_until


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Message:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes


class FakePushService:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.answers: dict[str, int] = {}
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with service._lock:
                    service.messages.append(Message(self.path, headers, body))
                self.send_response(service.answers.get(self.path, 201))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def endpoint(self, name: str) -> str:
        return f"{self.origin}/push/{name}"

    def to(self, name: str) -> list[Message]:
        with self._lock:
            return [m for m in self.messages if m.path == f"/push/{name}"]

    def wait(self, name: str, count: int) -> list[Message]:
        wait_until(lambda: len(self.to(name)) >= count, f"{count} push message(s) to {name}")
        return self.to(name)

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[FakePushService]:
        service = cls()
        thread = threading.Thread(target=service.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield service
        finally:
            service.server.shutdown()
            service.server.server_close()
            thread.join(10)


class FakeBrowser:
    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)

    def subscription(self, endpoint: str, **extra: Any) -> dict[str, Any]:
        point = self.key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        keys = {"p256dh": b64url(point), "auth": b64url(self.auth)}
        return {"endpoint": endpoint, "expirationTime": None, "keys": keys, **extra}

    def open(self, body: bytes) -> dict[str, Any]:
        plain = http_ece.decrypt(
            body, private_key=self.key, auth_secret=self.auth, version="aes128gcm"
        )
        return dict(json.loads(plain))
