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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from app.files import write_json_atomic
from app.kernel.connection_rules import (
    DISCOVERY_TIMEOUT,
    KEEP_IF_EMPTY,
    PURPOSES,
    TYPES,
    Connection,
    ConnectionFields,
    ConnectionNotFound,
    ConnectionRecord,
    ConnectionType,
    Models,
    ModelsFailed,
    UnknownConnection,
    UnsupportedAuthKind,
    check_api_key,
    check_base_url,
    check_fields,
    check_model_settings,
    check_video_protocol,
    normalized,
    public,
    renumbered,
    video_protocol,
)
from app.kernel.ids import new_id
from app.providers.base import ProviderError
from app.text.surrogates import scrub

__all__ = [
    "DISCOVERY_TIMEOUT",
    "PURPOSES",
    "TYPES",
    "Connection",
    "ConnectionNotFound",
    "ConnectionRecord",
    "ConnectionType",
    "Connections",
    "Models",
    "ModelsFailed",
    "UnknownConnection",
    "UnsupportedAuthKind",
    "check_api_key",
    "check_base_url",
    "check_model_settings",
    "public",
    "video_protocol",
]


class Connections:
    """Connections and default models."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "connections.json"
        self.defaults_path = data_dir / "default-models.json"
        self._lock = asyncio.Lock()
        self._items: dict[str, ConnectionRecord] = {}
        self._defaults: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read both files; missing files are empty, unusable records are skipped."""
        raw = _read(self.path, [])
        records = [r for r in map(normalized, raw if isinstance(raw, list) else []) if r]
        unique = {r["id"]: r for r in records}
        self._items = renumbered(
            sorted(unique.values(), key=lambda c: (c["sort_order"], c["name"]))
        )
        defaults = scrub(_read(self.defaults_path, {}))
        self._defaults = {
            p: {k: v for k, v in c.items() if isinstance(v, str)}
            for p, c in (defaults.items() if isinstance(defaults, dict) else [])
            if p in PURPOSES and isinstance(c, dict)
        }

    def all(self) -> list[ConnectionRecord]:
        """Every connection in list order."""
        return sorted(self._items.values(), key=lambda c: c["sort_order"])

    def listing(self) -> list[Connection]:
        """`GET /connections`: every connection as clients see it (no key)."""
        return [public(c) for c in self.all()]

    def get(self, connection_id: str) -> ConnectionRecord:
        try:
            return self._items[connection_id]
        except KeyError:
            raise ConnectionNotFound(f"connection {connection_id} not found") from None

    def exists(self, connection_id: str) -> bool:
        return connection_id in self._items

    def default_language(self) -> tuple[str, str] | None:
        """(connection id, model) for new sessions: the `language` default, else the first
        language connection in list order and its first model."""
        chosen = self._defaults.get("language") or {}
        cid = chosen.get("connection_id", "")
        if cid in self._items and self._items[cid]["type"] == "language":
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
                raise ConnectionNotFound(f"{purpose}: connection {cid} not found")
        async with self._lock:
            chosen = {p: dict(c) for p, c in defaults.items()}
            write_json_atomic(self.defaults_path, chosen)
            self._defaults = chosen
        return self.defaults()

    async def create(self, fields: Mapping[str, Any]) -> Connection:
        """A new connection, as clients see it; `sort_order` (if given) is its position, else
        it goes last."""
        fields = _given(fields)
        check_fields(fields)
        connection: ConnectionRecord = {
            "id": new_id(),
            "name": fields.get("name") or "Connection",
            "type": _type(fields.get("type")),
            "kind": "openai",
            "auth_kind": "api_key",
            "base_url": fields.get("base_url", ""),
            "api_key": fields.get("api_key", ""),
            "video_protocol": fields.get("video_protocol", ""),
            "models": list(fields.get("models") or []),
            "models_cached": bool(fields.get("models_cached")),
            "model_settings": dict(fields.get("model_settings") or {}),
            "sort_order": 0,  # its place is set when the list is renumbered
        }
        check_video_protocol(connection)
        async with self._lock:
            ordered = self.all()
            ordered.insert(_position(fields.get("sort_order"), len(ordered)), connection)
            self._commit(renumbered(ordered))
        return public(self._items[connection["id"]])

    async def update(self, connection_id: str, fields: Mapping[str, Any]) -> Connection:
        """Change the given fields (see the module docstring for what "given" means); the
        connection as clients see it."""
        fields = _given(fields, keep_if_empty=True)
        check_fields(fields)
        async with self._lock:
            current = self.get(connection_id)
            moved_to = fields.pop("sort_order", None)
            changed = cast(ConnectionRecord, {**current, **fields})
            if changed["base_url"] != current["base_url"] and "api_key" not in fields:
                changed["api_key"] = ""
            if changed["type"] != "video" and "video_protocol" not in fields:
                changed["video_protocol"] = ""
            if "type" in fields or "video_protocol" in fields:
                check_video_protocol(changed)
            ordered = [c for c in self.all() if c["id"] != connection_id]
            at = current["sort_order"] if moved_to is None else moved_to
            ordered.insert(_position(at, len(ordered)), changed)
            self._commit(renumbered(ordered))
        return public(self._items[connection_id])

    async def remove(self, connection_id: str) -> None:
        async with self._lock:
            self.get(connection_id)
            remaining = renumbered([c for c in self.all() if c["id"] != connection_id])
            defaults = {
                p: c for p, c in self._defaults.items() if c.get("connection_id") != connection_id
            }
            self._commit(remaining)
            write_json_atomic(self.defaults_path, defaults)
            self._defaults = defaults

    def discovery_target(self, fields: Mapping[str, Any]) -> tuple[str, str]:
        """(base URL, key) to ask for models, from a connection's fields (see the module
        docstring); "" for type, kind and auth_kind means the default, as on PATCH."""
        fields = _given(fields)
        check_fields(_given(fields, keep_if_empty=True))
        base_url, key = str(fields.get("base_url", "")), str(fields.get("api_key", ""))
        if fields.get("id"):
            saved = self.get(str(fields["id"]))
            base_url = base_url or saved["base_url"]
            if not key and base_url == saved["base_url"]:
                key = saved["api_key"]
        return base_url, key

    async def discover_models(self, fields: Mapping[str, Any]) -> Models:
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

    def _commit(self, items: dict[str, ConnectionRecord]) -> None:
        """Write `items`, then make them current (a failed write leaves everything as it was)."""
        ordered = sorted(items.values(), key=lambda c: c["sort_order"])
        write_json_atomic(self.path, ordered, mode=0o600)
        self._items = items


def _given(fields: Mapping[str, Any], *, keep_if_empty: bool = False) -> ConnectionFields:
    """The fields given (None is "not given"; with `keep_if_empty`, so is "" for the fields
    where "" means "keep"), scrubbed of lone surrogates."""
    given = {
        k: v
        for k, v in fields.items()
        if v is not None and not (keep_if_empty and k in KEEP_IF_EMPTY and v == "")
    }
    return cast(ConnectionFields, scrub(given))


def _type(given: str | None) -> ConnectionType:
    """A checked `type` (or the default): `check_fields` refused any other."""
    for known in TYPES:
        if given == known:
            return known
    return "language"


def _position(wanted: int | None, count: int) -> int:
    """`wanted` clamped to a list of `count` others (None: the end)."""
    return count if wanted is None else max(0, min(wanted, count))


def _read(path: Path, empty: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty
