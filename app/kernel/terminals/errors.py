"""The errors of the terminal routes (`/sessions/{id}/terminals…`).

Exception map (status, code):

- `TerminalNotFound` 404 `terminal_not_found`: no such session, no such terminal in it, or
  (writing or resizing) a terminal whose shell has exited, as Foya answers all three
- `TerminalUnavailable` 501 `terminal_unavailable`: this host cannot make pseudo-terminals
  (no `/dev/ptmx`, or no `pidfd_open`, i.e. Linux before 5.3)
- `TooManyTerminals` 409 `too_many_terminals`: the session or the kernel holds its maximum
  (`FOYA_MAX_TERMINALS_PER_SESSION`, `FOYA_MAX_TERMINALS`); exited terminals count until deleted
- `TerminalBusy` 409 `terminal_busy`: the shell has not taken its input for `INPUT_WAIT` seconds
- `InputTooLarge` 413 `payload_too_large`: more than `MAX_INPUT` bytes of input in one request
- `TerminalFailed` 500 `terminal_failed`: the shell could not be started (e.g. the project's
  directory is gone)
- `BadRequest` 400 `bad_request`: an `after` beyond the terminal's last seq
"""

from __future__ import annotations

from app.errors import Conflict, FoyaError, NotFound

MAX_INPUT = 1024 * 1024
INPUT_WAIT = 10.0


class TerminalNotFound(NotFound):
    code = "terminal_not_found"


class TerminalUnavailable(FoyaError):
    status = 501
    code = "terminal_unavailable"


class TooManyTerminals(Conflict):
    code = "too_many_terminals"


class TerminalBusy(Conflict):
    code = "terminal_busy"


class InputTooLarge(FoyaError):
    status = 413
    code = "payload_too_large"


class TerminalFailed(FoyaError):
    status = 500
    code = "terminal_failed"
