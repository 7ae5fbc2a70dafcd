"""The interactive card (message card JSON 1.0) a Feishu message of ours is, and the
splitting of a long text over several cards.

One card: an optional `note` element (the status line), a `markdown` element (the text,
escaped so it shows as typed) and an optional `action` element with one button per
`Button`, its `value` `{"data": <Button.data>}` coming back in the `card.action.trigger`
callback. `config.update_multi` is set because Feishu only lets a shared card be patched.

Limits: Feishu refuses a card over about 30 KB of JSON. `MAX_TEXT` (4000 characters) keeps a
card readable on a phone, and `split` also keeps each piece's escaped UTF-8 under
`_MAX_TEXT_BYTES`, so even a text of escaped symbols or 4-byte emoji fits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.kernel.channels.platform import Button

MAX_TEXT = 4000
_MAX_TEXT_BYTES = 24_000  # the rest of 30 KB is left to the JSON, the note and the buttons
# Feishu's card markdown takes HTML character references for its syntax characters; a line
# starting with `-`, `+` or `1.` would also become a list, so those are escaped where they
# lead a line.
_ESCAPED = {c: f"&#{ord(c)};" for c in "&<>*_~`[]#|\\"}
_TABLE = str.maketrans(_ESCAPED)
_EMPTY = "&#8203;"  # a zero-width space: a markdown element may not be empty


def escape(text: str) -> str:
    """`text` as Feishu card markdown that renders exactly as `text`."""
    lines = text.translate(_TABLE).split("\n")
    out = []
    for line in lines:
        stripped = line.lstrip(" ")
        indent = line[: len(line) - len(stripped)]
        if stripped[:1] in ("-", "+"):
            stripped = f"&#{ord(stripped[0])};{stripped[1:]}"
        else:
            digits = len(stripped) - len(stripped.lstrip("0123456789"))
            if digits and stripped[digits : digits + 1] == ".":
                stripped = f"{stripped[:digits]}&#46;{stripped[digits + 1 :]}"
        out.append(indent + stripped)
    return "\n".join(out)


def card(text: str, status: str = "", buttons: Sequence[Button] = ()) -> dict[str, Any]:
    """The card JSON of one message."""
    elements: list[dict[str, Any]] = []
    if status:
        elements.append({"tag": "note", "elements": [{"tag": "plain_text", "content": status}]})
    elements.append({"tag": "markdown", "content": escape(text) if text else _EMPTY})
    if buttons:
        actions = [
            {
                "tag": "button",
                "text": {"tag": "plain_text", "content": b.label},
                "type": "default",
                "value": {"data": b.data},
            }
            for b in buttons
        ]
        elements.append({"tag": "action", "actions": actions})
    return {"config": {"wide_screen_mode": True, "update_multi": True}, "elements": elements}


def content(card_json: dict[str, Any]) -> str:
    """The `content` field of a message create or patch: the card as a JSON string."""
    return json.dumps(card_json, ensure_ascii=False, separators=(",", ":"))


def split(text: str, limit: int = MAX_TEXT) -> list[str]:
    """`text` in pieces of at most `limit` characters (and escaped bytes), cut at a line
    break where one is in the second half of a piece; at least one piece."""
    pieces: list[str] = []
    rest = text
    while len(rest) > 0:
        piece = rest[:limit]
        while len(escape(piece).encode()) > _MAX_TEXT_BYTES:
            piece = piece[: len(piece) * 3 // 4]
        if len(piece) < len(rest):
            cut = piece.rfind("\n")
            if cut >= len(piece) // 2:
                piece = piece[: cut + 1]
        pieces.append(piece)
        rest = rest[len(piece) :]
    return pieces or [""]


def fit(text: str, limit: int = MAX_TEXT) -> str:
    """`text` cut to one piece, ending in `…` if it was longer (an edit is one message)."""
    first = split(text, limit)[0]
    return first if len(first) == len(text) else first[: max(len(first) - 1, 0)] + "…"
