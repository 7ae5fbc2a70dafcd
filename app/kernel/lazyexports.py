"""Names a package (or the kernel's surface) re-exports, imported only when first looked up.

A package's `__init__` that imports its modules to re-export their names makes every import of
any of its modules load all of them: a start that needs one small module of a capability (a
file name, a clock) would pay for the whole capability. `LazyExports` is such a package's
module `__getattr__` instead: each name is imported from its home on its first lookup and bound
in the package, so later lookups are plain attribute reads. Type checkers read the names from
the package's `if TYPE_CHECKING:` imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence


class LazyExports:
    """A module `__getattr__` for `package`: `homes` maps each module to the names it gives
    (`"alias=name"` gives the module's `name` as `alias`)."""

    def __init__(self, package: str, homes: Mapping[str, Sequence[str]]) -> None:
        self.package = package
        #: alias -> (home module, its name there)
        self.homes: dict[str, tuple[str, str]] = {}
        for module, names in homes.items():
            for entry in names:
                alias, _, name = entry.partition("=")
                self.homes[alias] = (module, name or alias)

    def __call__(self, name: str) -> object:
        home = self.homes.get(name)
        if home is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(home[0]), home[1])
        setattr(sys.modules[self.package], name, value)
        return value
