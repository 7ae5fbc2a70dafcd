"""Typed errors. Every error the service reports carries an HTTP status and a stable wire code.

Each code lives in one class, as its `status` and `code` class attributes; a raise site names the
class and gives only the message. One handler in `app.http.errors` renders them as
`{"code", "message"}`; nothing else formats errors. Messages are written for the user and must
never contain secrets. `python -m tools.errdoc` lists every code in `docs/errors.md`.

Exception map of the shared families (kernel modules subclass them with their own codes, and say
which in their own docstrings):

- `FoyaError` 500 `internal_error`: the base; also what an unexpected exception is answered with
- `BadRequest` 400 `bad_request`, `NotFound` 404 `not_found`, `Conflict` 409 `conflict`
- `Unauthorized` 401 `unauthorized`: rendered by `app.http.middleware` before any route runs
- `MethodNotAllowed` 405 `method_not_allowed`: the route exists, not with that method
- `PayloadTooLarge` 413 `payload_too_large`: rendered by `app.http.guard` before a route runs
- `RangeNotSatisfiable` 416 `range_not_satisfiable`: rendered by `app.http.ranges`
- `InsufficientStorage` 507 `insufficient_storage`: the disk (or SQLite's size cap) is full;
  `app.store.db` maps SQLITE_FULL to it and `app.http.errors` maps `OSError(ENOSPC)`
- `Unavailable` 503 `unavailable`
- `ConfigError` (not rendered): a start-up setting is wrong
"""

from __future__ import annotations

from typing import Any, ClassVar


class FoyaError(Exception):
    """An error the kernel reports to a client; unexpected ones are answered as this, with a
    message that reveals nothing."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    #: A family's base that is never raised itself (each member has its own code): the error
    #: reference leaves it out. Read from the class's own namespace, so it is not inherited.
    abstract: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        # Extra JSON fields rendered beside code and message (e.g. the failed readiness checks).
        self.extra: dict[str, Any] = {}


class BadRequest(FoyaError):
    """The request breaks a rule of its route; the message says which."""

    status = 400
    code = "bad_request"


class Unauthorized(FoyaError):
    """No valid bearer token (every route but the probes needs one)."""

    status = 401
    code = "unauthorized"


class NotFound(FoyaError):
    """No such route, or the thing its URL names does not exist."""

    status = 404
    code = "not_found"


class ApprovalNotFound(NotFound):
    """A decision names an approval that is pending, but in another session than its URL's."""

    code = "approval_not_found"


class MethodNotAllowed(FoyaError):
    """The route exists, but not with that method."""

    status = 405
    code = "method_not_allowed"


class Conflict(FoyaError):
    """The request conflicts with the current state of what it names."""

    status = 409
    code = "conflict"


class PayloadTooLarge(FoyaError):
    """A request body over the limit of its route (8 MiB unless the route says otherwise)."""

    status = 413
    code = "payload_too_large"


class RangeNotSatisfiable(FoyaError):
    """A `Range` header that starts beyond the end of the body it asks for."""

    status = 416
    code = "range_not_satisfiable"


class InsufficientStorage(FoyaError):
    """The disk holding the data directory (or SQLite's size cap) is full."""

    status = 507
    code = "insufficient_storage"


class Unavailable(FoyaError):
    """The service cannot answer this now (starting, stopping, or a dependency down)."""

    status = 503
    code = "unavailable"


class ConfigError(Exception):
    """A startup setting is wrong. The message names the flag or variable to fix."""
