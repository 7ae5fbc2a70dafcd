"""Web search settings in `<data-dir>/web-search.json` (mode 0600: it holds API keys).

`{"enabled", "default_provider", "providers": [{"id", "kind", "name", "enabled", "api_key",
"search_engine_id", "endpoint"}]}`, as Foya stores them. Kinds: Foya's `google_cse` (key and
`search_engine_id`), `bing` (key; `endpoint` optional), `baidu` (no key), and ours, `searxng`
(a SearXNG instance's `endpoint`, its JSON API; no key). API keys are write-only:
`public()` is the only shape that leaves the kernel, with `has_api_key` instead of the key.

`PUT` replaces the settings, by Foya's rules: a provider without `id` becomes `search-<n>`, a
missing `name` the kind's, an empty `api_key` keeps the key stored under that id, and
`default_provider` must name one of them. Stricter than Foya: the kept key is dropped when the
provider's kind or endpoint changes (a key is never sent where it was not given for), an
`endpoint` must be an http(s) URL, SearXNG needs one, keys are printable ASCII, at most
`MAX_PROVIDERS`. A refused update is 400 `web_search_update_failed` and changes nothing, in
memory or on disk.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any, NotRequired, TypedDict
from urllib.parse import urlsplit

from app.errors import BadRequest
from app.files import write_json_atomic
from app.jsontypes import JSONObject
from app.logs import get_logger

KINDS = ("google_cse", "bing", "baidu", "searxng")
NAMES = {"google_cse": "Google", "bing": "Bing", "baidu": "百度", "searxng": "SearXNG"}
MAX_PROVIDERS = 50


class ProviderConfig(TypedDict):
    """A stored search provider, its key included (for the kernel's own use only)."""

    id: str
    kind: str
    name: str
    enabled: bool
    api_key: str
    search_engine_id: str
    endpoint: str


class StoredSettings(TypedDict):
    """What `web-search.json` holds."""

    enabled: bool
    default_provider: str
    providers: list[ProviderConfig]


class PublicProvider(TypedDict):
    """A search provider as clients see it: `has_api_key` instead of the key, empty fields left
    out."""

    id: str
    kind: str
    name: str
    enabled: bool
    has_api_key: NotRequired[bool]
    search_engine_id: NotRequired[str]
    endpoint: NotRequired[str]


class PublicSettings(TypedDict):
    """`GET /web-search`: the settings as clients see them."""

    enabled: bool
    default_provider: NotRequired[str]
    providers: list[PublicProvider]


#: The provider asked when no default is set (or the default is disabled); it needs no field.
FALLBACK = ProviderConfig(
    id="duckduckgo",
    kind="duckduckgo",
    name="DuckDuckGo",
    enabled=True,
    api_key="",
    search_engine_id="",
    endpoint="",
)


class UpdateFailed(BadRequest):
    """A `PUT /web-search` whose settings break a rule; nothing is changed."""

    code = "web_search_update_failed"


def check_endpoint(value: str, where: str) -> None:
    """Empty, or an absolute http(s) URL with a host and no credentials."""
    if not value:
        return
    bad = UpdateFailed(f"{where}.endpoint: must be an http:// or https:// URL with a host")
    if not (value.isascii() and value.isprintable()) or " " in value:
        raise bad
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises for a port that is not a number from 0 to 65535
    except ValueError:
        raise bad from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad
    if parts.username is not None or parts.password is not None:
        raise UpdateFailed(f"{where}.endpoint: must not hold credentials; send api_key")


def public(settings: StoredSettings) -> PublicSettings:
    """The settings as clients see them: `has_api_key`, never a key; empty fields left out
    (Foya's `omitempty`), `providers` always a list."""
    providers: list[PublicProvider] = []
    for item in settings["providers"]:
        shown = PublicProvider(
            id=item["id"], kind=item["kind"], name=item["name"], enabled=item["enabled"]
        )
        if item["api_key"]:
            shown["has_api_key"] = True
        if item["search_engine_id"]:
            shown["search_engine_id"] = item["search_engine_id"]
        if item["endpoint"]:
            shown["endpoint"] = item["endpoint"]
        providers.append(shown)
    if settings["default_provider"]:
        return PublicSettings(
            enabled=settings["enabled"],
            default_provider=settings["default_provider"],
            providers=providers,
        )
    return PublicSettings(enabled=settings["enabled"], providers=providers)


def normalized(given: JSONObject, current: StoredSettings) -> StoredSettings:
    """`given` (a PUT body) as settings to store, keys kept from `current` where Foya keeps
    them; `UpdateFailed` if it breaks a rule."""
    items = given.get("providers") or []
    if len(items) > MAX_PROVIDERS:
        raise UpdateFailed(f"providers: at most {MAX_PROVIDERS}")
    stored = {p["id"]: p for p in current["providers"]}
    providers: list[ProviderConfig] = []
    for index, raw in enumerate(items):
        provider_id = _text(raw, "id") or f"search-{index + 1}"
        where = f"providers[{index}]"
        if any(p["id"] == provider_id for p in providers):
            raise UpdateFailed(f"duplicate search provider id {provider_id!r}")
        kind = raw.get("kind")
        if kind not in KINDS:
            raise UpdateFailed(
                f"unsupported search provider kind {kind!r} (one of {', '.join(KINDS)})"
            )
        item = ProviderConfig(
            id=provider_id,
            kind=kind,
            name=_text(raw, "name") or NAMES[kind],
            enabled=bool(raw.get("enabled")),
            api_key=_text(raw, "api_key"),
            search_engine_id=_text(raw, "search_engine_id"),
            endpoint=_text(raw, "endpoint"),
        )
        check_endpoint(item["endpoint"], where)
        if item["kind"] == "searxng" and not item["endpoint"]:
            raise UpdateFailed(f"{where}.endpoint: SearXNG needs its instance's URL")
        if not (item["api_key"].isascii() and item["api_key"].isprintable()):
            raise UpdateFailed(f"{where}.api_key: must be printable ASCII")
        before = stored.get(item["id"])
        if not item["api_key"] and before is not None:
            same = before["kind"] == item["kind"] and before["endpoint"] == item["endpoint"]
            item["api_key"] = before["api_key"] if same else ""
        providers.append(item)
    default = str(given.get("default_provider") or "")
    if default and not any(p["id"] == default for p in providers):
        raise UpdateFailed(f"default search provider {default!r} not found")
    return StoredSettings(
        enabled=bool(given.get("enabled")), default_provider=default, providers=providers
    )


def _text(raw: JSONObject, key: str) -> str:
    """A given field as text, trimmed; absent or null is empty."""
    return str(raw.get(key) or "").strip()


def _loaded(raw: Any) -> StoredSettings:
    """A stored file as settings; what cannot be used is left out (logged), not fatal."""
    log = get_logger("foya.web_search")
    settings = StoredSettings(enabled=True, default_provider="", providers=[])
    if not isinstance(raw, dict):
        log.warning("web-search.json: not an object; using the defaults")
        return settings
    settings["enabled"] = bool(raw.get("enabled", True))
    for index, item in enumerate(raw.get("providers") or []):
        try:
            if not isinstance(item, dict):
                raise UpdateFailed("not an object")
            settings["providers"] += normalized({"providers": [item]}, settings)["providers"]
        except UpdateFailed as exc:
            log.warning("web-search.json: skipped a provider", index=index, why=exc.message)
    default = raw.get("default_provider")
    if isinstance(default, str) and any(p["id"] == default for p in settings["providers"]):
        settings["default_provider"] = default
    return settings


class SearchSettings:
    """The stored settings; the only writer of `web-search.json`."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "web-search.json"
        self._lock = asyncio.Lock()
        self._settings: StoredSettings = _loaded({})

    def load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raw = {}
        except (ValueError, UnicodeDecodeError):
            get_logger("foya.web_search").warning("web-search.json: not JSON; using the defaults")
            raw = {}
        self._settings = _loaded(raw)

    def current(self) -> StoredSettings:
        """The stored settings, keys included (for the kernel's own use)."""
        return copy.deepcopy(self._settings)

    def public(self) -> PublicSettings:
        return public(self._settings)

    async def replace(self, given: JSONObject) -> PublicSettings:
        """Store `given` (see the module docstring); the settings as clients see them."""
        async with self._lock:
            settings = normalized(given, self._settings)
            write_json_atomic(self.path, settings, mode=0o600)
            self._settings = settings
        return public(settings)
