"""Process-wide switches that make `foya serve` start lighter without changing what it does.

- structlog imports `rich` (installed for typer's help) to pretty-print tracebacks; a server
  that logs JSON pays ~3 MiB and ~40 ms at every start for it. Plain tracebacks instead.
- FastAPI imports pydantic's legacy `v1` package while it builds routes, only to refuse v1
  models (we have none): blocked, its check answers "not v1" (~10 ms, ~1.5 MiB).
- Every pydantic model defined from here on builds its validator and serializer on first use
  (`defer_build`) instead of when its class is created: the kernel defines hundreds of models
  (request bodies, stored payloads, settings files) and a start that only answers probes needs
  few of them (~10% of the time to listen, ~2 MB resident). What a model accepts and writes is
  the same either way; it is only built later, once.

Called by `foya serve` before it imports the server; never by tests or the other commands.
"""

from __future__ import annotations

import sys


def lean_start() -> None:
    """Block the imports start-up never uses and defer pydantic's model building."""
    for legacy in ("rich", "pydantic.v1"):
        sys.modules.setdefault(legacy, None)  # type: ignore[arg-type]  # None blocks an import
    import pydantic

    # The base class's config is merged into every subclass defined after this line.
    pydantic.BaseModel.model_config["defer_build"] = True
