"""What the `foya` commands share to read their settings: the environment, overridden by the
flags given, and the deprecated names of renamed flags. Light at import: pydantic-settings is
imported when a command builds its settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import typer

from app.ops.client_flags import fail

if TYPE_CHECKING:
    from app.settings import Settings

T = TypeVar("T")


def build_settings(**flags: Any) -> Settings:
    """Settings from the environment, overridden by the flags that were given."""
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:  # a FOYA_* variable (or a flag) has a bad value
        first = exc.errors()[0]
        name = "FOYA_" + str(first["loc"][0]).upper() if first.get("loc") else "settings"
        fail(f"{name}: {first['msg']}")


def renamed(new: T | None, new_flag: str, old: T | None, old_flag: str) -> T | None:
    """The value of a flag given by its name or by its deprecated old name (hidden in help)."""
    if old is None:
        return new
    if new is not None:
        fail(f"give {new_flag} only ({old_flag} is its deprecated old name)")
    typer.echo(f"foya: {old_flag} is deprecated; use {new_flag}", err=True)
    return old
