"""A push subscription as a browser hands it over, and the file that keeps them.

A browser's `PushSubscription` is an endpoint URL at its vendor's push service and two keys:
`p256dh` (the browser's P-256 public key, 65 bytes uncompressed) and `auth` (a 16-byte
secret), both base64url. Together they let anyone who holds them send to that browser, so
they are secrets: the wire shows a subscription's id, label, the endpoint's origin and when it
was added, never its keys or full URL.

`push-subscriptions.json` in the data directory: `{"version": 1, "subscriptions": [{id,
endpoint, p256dh, auth, label, created_at}]}`, oldest first, written atomically with mode 0600.
An entry that does not validate is dropped when the file is read. Subscribing an endpoint
again replaces its keys (a browser renews them) and keeps its id.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import asdict, dataclass, fields
from typing import Any

from typing_extensions import TypedDict
from yarl import URL

from app.errors import BadRequest, FoyaError, NotFound
from app.kernel.web.errors import FetchError
from app.kernel.web.fetch import check_url
from app.kernel.web.guard import AllowList

FILE, VERSION = "push-subscriptions.json", 1
#: More than one person's devices ever need; a bound on what a client can make us keep.
MAX_SUBSCRIPTIONS = 32
MAX_ENDPOINT = 2048
MAX_LABEL = 100


class SubscriptionNotFound(NotFound):
    """A subscription id that names none (removed, or expired at its push service)."""

    code = "push_subscription_not_found"


class TooMany(FoyaError):
    """A new subscription while `MAX_SUBSCRIPTIONS` are kept."""

    status = 409
    code = "push_subscriptions_full"


class SubscriptionWire(TypedDict):
    """A subscription as clients read it: nothing that lets them send to it."""

    id: str
    label: str
    origin: str
    created_at: str


@dataclass(frozen=True)
class Subscription:
    id: str
    endpoint: str
    p256dh: str
    auth: str
    label: str
    created_at: str

    def wire(self) -> SubscriptionWire:
        origin = str(URL(self.endpoint).origin())
        return {"id": self.id, "label": self.label, "origin": origin, "created_at": self.created_at}

    def stored(self) -> dict[str, str]:
        return asdict(self)

    def info(self) -> dict[str, Any]:
        """The subscription in the shape the Web Push libraries take."""
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


_FIELDS = tuple(f.name for f in fields(Subscription))


def _key(value: str, size: int, name: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise BadRequest(f"keys.{name}: not base64url") from None
    if len(raw) != size or (name == "p256dh" and raw[0] != 4):
        what = "an uncompressed P-256 public key" if name == "p256dh" else f"{size} bytes"
        raise BadRequest(f"keys.{name}: not {what}")
    return value.rstrip("=")


def checked_endpoint(endpoint: str, allow: AllowList) -> str:
    """`endpoint` if a push message may be sent there: a URL the guarded fetcher takes
    (`check_url`: a host, no credentials), https, or plain http only to a host the operator
    allow-listed (FOYA_WEB_FETCH_ALLOW_HOSTS, a push service of their own). Private addresses
    are refused when a message is sent."""
    if len(endpoint) > MAX_ENDPOINT:
        raise BadRequest(f"endpoint: longer than {MAX_ENDPOINT} characters")
    try:
        url = check_url(endpoint)
    except FetchError:
        raise BadRequest("endpoint: not an https URL with a host") from None
    if url.scheme != "https" and not allow.lists(url.host or ""):
        raise BadRequest("endpoint: not an https URL")
    return endpoint


def checked(
    endpoint: str, p256dh: str, auth: str, label: str, allow: AllowList
) -> tuple[str, str, str, str]:
    """The parts of a subscription a client sent, validated (`BadRequest` says what is wrong)."""
    label = " ".join(label.split())[:MAX_LABEL]
    endpoint = checked_endpoint(endpoint, allow)
    return endpoint, _key(p256dh, 65, "p256dh"), _key(auth, 16, "auth"), label


def loaded(raw: Any, allow: AllowList) -> Subscription | None:
    """An entry of the file, or None when it is not a valid subscription."""
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in _FIELDS):
        return None
    try:
        parts = checked(raw["endpoint"], raw["p256dh"], raw["auth"], raw["label"], allow)
    except BadRequest:
        return None
    return Subscription(raw["id"], *parts, raw["created_at"])
