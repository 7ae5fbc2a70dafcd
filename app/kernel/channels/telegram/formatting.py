"""An `Outbound` as Telegram HTML: escaped text, the status line in italics, the 4,096 limit.

We send `parse_mode="HTML"` because its escaping is three characters (`&`, `<`, `>`) and
nothing else is special, where MarkdownV2 has eighteen. Telegram's limit is on the text
*after* entity parsing (`&lt;` counts as one character, tags as none), counted in UTF-16 code
units, and it trims the text (a whitespace-only part is "message text is empty"). So the plain
text is split first and each part escaped after: a cut can never fall inside a tag or an
escape sequence, and a part's escaped HTML carries exactly the characters counted. A cut
prefers a line break, then a space, in the second half of the part.
"""

from __future__ import annotations

import html
import re

from app.kernel.channels.platform import Outbound

MAX_TEXT = 4096
STATUS_MAX = 200  # characters of the status line; it is one short line above the text
EMPTY = "…"  # what an empty message shows: Telegram refuses an empty text
_SURROGATE = re.compile("[\ud800-\udfff]")


def utf16_len(text: str) -> int:
    """The length Telegram counts: UTF-16 code units (a character beyond U+FFFF is two)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def escape(text: str) -> str:
    """Plain text as Telegram HTML that shows it unchanged."""
    return html.escape(text, quote=False)


def render(message: Outbound, limit: int = MAX_TEXT) -> list[str]:
    """The HTML texts of the messages `message` takes, in order (one unless it is long)."""
    status, text = _clean(message.status, one_line=True)[:STATUS_MAX], _clean(message.text)
    if not text:
        return [_italic(status) if status else EMPTY]
    head = utf16_len(status) + 1 if status else 0  # the status and its line break
    parts = [escape(part) for part in split(text, limit - head, limit)]
    if status:
        parts[0] = f"{_italic(status)}\n{parts[0]}"
    return parts


def render_one(message: Outbound, limit: int = MAX_TEXT) -> str:
    """`message` as one HTML text, cut short with an ellipsis if it is too long (an edit)."""
    parts = render(message, limit - 1)
    if len(parts) == 1:
        return parts[0]
    return parts[0] + EMPTY


def split(text: str, first: int, rest: int) -> list[str]:
    """`text` (stripped) in parts of at most `first`, then `rest`, UTF-16 units; none empty."""
    parts: list[str] = []
    budget = first
    while text:
        if utf16_len(text) <= budget:
            parts.append(text)
            break
        fit = _fit(text, budget)
        cut = text.rfind("\n", fit // 2, fit)
        if cut <= 0:
            cut = text.rfind(" ", fit // 2, fit)
        if cut <= 0:
            cut = fit
        parts.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
        budget = rest
    return parts


def _fit(text: str, budget: int) -> int:
    """How many characters of `text` fit in `budget` UTF-16 units (at least one)."""
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > budget:
            return max(index, 1)
    return len(text)


def _clean(text: str, *, one_line: bool = False) -> str:
    # A lone surrogate cannot be encoded for the wire at all.
    text = _SURROGATE.sub("\ufffd", text)
    if one_line:
        text = " ".join(text.split())
    return text.strip()


def _italic(text: str) -> str:
    return f"<i>{escape(text)}</i>"
