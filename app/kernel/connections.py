"""Provider connections (bring your own key) in `<data-dir>/connections.json`, mode 0600.

The API key is write-only: `public()` is the only shape that leaves the kernel, and it carries
`has_api_key` instead of the key. Default models per purpose live in `default-models.json`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from app.errors import BadRequest, NotFound
from app.files import write_json_atomic
from app.kernel.ids import new_id

TYPES = ("language", "image", "video")
PURPOSES = ("language", "fast", "image", "video")


class ConnectionNotFound(NotFound):
    """No such connection."""


def public(connection: dict[str, Any]) -> dict[str, Any]:
    """The connection as clients see it: never the key."""
    out = {k: v for k, v in connection.items() if k != "api_key"}
    out["has_api_key"] = bool(connection.get("api_key"))
    return out


class Connections:
    """Connections and default models."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "connections.json"
        self.defaults_path = data_dir / "default-models.json"
        self._lock = asyncio.Lock()
        self._items: dict[str, dict[str, Any]] = {}
        self._defaults: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read both files; missing files are empty."""
        self._items = {c["id"]: c for c in _read(self.path, []) if isinstance(c, dict)}
        defaults = _read(self.defaults_path, {})
        self._defaults = defaults if isinstance(defaults, dict) else {}

    def all(self) -> list[dict[str, Any]]:
        return sorted(self._items.values(), key=lambda c: (c.get("sort_order", 0), c["id"]))

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
        language connection and its first model."""
        chosen = self._defaults.get("language") or {}
        cid = chosen.get("connection_id", "")
        if cid in self._items and self._items[cid].get("type") == "language":
            return cid, chosen.get("model", "")
        for connection in self.all():
            if connection.get("type") == "language":
                models = connection.get("models") or [""]
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
            self._defaults = {p: dict(c) for p, c in defaults.items()}
            write_json_atomic(self.defaults_path, self._defaults)
        return self.defaults()

    async def create(self, fields: dict[str, Any]) -> dict[str, Any]:
        if fields.get("auth_kind", "api_key") != "api_key":
            raise BadRequest("auth_kind: only api_key is supported", code="unsupported_auth_kind")
        if fields.get("type", "language") not in TYPES:
            raise BadRequest(f"type: must be one of {', '.join(TYPES)}")
        connection = {
            "id": new_id(),
            "name": fields.get("name") or "Connection",
            "type": fields.get("type", "language"),
            "kind": "openai",
            "auth_kind": "api_key",
            "base_url": fields.get("base_url", ""),
            "api_key": fields.get("api_key") or "",
            "models": list(fields.get("models") or []),
            "sort_order": int(fields.get("sort_order", len(self._items))),
            "model_settings": dict(fields.get("model_settings") or {}),
        }
        async with self._lock:
            self._items[connection["id"]] = connection
            self._save()
        return connection

    async def update(self, connection_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        fields = {key: value for key, value in fields.items() if value is not None}
        if "auth_kind" in fields and fields["auth_kind"] != "api_key":
            raise BadRequest("auth_kind: only api_key is supported", code="unsupported_auth_kind")
        if "type" in fields and fields["type"] not in TYPES:
            raise BadRequest(f"type: must be one of {', '.join(TYPES)}")
        async with self._lock:
            connection = {**self.get(connection_id), **fields}
            self._items[connection_id] = connection
            self._save()
        return connection

    async def remove(self, connection_id: str) -> None:
        async with self._lock:
            self.get(connection_id)
            del self._items[connection_id]
            self._defaults = {
                p: c for p, c in self._defaults.items() if c.get("connection_id") != connection_id
            }
            self._save()
            write_json_atomic(self.defaults_path, self._defaults)

    def _save(self) -> None:
        write_json_atomic(self.path, list(self._items.values()), mode=0o600)


def _read(path: Path, empty: Any) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return empty
