"""Structured logs: JSON lines when stdout is not a TTY, a readable console otherwise.

structlog renders our own events and, through `ProcessorFormatter`, hypercorn's stdlib records too,
so every line leaves the process in one format. `redact` runs last before rendering: any key that
looks like a credential is masked, a second line of defence behind never logging headers at all.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal

import structlog

_SECRET_KEYS = ("authorization", "token", "api_key", "apikey", "password", "secret", "cookie")


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Mask values under keys that name credentials."""
    for key in list(event):
        if any(s in key.lower() for s in _SECRET_KEYS):
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
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
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
    root.setLevel(level.upper())
    # hypercorn logs one line per request itself; ours carries the route template and request id.
    logging.getLogger("hypercorn.access").disabled = True


def get_logger(name: str = "foya") -> Any:
    """A bound structlog logger."""
    return structlog.stdlib.get_logger(name)
