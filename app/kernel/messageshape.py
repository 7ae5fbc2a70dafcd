"""The shape a stored message must have: checked on the way in (imports), mended on the way out.

The kernel's own `app.events.Message` is the model. An import is refused (`InvalidImport`)
unless every message validates against it strictly, with its text fields (`content`,
`model_content`, `model`) as strings — what the kernel itself stores. Messages already stored
(by an older version, or imported before this check) are served through `servable`: a field of
the wrong type for the model (what the history route's answer is validated against) is left
out and logged, so one bad record never breaks a history listing or an export, and the rest of
the message is still shown. (Content parts, a list, stay: older versions stored them.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from pydantic import TypeAdapter, ValidationError

from app.events import Message
from app.logs import get_logger

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)
# Typed `Any` in Message (read back from any version), but text whenever the kernel writes them.
_TEXT_FIELDS = ("content", "model_content", "model")


def problems(message: Mapping[str, Any]) -> list[str]:
    """What is wrong with `message` as a message the kernel would store (empty: nothing)."""
    found = []
    try:
        _MESSAGE.validate_python(message, strict=True)
    except ValidationError as exc:
        for error in exc.errors(include_url=False, include_input=False):
            where = ".".join(str(part) for part in error["loc"]) or "message"
            found.append(f"{where}: {error['msg']}")
    for name in _TEXT_FIELDS:
        if name in message and message[name] is not None and not isinstance(message[name], str):
            found.append(f"{name}: must be a string")
    return found


def servable(message: Mapping[str, Any], *, session: str = "") -> Message:
    """`message` without the fields whose type is wrong (each one logged), so that it can be
    rendered; a message that is not even an object with a role becomes an empty system note."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        get_logger("foya.messages").warning(
            "skipped a stored message without a role", session=session
        )
        return {"role": "system", "content": ""}
    bad = _bad_fields(message)
    if not bad:
        return cast(Message, message)
    get_logger("foya.messages").warning(
        "left out fields of a stored message", session=session, fields=sorted(bad)
    )
    return cast(Message, {k: v for k, v in message.items() if k not in bad})


def _bad_fields(message: Mapping[str, Any]) -> set[str]:
    bad = set()
    try:
        _MESSAGE.validate_python(dict(message))
    except ValidationError as exc:
        bad = {str(e["loc"][0]) for e in exc.errors(include_url=False) if e["loc"]}
    bad.discard("role")
    return bad
