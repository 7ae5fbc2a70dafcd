"""The JSON of a ChatBuddy backup, decoded and checked value by value.

Every check names where the value sits (the archive member, the line, the field) in the
`InvalidImport` it raises, so a refused backup says what to look at. Decoding goes through
app.imports.safejson (bounded nesting and size).
"""

from __future__ import annotations

from typing import Any

from app.imports import safejson
from app.imports.model import InvalidImport
from app.jsontypes import JSONObject


def number_of(value: Any, where: str) -> float:
    """`value` if it is a JSON number, else `InvalidImport` naming `where`."""
    # JSON numbers only: a bool is an int to Python, not to JSON.
    if type(value) not in (int, float):
        raise InvalidImport(f"{where} {value!r} is not a number")
    number: float = value  # kept as written (2, not 2.0) for messages
    return number


def json_of(raw: bytes, where: str) -> Any:
    """`raw` decoded as one JSON document (a BOM allowed), else `InvalidImport`."""
    try:
        return safejson.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InvalidImport(f"{where} is not UTF-8 text") from None
    except safejson.UnsafeJSON as exc:
        raise InvalidImport(f"{where}: {exc}") from None
    except (ValueError, RecursionError):
        raise InvalidImport(f"{where} is not valid JSON") from None


def jsonl_of(raw: bytes, where: str) -> list[Any]:
    """`raw` as JSON Lines of objects (blank lines skipped), else `InvalidImport` naming the
    line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidImport(f"{where} is not UTF-8 text") from None
    messages = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            message = safejson.loads(line)
        except safejson.UnsafeJSON as exc:
            raise InvalidImport(f"{where} line {number}: {exc}") from None
        except (ValueError, RecursionError):
            raise InvalidImport(f"{where} line {number} is not valid JSON") from None
        messages.append(as_object(message, f"{where} line {number}"))
    return messages


def as_object(value: Any, where: str) -> JSONObject:
    """`value` if it is a JSON object, else `InvalidImport` naming `where`."""
    if not isinstance(value, dict):
        raise InvalidImport(f"{where} is not a JSON object")
    return value


def as_array(value: Any, where: str) -> list[Any]:
    """`value` if it is a JSON array, else `InvalidImport` naming `where`."""
    if not isinstance(value, list):
        raise InvalidImport(f"{where} is not a JSON array")
    return value


def as_text(value: Any, where: str) -> str:
    """`value` if it is a non-empty string, else `InvalidImport` naming `where`."""
    if not isinstance(value, str) or not value:
        raise InvalidImport(f"{where} is not a non-empty string")
    return value


def as_optional_text(value: Any, where: str) -> str:
    """`value` if it is a string, "" if it is absent (None), else `InvalidImport`."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidImport(f"{where} is not a string")
    return value


def count_of(value: Any) -> int:
    """How many items `value` holds if it is a JSON array, else 0."""
    return len(value) if isinstance(value, list) else 0
