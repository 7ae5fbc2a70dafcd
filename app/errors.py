"""Typed errors. Every error the service reports carries an HTTP status and a stable wire code.

One handler in `app.http.errors` renders them as `{"code", "message"}`; nothing else formats errors.
Messages are written for the user and must never contain secrets.

The families here (kernel modules subclass them with their own codes):

- `BadRequest` 400 `bad_request`, `NotFound` 404 `not_found`, `Conflict` 409 `conflict`
- 413 `payload_too_large` is rendered by `app.http.guard` before a route runs
- `InsufficientStorage` 507 `insufficient_storage`: the disk (or SQLite's size cap) is full;
  `app.store.db` maps SQLITE_FULL to it and `app.http.errors` maps `OSError(ENOSPC)`
- `Unavailable` 503 `unavailable`
"""

from __future__ import annotations

from typing import Any


class FoyaError(Exception):
    """Base of every error the kernel reports to a client."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        # Extra JSON fields rendered beside code and message (e.g. the failed readiness checks).
        self.extra: dict[str, Any] = {}
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status


class BadRequest(FoyaError):
    status = 400
    code = "bad_request"


class NotFound(FoyaError):
    status = 404
    code = "not_found"


class ApprovalNotFound(NotFound):
    """A decision names an approval that is pending, but in another session than its URL's."""

    code = "approval_not_found"


class Conflict(FoyaError):
    status = 409
    code = "conflict"


class InsufficientStorage(FoyaError):
    status = 507
    code = "insufficient_storage"


class Unavailable(FoyaError):
    status = 503
    code = "unavailable"


class ConfigError(Exception):
    """A startup setting is wrong. The message names the flag or variable to fix."""
