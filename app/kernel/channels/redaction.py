"""Channel credentials masked in every text we produce and in the libraries' log records.

A Telegram bot token is part of every Bot API URL (`…/bot<token>/getMe`), so it shows up
wherever a URL does: httpx's request line at INFO, python-telegram-bot's base URL at DEBUG,
the text of its `InvalidToken`, an httpx error. Feishu's app secret and tenant tokens travel
in request bodies and headers, and its long-connection URL carries `access_key`/`ticket` in
its query, which websockets logs at DEBUG. Each platform `remember`s the secrets it holds
and `forget`s them when it stops; `redact` masks them in a text, and `watch` puts a filter
on a library's loggers that rewrites their records before any handler sees them.
"""

from __future__ import annotations

import logging
import re
import threading

MASK = "[redacted]"
# Credentials in a URL's query, whether or not we were told the secret itself.
_URL_SECRETS = re.compile(r"((?:access_key|ticket|app_secret|AppSecret)=)[^&\s'\"]+")

_lock = threading.Lock()  # platforms run on the loop; Feishu's SDK logs from its own thread
_secrets: dict[str, int] = {}  # secret → how many platforms hold it


def remember(secret: str) -> None:
    """Mask `secret` from now on, until as many `forget` calls."""
    if secret:
        with _lock:
            _secrets[secret] = _secrets.get(secret, 0) + 1


def forget(secret: str) -> None:
    """One holder of `secret` is gone; the last one stops its masking."""
    with _lock:
        left = _secrets.get(secret, 0) - 1
        if left > 0:
            _secrets[secret] = left
        else:
            _secrets.pop(secret, None)


def redact(text: str) -> str:
    """`text` with every remembered secret and every URL credential masked."""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)  # a longer secret may hold a shorter
    for secret in known:
        text = text.replace(secret, MASK)
    return _URL_SECRETS.sub(r"\1" + MASK, text)


class _RedactingFilter(logging.Filter):
    """Rewrites a record whose text holds a secret; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is the logging module's problem, not ours
            return True
        masked = redact(text)
        if masked != text:
            record.msg, record.args = masked, None
        return True


_FILTER = _RedactingFilter()


def watch(*names: str) -> None:
    """Redact the records of these loggers. A filter applies only to the records made by
    that very logger, not by its children, hence every name."""
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
