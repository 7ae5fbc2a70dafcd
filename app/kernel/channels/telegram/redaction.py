"""Bot tokens masked in every text we produce and in the log records of the libraries we use.

The token is part of every Bot API URL (`…/bot<token>/getMe`), so it shows up wherever a URL
does: httpx logs each request line at INFO (`HTTP Request: POST https://…/bot<token>/…`),
python-telegram-bot logs its base URL at DEBUG and puts the token in the text of the
`InvalidToken` its `initialize` raises, and an httpx error may quote the URL. Every token in
use is registered here; `redact` masks them in a text, and a logging filter on those
libraries' loggers rewrites their records before any handler sees them.
"""

from __future__ import annotations

import logging
import threading

MASK = "<token>"

# The loggers whose records can hold a Bot API URL. A filter on a logger applies only to the
# records made by that very logger (not its children), hence every name.
_LOGGERS = (
    "httpx",
    "httpcore",
    "telegram",
    "telegram.Bot",
    "telegram.request.BaseRequest",
    "telegram.request.HTTPXRequest",
)

_lock = threading.Lock()
_tokens: dict[str, int] = {}  # token → how many platforms use it


def redact(text: str) -> str:
    """`text` with every registered token replaced by `<token>`."""
    for token in list(_tokens):
        if token in text:
            text = text.replace(token, MASK)
    return text


def register(token: str) -> None:
    """Mask `token` from now on (until as many `unregister` calls)."""
    with _lock:
        _tokens[token] = _tokens.get(token, 0) + 1
        _install()


def unregister(token: str) -> None:
    """One user of `token` is gone; the last one stops its masking."""
    with _lock:
        left = _tokens.get(token, 0) - 1
        if left > 0:
            _tokens[token] = left
        else:
            _tokens.pop(token, None)


class _RedactingFilter(logging.Filter):
    """Rewrites a record whose text holds a token; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _tokens:
            return True
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is the logging module's problem, not ours
            return True
        masked = redact(text)
        if masked != text:
            record.msg, record.args = masked, None
        return True


_FILTER = _RedactingFilter()


def _install() -> None:
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
