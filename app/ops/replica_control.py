"""Litestream's control socket, as the replicator reads it (app.ops.replicate): HTTP over a Unix
socket (`GET /list`, `POST /sync`), and the lag of one database worked out from the answers."""

from __future__ import annotations

import http.client
import json
import socket
from collections import deque
from pathlib import Path
from typing import Any

#: While a database's position cannot be learnt, how often to ask again anyway.
FAILED_RETRY = 30.0
#: What a request that got no usable answer raises.
UNANSWERED = (OSError, ValueError, KeyError, TypeError, http.client.HTTPException)


class _Control(http.client.HTTPConnection):
    """HTTP over Litestream's control socket."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("litestream", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.socket_path))


class Lag:
    """One database's replication lag: first-seen times of local txids the replica lacks, and
    since when its position cannot be learnt (Litestream down, or refusing to sync because the
    replica is unreachable: then the replica holds nothing newer, as far as we can tell)."""

    def __init__(self) -> None:
        self.pending: deque[tuple[int, float]] = deque()
        self.replicated = 0
        self.last_sync: float | None = None
        self.failing_since: float | None = None
        self.retry_at = 0.0

    def observe(self, txid: int, replicated: int, now: float) -> None:
        """A `POST /sync` answer: the newest local txid and the newest the replica holds."""
        if self.pending and txid < self.pending[-1][0]:  # Litestream reset its positions
            self.pending.clear()
            self.replicated = 0
        self.replicated = max(self.replicated, replicated)
        if txid > self.replicated and (not self.pending or txid > self.pending[-1][0]):
            # Seen only now, but waiting at least since positions could not be learnt.
            self.pending.append((txid, min(now, self.failing_since or now)))
        while self.pending and self.pending[0][0] <= self.replicated:
            self.pending.popleft()
        self.failing_since = None

    def fail(self, now: float) -> None:
        """No position could be learnt now."""
        if self.failing_since is None:
            self.failing_since = now
        self.retry_at = now + FAILED_RETRY

    def should_ask(self, now: float) -> bool:
        """Whether to ask for a sync now: while failing, each request would reach for the
        replica, so only once a sync succeeded since (Litestream retries on its own), or
        after `FAILED_RETRY` seconds."""
        if self.failing_since is None or now >= self.retry_at:
            return True
        return self.last_sync is not None and self.last_sync > self.failing_since

    def seconds(self, now: float) -> float:
        """The lag: how long the oldest change the replica may lack has waited."""
        waits = [now - self.pending[0][1]] if self.pending else []
        if self.failing_since is not None:
            waits.append(now - self.failing_since)
        return max(waits, default=0.0)


def request(sock: Path, method: str, path: str, body: Any = None) -> Any:
    """One JSON request on the control socket `sock`; one of `UNANSWERED` without a 200."""
    conn = _Control(sock, timeout=5.0)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body))
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise ValueError(f"{method} {path}: {response.status} {data[:200]!r}")
        return json.loads(data)
    finally:
        conn.close()
