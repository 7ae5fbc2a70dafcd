"""The kernel's VAPID identity (RFC 8292) and the sealing of a push message (RFC 8291).

The key is a P-256 private key in `push-vapid.pem` in the data directory (mode 0600), made on
first use and kept for good: a browser subscribes with its public half (`public_key`, what
`PushManager.subscribe` takes as `applicationServerKey`), and a new key would orphan every
subscription. Each message carries a JWT signed with it (`aud` the push service's origin, `exp`
12 hours ahead, `sub` the operator's contact, FOYA_PUSH_CONTACT) and is encrypted to the
browser's keys with `aes128gcm`, so the push service carries it without reading it.

pywebpush does the encryption and py_vapid the signature; we send the result ourselves through
the guarded fetcher (app.kernel.web.fetch), never with pywebpush's own HTTP client. Both
libraries are imported on the first message, not at start.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from yarl import URL

from app.files import write_bytes_atomic

if TYPE_CHECKING:
    from py_vapid import Vapid02  # type: ignore[import-untyped]

KEY_FILE = "push-vapid.pem"
TOKEN_LIFE = 12 * 3600


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Vapid:
    """Signs and seals push messages with the data directory's key."""

    def __init__(self, data_dir: Path, contact: str) -> None:
        self.path = data_dir / KEY_FILE
        self.contact = contact
        self._key: Vapid02 | None = None
        self._making = threading.Lock()  # messages are sealed in parallel threads

    def _loaded(self) -> Vapid02:
        """The key, read or made (blocking: call it from a worker thread)."""
        with self._making:
            if self._key is not None:
                return self._key
            from py_vapid import Vapid02

            if self.path.exists():
                key = Vapid02.from_file(str(self.path))
            else:
                key = Vapid02()
                key.generate_keys()
                write_bytes_atomic(self.path, key.private_pem(), mode=0o600)
            self._key = key
            return key

    def public_key(self) -> str:
        """The public key, base64url of its uncompressed point (blocking)."""
        point = self._loaded().public_key.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return _b64url(point)

    def seal(self, info: dict[str, Any], payload: bytes) -> tuple[bytes, dict[str, str]]:
        """`payload` encrypted to the subscription `info`, and the VAPID headers for its
        endpoint (blocking: a worker thread's)."""
        from pywebpush import WebPusher  # type: ignore[import-untyped]

        origin = str(URL(info["endpoint"]).origin())
        claims = {"aud": origin, "sub": self.contact, "exp": int(time.time()) + TOKEN_LIFE}
        headers: dict[str, str] = self._loaded().sign(claims)
        body: bytes = WebPusher(info).encode(payload, "aes128gcm")["body"]
        return body, headers
