"""Unicode hygiene for text that crosses a boundary: lone UTF-16 surrogates.

JSON may spell a lone surrogate (`"\\ud800"`) and Python's `json` decodes it into a `str` that no
UTF-8 encoder accepts: SQLite, our JSON files and every response would fail on it later. Requests
carrying one are refused at the HTTP boundary (`has_lone_surrogate`); data that was stored by
hand before that (an edited `projects.json`) is served with U+FFFD in its place (`scrub`).
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in `value` (a decoded JSON document: keys included) holds a surrogate.

    `json` joins a valid escaped pair (`"\\ud83d\\ude00"`) into one character, so any surrogate
    left in a decoded string is a lone one."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


def scrub(value: Any) -> Any:
    """`value` with every surrogate in its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value
