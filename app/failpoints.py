"""Crash injection for crash-safety tests, off unless `FOYA_FAILPOINT` is set.

`FOYA_FAILPOINT=<name>:<n>` ends the process abruptly (like SIGKILL: no cleanup, no flush) the
n-th time execution passes `failpoint(name)`. It lets a test crash a real server at an exact
instant, e.g. after the second of five files of a rewind, and check what the next start repairs.
"""

from __future__ import annotations

import os

_passes: dict[str, int] = {}


def failpoint(name: str) -> None:
    """Die here if `FOYA_FAILPOINT` names this point and its count is reached."""
    spec = os.environ.get("FOYA_FAILPOINT")
    if not spec:
        return
    wanted, _, count = spec.partition(":")
    if wanted != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] >= int(count or 1):
        os._exit(137)
