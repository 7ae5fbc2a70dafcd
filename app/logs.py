"""Structured logs: JSON lines when stdout is not a TTY, a readable console otherwise.

Our own events go straight through structlog (a level-filtering logger writing to stdout: no
stdlib record, no second formatting pass — the request line is on every request's path).
Third-party stdlib records (hypercorn) are rendered by the same processors through
`ProcessorFormatter`, so every line leaves the process in one format. `redact` runs before
rendering: any key that looks like a credential is masked, a second line of defence behind never
logging headers or keys at all.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any, Literal

# structlog's console renderer imports `rich` when it is installed (Typer brings it) for its
# tracebacks: ~30 ms and 90 modules of every start-up. Ours renders plain tracebacks instead.
_RICH_ABSENT = "rich" not in sys.modules
if _RICH_ABSENT:
    sys.modules["rich"] = None  # type: ignore[assignment]
import structlog  # noqa: E402

if _RICH_ABSENT:
    del sys.modules["rich"]

_SECRET_KEYS = ("authorization", "token", "api_key", "apikey", "password", "secret", "cookie")


@functools.lru_cache(maxsize=512)
def _secret(key: str) -> bool:
    lowered = key.lower()
    return any(s in lowered for s in _SECRET_KEYS)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Mask values under keys that name credentials."""
    for key in event:
        if _secret(key):
            event[key] = "[redacted]"
    return event


def configure_logging(
    fmt: Literal["auto", "json", "console"] = "auto", level: str = "info"
) -> None:
    """Route structlog and stdlib logging to stdout in one format. Call once, from the CLI."""
    as_json = fmt == "json" or (fmt == "auto" and not sys.stdout.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
    )
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            stamp,
            structlog.processors.format_exc_info,
            redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_log_level, stamp, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # hypercorn logs one line per request itself; ours carries the route template and request id.
    logging.getLogger("hypercorn.access").disabled = True


def get_logger(name: str = "foya") -> Any:
    """A structlog logger that tags its lines with `logger=name`."""
    return structlog.get_logger().bind(logger=name)


class Throttle:
    """At most one log line per key every `interval` seconds; counts the lines it held back.

    For lines a flood can repeat thousands of times a second (an `accept()` that keeps failing):
    the first goes out, the rest are counted and reported by the next one that is let through.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> int | None:
        """None to hold this line back; else how many were held back since the last one."""
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)
