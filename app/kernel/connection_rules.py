"""A connection's record and the rules its fields keep: the stored shape (`ConnectionRecord`,
with the key), the one clients see (`Connection`, without it), and the checks a record read
from the file or a request's fields must pass."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, cast
from urllib.parse import urlsplit

from typing_extensions import TypedDict

from app.errors import BadRequest, FoyaError, NotFound
from app.jsontypes import JSONObject
from app.logs import get_logger
from app.providers.base import PROTOCOLS as VIDEO_PROTOCOLS
from app.providers.base import VideoProtocol
from app.text.surrogates import scrub

ConnectionType = Literal["language", "image", "video"]
TYPES: tuple[ConnectionType, ...] = ("language", "image", "video")
PURPOSES = ("language", "fast", "image", "video")
# Given as "" they keep the current value on PATCH (Foya's rule).
KEEP_IF_EMPTY = ("name", "type", "kind", "auth_kind", "base_url", "api_key")
_LIMITS = ("context_window", "max_input_tokens", "max_output_tokens")
DISCOVERY_TIMEOUT = 30.0


class ConnectionNotFound(NotFound):
    """The URL (or a default model's choice) names no connection."""

    code = "connection_not_found"


class UnknownConnection(BadRequest):
    """A request body's `connection_id` names no connection."""

    code = "connection_not_found"


class UnsupportedAuthKind(BadRequest):
    """A connection's `auth_kind` other than `api_key`."""

    code = "unsupported_auth_kind"


class ModelsFailed(FoyaError):
    """The provider did not list its models."""

    status = 502
    code = "models_failed"


class Connection(TypedDict):
    """A connection as clients see it: `has_api_key`, never the key."""

    id: str
    name: str
    type: ConnectionType
    video_protocol: NotRequired[VideoProtocol]
    kind: str
    auth_kind: str
    base_url: str
    has_api_key: bool
    models: list[str]
    models_cached: bool
    sort_order: int
    model_settings: dict[str, JSONObject]


class ConnectionRecord(TypedDict):
    """A connection as `connections.json` keeps it: the key too, and `video_protocol` always
    (empty but on a `video` connection). `model_settings` holds each model's settings as the
    client sent them."""

    id: str
    name: str
    type: ConnectionType
    kind: str
    auth_kind: str
    base_url: str
    api_key: str
    video_protocol: str
    models: list[str]
    models_cached: bool
    sort_order: int
    model_settings: dict[str, JSONObject]


class ConnectionFields(TypedDict, total=False):
    """The fields a request gives to create, change or try a connection (any may be left out);
    `id` names a saved one (model discovery only)."""

    id: str
    name: str
    type: str
    kind: str
    auth_kind: str
    base_url: str
    api_key: str
    video_protocol: str
    models: list[str]
    models_cached: bool
    sort_order: int
    model_settings: dict[str, JSONObject]
    has_api_key: bool


class Models(TypedDict):
    """`GET /connections/{id}/models`."""

    models: list[str]
    context_windows: NotRequired[dict[str, int]]


def public(connection: ConnectionRecord) -> Connection:
    """The connection as clients see it: never the key."""
    shown: Connection = {
        "id": connection["id"],
        "name": connection["name"],
        "type": connection["type"],
        "kind": connection["kind"],
        "auth_kind": connection["auth_kind"],
        "base_url": connection["base_url"],
        "has_api_key": bool(connection["api_key"]),
        "models": connection["models"],
        "models_cached": connection["models_cached"],
        "sort_order": connection["sort_order"],
        "model_settings": connection["model_settings"],
    }
    protocol = video_protocol(connection)
    if protocol is not None:
        shown["video_protocol"] = protocol
    return shown


def video_protocol(connection: ConnectionRecord) -> VideoProtocol | None:
    """The protocol a `video` connection speaks; None for the other types."""
    protocol = connection["video_protocol"]
    if connection["type"] != "video":
        return None
    for known in VIDEO_PROTOCOLS:
        if protocol == known:
            return known
    return None


def _printable_ascii(value: str) -> bool:
    return value.isascii() and value.isprintable()


def check_base_url(value: str) -> None:
    """Empty (the provider's default) or an absolute http(s) URL without credentials."""
    if value == "":
        return
    if not _printable_ascii(value):
        raise BadRequest(
            "base_url: must be an http:// or https:// URL in printable ASCII "
            "(punycode for international names)"
        )
    problem = BadRequest(
        "base_url: must be an http:// or https:// URL with a host (and a port from 1 to 65535, "
        "if any), such as https://api.openai.com/v1"
    )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:  # an unclosed bracket, a port that is not a number from 0 to 65535
        raise problem from None
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise problem
    if " " in value:
        raise BadRequest("base_url: must not contain spaces (write them as %20)")
    if parts.username is not None or parts.password is not None:
        raise BadRequest("base_url: must not hold credentials; send the key as api_key")


def check_api_key(value: str) -> None:
    if not _printable_ascii(value):
        raise BadRequest("api_key: must be printable ASCII")


def check_model_settings(settings: dict[str, Any]) -> None:
    """Token limits are whole numbers ≥ 0, and no larger than the context window if one is set."""
    for model, setting in settings.items():
        if not isinstance(setting, dict):
            raise BadRequest(f"model_settings.{model}: must be an object")
        for name in _LIMITS:
            value = setting.get(name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise BadRequest(f"model_settings.{model}.{name}: must be zero or greater")
        window = setting.get("context_window") or 0
        for name in ("max_input_tokens", "max_output_tokens"):
            if window and (setting.get(name) or 0) > window:
                raise BadRequest(f"model_settings.{model}.{name}: cannot exceed context_window")


def check_fields(fields: ConnectionFields | ConnectionRecord) -> None:
    """The rules every given field must keep (types are the HTTP layer's)."""
    if "auth_kind" in fields and fields["auth_kind"] != "api_key":
        raise UnsupportedAuthKind("auth_kind: only api_key is supported")
    if "type" in fields and fields["type"] not in TYPES:
        raise BadRequest(f"type: must be one of {', '.join(TYPES)}")
    if "kind" in fields and fields["kind"] != "openai":
        raise BadRequest("kind: only openai is supported")
    if "base_url" in fields:
        check_base_url(fields["base_url"])
    if "api_key" in fields:
        check_api_key(fields["api_key"])
    if "model_settings" in fields:
        check_model_settings(fields["model_settings"])
    if fields.get("video_protocol", "") not in ("", *VIDEO_PROTOCOLS):
        raise BadRequest(f"video_protocol: must be one of {', '.join(VIDEO_PROTOCOLS)}")


def check_video_protocol(connection: ConnectionRecord) -> None:
    """A `video` connection says which protocol it speaks; no other connection has one."""
    if connection["type"] == "video" and not connection["video_protocol"]:
        raise BadRequest(
            f"video_protocol: a video connection needs one ({' or '.join(VIDEO_PROTOCOLS)})"
        )
    if connection["type"] != "video" and connection["video_protocol"]:
        raise BadRequest("video_protocol: only a video connection has one")


def normalized(raw: Any) -> ConnectionRecord | None:
    """A stored record in the shape the rest of the kernel relies on, or None (logged) if it
    cannot be served safely."""
    log = get_logger("foya.connections")
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"]:
        log.warning("connections.json: skipped a record without an id")
        return None
    raw = scrub(raw)

    def text(key: str, default: str) -> str:
        value = raw.get(key)
        return value if isinstance(value, str) else default

    record: ConnectionRecord = {
        "id": raw["id"],
        "name": text("name", "") or raw["id"],
        # A type outside TYPES is refused by the check below.
        "type": cast(ConnectionType, text("type", "language")),
        "kind": text("kind", "openai") or "openai",
        "auth_kind": text("auth_kind", "api_key") or "api_key",
        "base_url": text("base_url", ""),
        "api_key": text("api_key", ""),
        "models": [m for m in _list(raw.get("models")) if isinstance(m, str)],
        "models_cached": raw.get("models_cached") is True,
        "sort_order": raw.get("sort_order") if type(raw.get("sort_order")) is int else 0,
        "model_settings": {
            k: v for k, v in (raw.get("model_settings") or {}).items() if isinstance(v, dict)
        }
        if isinstance(raw.get("model_settings"), dict)
        else {},
        "video_protocol": "",
    }
    # A video connection stored without one (made before protocols) is kept: a PATCH fixes it.
    stored = raw.get("video_protocol")
    record["video_protocol"] = stored if isinstance(stored, str) else ""
    record["video_protocol"] = video_protocol(record) or ""
    try:
        check_fields(record)
    except BadRequest as exc:
        log.warning("connections.json: skipped a record", connection_id=record["id"], why=str(exc))
        return None
    return record


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def renumbered(ordered: list[ConnectionRecord]) -> dict[str, ConnectionRecord]:
    """The records by id, their `sort_order` their place in `ordered`."""
    return {c["id"]: {**c, "sort_order": i} for i, c in enumerate(ordered)}
