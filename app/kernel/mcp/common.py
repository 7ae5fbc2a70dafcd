"""What the MCP package shares without importing the SDK (its import costs ~0.3 s, paid only
once a server is configured or an MCP route is used)."""

from __future__ import annotations

from dataclasses import dataclass


class NotConnected(Exception):
    """The server is not connected (yet, or any more)."""


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect (and answer a ping), for one call, between two pings."""

    connect: float
    call: float
    ping_interval: float
