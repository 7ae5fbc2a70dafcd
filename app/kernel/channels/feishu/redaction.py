"""Keeping Feishu credentials out of every text we or the SDK write: the app secrets and
tenant tokens of the running platforms, and the `access_key`/`ticket` of a long-connection URL.

The SDK logs through the stdlib logger `Lark` (with its own stdout handler, which would break
our one-format logs); `quiet_sdk_logger()` drops that handler, so its records reach ours, and
puts a redacting filter on it and on `websockets.client`.
"""

from __future__ import annotations

import logging
import re
import threading

_MASK = "[redacted]"
# The long-connection URL the endpoint answers carries its credentials in the query.
_URL_SECRETS = re.compile(r"((?:access_key|ticket|app_secret|AppSecret)=)[^&\s'\"]+")

_lock = threading.Lock()
_secrets: dict[str, int] = {}  # secret -> how many platforms hold it


def remember(secret: str) -> None:
    """Mask `secret` from now on (until `forget`)."""
    if secret:
        with _lock:
            _secrets[secret] = _secrets.get(secret, 0) + 1


def forget(secret: str) -> None:
    with _lock:
        left = _secrets.get(secret, 0) - 1
        if left > 0:
            _secrets[secret] = left
        else:
            _secrets.pop(secret, None)


def redact(text: str) -> str:
    """`text` with every remembered secret and URL credential masked."""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, _MASK)
    return _URL_SECRETS.sub(r"\1" + _MASK, text)


class _RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


_FILTER = _RedactingFilter()


def quiet_sdk_logger() -> None:
    """Route the SDK's `Lark` logger through ours, redacted, at WARNING and above."""
    logger = logging.getLogger("Lark")
    for handler in list(logger.handlers):
        if isinstance(handler, logging.StreamHandler):
            logger.removeHandler(handler)
    logger.setLevel(logging.WARNING)
    # websockets logs the handshake's request line (with the URL's credentials) at DEBUG.
    for each in (logger, logging.getLogger("websockets.client")):
        if _FILTER not in each.filters:
            each.addFilter(_FILTER)
