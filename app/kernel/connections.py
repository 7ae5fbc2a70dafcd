"""Provider connections (bring your own key) in `<data-dir>/connections.json`, mode 0600.

The API key is write-only: `public()` is the only shape that leaves the kernel, and it carries
`has_api_key` instead of the key. Default models per purpose live in `default-models.json`.

Rules (Foya's, except where noted):

- `sort_order` is a position in one list of all connections, always 0..n-1. Creating with a
  `sort_order` inserts there (else at the end); PATCHing one moves the connection there; every
  change renumbers. The first `language` connection in that order serves new sessions when no
  `language` default is set.
- PATCH changes the fields given; `null`, and `""` for name, type, kind, auth_kind, base_url and
  api_key, mean "keep" (Foya's empty-string rule). Deviation: fields left out are kept (Foya
  replaces models and model_settings and moves the connection to position 0).
- A new `base_url` without a new `api_key` drops the stored key (Foya keeps it): a key is never
  sent to a host it was not given for.
- `video_protocol` (`seedance` or `minimax_h3`) is required on a `video` connection and refused
  on the others; a connection that stops being `video` loses it. `GET` leaves it out when empty.
- `models_cached` is the client's flag (Foya's desktop sets it once it has imported models and
  then reads `models` instead of asking the provider): stored as sent, `false` until sent.
- `base_url` is empty or an http(s) URL in printable ASCII; `api_key` is printable ASCII (it
  travels in a header). A record in the file that breaks these (edited by hand) is skipped with a
  log line instead of breaking every listing.
- Nothing is kept in memory that was not written: a failed write (a full disk) changes nothing.

`discover_models` (`POST /connections/discover-models`) asks a provider for its models without
saving anything: the body is a connection, saved or not; a saved one's key (`id`) is used when
no key is given and the base URL is its own. A provider that fails or is silent for
`DISCOVERY_TIMEOUT` seconds is 502 `models_failed`, its message naming the host, never the key.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Literal, NotRequired
from urllib.parse import urlsplit

from typing_extensions import TypedDict

from app.errors import BadRequest, FoyaError, NotFound
from app.files import write_json_atomic
from app.kernel.ids import new_id
from app.logs import get_logger
from app.providers.base import PROTOCOLS as VIDEO_PROTOCOLS
from app.providers.base import ProviderError, VideoProtocol
from app.text.surrogates import scrub

ConnectionType = Literal["language", "image", "video"]
TYPES: tuple[ConnectionType, ...] = ("language", "image", "video")
PURPOSES = ("language", "fast", "image", "video")
# Given as "" they keep the current value on PATCH (Foya's rule).
_KEEP_IF_EMPTY = ("name", "type", "kind", "auth_kind", "base_url", "api_key")
_LIMITS = ("context_window", "max_input_tokens", "max_output_tokens")
DISCOVERY_TIMEOUT = 30.0


class ConnectionNotFound(NotFound):
    """No such connection."""


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
    model_settings: dict[str, dict[str, Any]]


class Models(TypedDict):
    """`GET /connections/{id}/models`."""

    models: list[str]
    context_windows: NotRequired[dict[str, int]]


def public(connection: dict[str, Any]) -> Connection:
    """The connection as clients see it: never the key."""
    shown: Connection = {
        "id": connection["id"],
        "name": connection["name"],
        "type": connection["type"],
        "kind": connection["kind"],
        "auth_kind": connection["auth_kind"],
        "base_url": connection["base_url"],
        "has_api_key": bool(connection.get("api_key")),
        "models": connection["models"],
        "models_cached": bool(connection.get("models_cached")),
        "sort_order": connection["sort_order"],
        "model_settings": connection["model_settings"],
    }
    protocol = video_protocol(connection)
    if protocol is not None:
        shown["video_protocol"] = protocol
    return shown


def video_protocol(connection: dict[str, Any]) -> VideoProtocol | None:
    """The protocol a `video` connection speaks; None for the other types."""
    protocol = connection.get("video_protocol")
    if connection.get("type") != "video":
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


def _check(fields: dict[str, Any]) -> None:
    """The rules every given field must keep (types are the HTTP layer's)."""
    if "auth_kind" in fields and fields["auth_kind"] != "api_key":
        raise BadRequest("auth_kind: only api_key is supported", code="unsupported_auth_kind")
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


def _check_video_protocol(connection: dict[str, Any]) -> None:
    """A `video` connection says which protocol it speaks; no other connection has one."""
    if connection["type"] == "video" and not connection["video_protocol"]:
        raise BadRequest(
            f"video_protocol: a video connection needs one ({' or '.join(VIDEO_PROTOCOLS)})"
        )
    if connection["type"] != "video" and connection["video_protocol"]:
        raise BadRequest("video_protocol: only a video connection has one")


def _normalized(raw: Any) -> dict[str, Any] | None:
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

    record = {
        "id": raw["id"],
        "name": text("name", "") or raw["id"],
        "type": text("type", "language"),
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
    }
    # A video connection stored without one (made before protocols) is kept: a PATCH fixes it.
    record["video_protocol"] = (
        video_protocol({**record, "video_protocol": raw.get("video_protocol")}) or ""
    )
    try:
        _check(record)
    except BadRequest as exc:
        log.warning("connections.json: skipped a record", connection_id=record["id"], why=str(exc))
        return None
    return record


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _renumbered(ordered: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["id"]: {**c, "sort_order": i} for i, c in enumerate(ordered)}


class Connections:
    """Connections and default models."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "connections.json"
        self.defaults_path = data_dir / "default-models.json"
        self._lock = asyncio.Lock()
        self._items: dict[str, dict[str, Any]] = {}
        self._defaults: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read both files; missing files are empty, unusable records are skipped."""
        raw = _read(self.path, [])
        records = [r for r in map(_normalized, raw if isinstance(raw, list) else []) if r]
        unique = {r["id"]: r for r in records}
        self._items = _renumbered(
            sorted(unique.values(), key=lambda c: (c["sort_order"], c["name"]))
        )
        defaults = scrub(_read(self.defaults_path, {}))
        self._defaults = {
            p: {k: v for k, v in c.items() if isinstance(v, str)}
            for p, c in (defaults.items() if isinstance(defaults, dict) else [])
            if p in PURPOSES and isinstance(c, dict)
        }

    def all(self) -> list[dict[str, Any]]:
        """Every connection in list order."""
        return sorted(self._items.values(), key=lambda c: c["sort_order"])

    def listing(self) -> list[Connection]:
        """`GET /connections`: every connection as clients see it (no key)."""
        return [public(c) for c in self.all()]

    def get(self, connection_id: str) -> dict[str, Any]:
        try:
            return self._items[connection_id]
        except KeyError:
            raise ConnectionNotFound(
                f"connection {connection_id} not found", code="connection_not_found"
            ) from None

    def exists(self, connection_id: str) -> bool:
        return connection_id in self._items

    def default_language(self) -> tuple[str, str] | None:
        """(connection id, model) for new sessions: the `language` default, else the first
        language connection in list order and its first model."""
        chosen = self._defaults.get("language") or {}
        cid = chosen.get("connection_id", "")
        if cid in self._items and self._items[cid].get("type") == "language":
            return cid, chosen.get("model", "")
        for connection in self.all():
            if connection["type"] == "language":
                models = connection["models"] or [""]
                return connection["id"], str(models[0])
        return None

    def defaults(self) -> dict[str, dict[str, str]]:
        return {p: dict(self._defaults.get(p) or {}) for p in PURPOSES}

    async def set_defaults(self, defaults: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for purpose, choice in defaults.items():
            cid = choice.get("connection_id", "")
            if cid and cid not in self._items:
                raise ConnectionNotFound(
                    f"{purpose}: connection {cid} not found", code="connection_not_found"
                )
        async with self._lock:
            chosen = {p: dict(c) for p, c in defaults.items()}
            write_json_atomic(self.defaults_path, chosen)
            self._defaults = chosen
        return self.defaults()

    async def create(self, fields: dict[str, Any]) -> Connection:
        """A new connection, as clients see it; `sort_order` (if given) is its position, else
        it goes last."""
        fields = scrub({k: v for k, v in fields.items() if v is not None})
        _check(fields)
        connection = {
            "id": new_id(),
            "name": fields.get("name") or "Connection",
            "type": fields.get("type") or "language",
            "kind": "openai",
            "auth_kind": "api_key",
            "base_url": fields.get("base_url", ""),
            "api_key": fields.get("api_key", ""),
            "video_protocol": fields.get("video_protocol", ""),
            "models": list(fields.get("models") or []),
            "models_cached": bool(fields.get("models_cached")),
            "model_settings": dict(fields.get("model_settings") or {}),
        }
        _check_video_protocol(connection)
        async with self._lock:
            ordered = self.all()
            ordered.insert(_position(fields.get("sort_order"), len(ordered)), connection)
            self._commit(_renumbered(ordered))
        return public(self._items[connection["id"]])

    async def update(self, connection_id: str, fields: dict[str, Any]) -> Connection:
        """Change the given fields (see the module docstring for what "given" means); the
        connection as clients see it."""
        fields = scrub(
            {
                k: v
                for k, v in fields.items()
                if v is not None and not (k in _KEEP_IF_EMPTY and v == "")
            }
        )
        _check(fields)
        async with self._lock:
            current = self.get(connection_id)
            moved_to = fields.pop("sort_order", None)
            changed = {**current, **fields}
            if changed["base_url"] != current["base_url"] and "api_key" not in fields:
                changed["api_key"] = ""
            if changed["type"] != "video" and "video_protocol" not in fields:
                changed["video_protocol"] = ""
            if "type" in fields or "video_protocol" in fields:
                _check_video_protocol(changed)
            ordered = [c for c in self.all() if c["id"] != connection_id]
            at = current["sort_order"] if moved_to is None else moved_to
            ordered.insert(_position(at, len(ordered)), changed)
            self._commit(_renumbered(ordered))
        return public(self._items[connection_id])

    async def remove(self, connection_id: str) -> None:
        async with self._lock:
            self.get(connection_id)
            remaining = _renumbered([c for c in self.all() if c["id"] != connection_id])
            defaults = {
                p: c for p, c in self._defaults.items() if c.get("connection_id") != connection_id
            }
            self._commit(remaining)
            write_json_atomic(self.defaults_path, defaults)
            self._defaults = defaults

    def discovery_target(self, fields: dict[str, Any]) -> tuple[str, str]:
        """(base URL, key) to ask for models, from a connection's fields (see the module
        docstring); "" for type, kind and auth_kind means the default, as on PATCH."""
        fields = scrub({k: v for k, v in fields.items() if v is not None})
        _check({k: v for k, v in fields.items() if not (k in _KEEP_IF_EMPTY and v == "")})
        base_url, key = str(fields.get("base_url", "")), str(fields.get("api_key", ""))
        if fields.get("id"):
            saved = self.get(str(fields["id"]))
            base_url = base_url or saved["base_url"]
            if not key and base_url == saved["base_url"]:
                key = saved["api_key"]
        return base_url, key

    async def discover_models(self, fields: dict[str, Any]) -> Models:
        """The models the provider of `fields` lists; nothing is saved."""
        base_url, key = self.discovery_target(fields)
        from app.providers.openai import OpenAIProvider  # first use loads the SDK

        provider = OpenAIProvider(base_url, key)
        try:
            async with asyncio.timeout(DISCOVERY_TIMEOUT):
                return {"models": await provider.models()}
        except ProviderError as exc:
            raise ModelsFailed(exc.message) from None
        except TimeoutError:
            raise ModelsFailed(
                f"the provider at {provider.host} did not answer within {DISCOVERY_TIMEOUT:g} s"
            ) from None
        finally:
            await provider.aclose()

    def _commit(self, items: dict[str, dict[str, Any]]) -> None:
        """Write `items`, then make them current (a failed write leaves everything as it was)."""
        ordered = sorted(items.values(), key=lambda c: c["sort_order"])
        write_json_atomic(self.path, ordered, mode=0o600)
        self._items = items


def _position(wanted: int | None, count: int) -> int:
    """`wanted` clamped to a list of `count` others (None: the end)."""
    return count if wanted is None else max(0, min(wanted, count))


def _read(path: Path, empty: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty
