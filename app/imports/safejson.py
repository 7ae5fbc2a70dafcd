"""The one way imports read JSON: bounded, so no document can exhaust or crash the kernel.

A hostile archive can nest arrays 200,000 deep (a `RecursionError` wherever the value is later
walked), carry integers beyond what SQLite and the clock take (an `OverflowError` when stored),
`NaN` (JSON no other reader accepts), or one string of hundreds of megabytes. `loads` refuses
each of them with `UnsafeJSON`, a `ValueError`, so every parser's own handling of "not valid
JSON" (refuse the archive, skip the line, keep the text) applies to them too; `check` is the
same rule for values that did not come from JSON text (the kernel checks a whole bundle with it).
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 100  # arrays and objects inside each other; real histories stay below 20
MAX_STRING = 8 * 1024 * 1024  # characters of one string (a key or a value)
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # what SQLite stores


class UnsafeJSON(ValueError):
    """Valid JSON the kernel will not take: too deep, too large a number or string, NaN."""


def _constant(name: str) -> Any:
    raise UnsafeJSON(f"{name} is not a JSON number")


def loads(data: bytes | str) -> Any:
    """`data` decoded, or `ValueError` (`UnsafeJSON` for a valid document beyond the bounds,
    `UnicodeDecodeError` for bytes that are not UTF-8)."""
    try:
        # The decoder counts its own nesting: a document deeper than the interpreter's limit
        # is a clean RecursionError here, never a crash (checked down to 2,000,000 levels).
        value = json.loads(data, parse_constant=_constant)
    except RecursionError:
        raise UnsafeJSON(f"nested deeper than {MAX_DEPTH} levels") from None
    check(value)
    return value


def check(value: Any, where: str = "") -> None:
    """`UnsafeJSON` unless `value` nests at most `MAX_DEPTH` deep, its integers fit in 64 bits,
    its floats are finite and its strings are at most `MAX_STRING` characters. Iterative: a
    value too deep to walk recursively is refused, not a crash."""
    prefix = f"{where}: " if where else ""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise UnsafeJSON(f"{prefix}nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, inner in item.items():
                    stack.append((key, depth + 1))
                    stack.append((inner, depth + 1))
            else:
                stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, str):
            if len(item) > MAX_STRING:
                raise UnsafeJSON(f"{prefix}a string longer than {MAX_STRING} characters")
        elif isinstance(item, bool) or item is None:
            continue
        elif not isinstance(item, int | float):
            raise UnsafeJSON(f"{prefix}a {type(item).__name__} is not a JSON value")
        elif isinstance(item, int) and not INT_MIN <= item <= INT_MAX:
            raise UnsafeJSON(f"{prefix}an integer beyond 64 bits")
        elif isinstance(item, float) and not math.isfinite(item):
            raise UnsafeJSON(f"{prefix}a number that is not finite")
