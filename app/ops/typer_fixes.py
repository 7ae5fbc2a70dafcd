"""A work-around for typer's start-up cost, applied by `foya` (app.cli) before it parses."""

from __future__ import annotations

from typing import Any


def defer_typer_coercion() -> None:
    """Let typer skip coercing the options that were not given.

    typer 0.29 coerces each parameter's value through a pydantic `TypeAdapter` it builds the
    first time the parameter is processed, even when there is no value (--help on every run),
    so every command imported pydantic (~40 ms) before it began. A missing value coerces to
    None (or () for a repeatable option), and a string given to a plain `str` parameter to
    itself: those are answered without the adapter (the thin clients take their paths as
    `str` for that). A typer without that machinery is left as it is.
    """
    from typer import core

    param = getattr(core, "_TyperParameter", None)
    build: Any = getattr(param, "get_runtime_param", None)
    if param is None or build is None:
        return

    class Deferred:
        """Stands in for a parameter's coercion until it has a value to coerce."""

        def __init__(self, owner: Any) -> None:
            self.owner = owner

        def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
            if value is None:
                return () if param.multiple or param.nargs == -1 else None
            desc = param.type_descriptor
            if isinstance(value, str) and desc.annotation is str and not desc.parameter_info.parser:
                return value
            return build(self.owner).coerce(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        return Deferred(self) if self._runtime_param is None else self._runtime_param

    param.get_runtime_param = get_runtime_param
