"""Identifiers and timestamps handed to clients."""

from __future__ import annotations

import secrets
import time

from app.events import iso_time


def new_id() -> str:
    """A random 24-hex-character id (the shape of Foya's run ids)."""
    return secrets.token_hex(12)


def now_ns() -> int:
    return time.time_ns()


def iso_now() -> str:
    return iso_time(time.time_ns())
