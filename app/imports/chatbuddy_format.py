"""ChatBuddy's backup forms, read and checked into one `Backup`.

- The ZIP (backup version 2): `backup.manifest.json`, six `meta/*.json` parts, optional API
  keys and kv, `sessions/index.compass.json` and one JSONL file per session; entries may sit
  under one extra top folder. Refused as ChatBuddy refuses it: another schema, a version that
  is not the number 2, another packageFormat or layout, a layoutVersion above 3, a missing or
  invalid meta file, index or JSONL line, duplicate session ids, a messageCount that is not the
  JSONL's line count. A newer version (or layoutVersion) is `UnsupportedImportVersion`.
- The encrypted ZIP (`CBENCv01…`): decrypted (`chatbuddy_crypto`), then read as a ZIP.
- JSON: the legacy v1 backup (`chatbuddy.backup` 1, or `chatbuddy.backup.compass` 1), a bare
  state, `{state}`, `{data}`, or the single-JSON form of version 2 (`storage`).

Everything malformed is `InvalidImport` naming the member and line (the value checks are
app.imports.chatbuddy_json's); nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.imports import chatbuddy_crypto
from app.imports.chatbuddy_json import (
    as_array,
    as_object,
    as_optional_text,
    as_text,
    count_of,
    json_of,
    jsonl_of,
    number_of,
)
from app.imports.model import InvalidImport, UnsupportedImportVersion
from app.imports.zipsafe import read_zip
from app.jsontypes import JSONObject

SCHEMA_V1 = "chatbuddy.backup"
SCHEMA = "chatbuddy.backup.compass"
VERSION = 2
LAYOUT_VERSION = 3
MANIFEST = "backup.manifest.json"
INDEX = "sessions/index.compass.json"
META_PARTS = {
    "core": "meta/state.core.json",
    "ui": "meta/ui.selection.json",
    "settingsGeneral": "meta/settings.general.json",
    "settingsModelConfig": "meta/settings.model-config.json",
    "settingsDefaultModels": "meta/settings.default-models.json",
    "settingsMcp": "meta/settings.mcp.json",
}
API_KEYS = "meta/providers.api-keys.json"
KV = "meta/kv.compass.json"

__all__ = [
    "Backup",
    "as_array",
    "as_object",
    "as_optional_text",
    "as_text",
    "read_backup",
]


@dataclass
class Backup:
    """A backup's content in one shape, whatever form it came in. Lists hold the source's
    objects as they are (sessions with their `messages`); `api_keys` maps provider id → key."""

    assistants: list[Any] = field(default_factory=list)
    providers: list[Any] = field(default_factory=list)
    api_keys: dict[str, str] = field(default_factory=dict)
    sessions: list[Any] = field(default_factory=list)
    mcp_servers: int = 0
    templates: int = 0
    sampling: bool = False
    ui: bool = False
    kv: int = 0


def read_backup(
    data: bytes | Path, passphrase: str | None, *, scratch: Path | None = None
) -> Backup:
    """Any ChatBuddy backup form (its bytes, or a file), checked, as a `Backup`. A ZIP is
    extracted under `scratch` (app.imports.zipsafe), never held whole."""
    if isinstance(data, Path):
        with data.open("rb") as head:
            is_zip = head.read(2) == b"PK"
        if is_zip:
            return _checked(_zip_backup(data, scratch))
        data = data.read_bytes()
    if chatbuddy_crypto.is_encrypted(data):
        data = chatbuddy_crypto.decrypt(data, passphrase)
        if not data.startswith(b"PK"):
            raise InvalidImport("the decrypted backup is not a ZIP archive")
    if data.startswith(b"PK"):
        backup = _zip_backup(data, scratch)
    else:
        backup = _fromjson_of(json_of(data, "the backup"))
    return _checked(backup)


def _zip_backup(data: bytes | Path, scratch: Path | None) -> Backup:
    with read_zip(data, into=scratch) as members:
        return _from_zip(members)


def _checked(backup: Backup) -> Backup:
    seen: set[str] = set()
    for session in backup.sessions:
        sid = session.get("id") if isinstance(session, dict) else None
        if not isinstance(sid, str):
            continue  # the mapping refuses it, naming the session
        if sid in seen:
            raise InvalidImport(f"session id {sid!r} appears twice in the backup")
        seen.add(sid)
    return backup


def _from_zip(members: Mapping[str, bytes]) -> Backup:
    prefix = _root(members)

    def member(name: str) -> Any:
        full = prefix + name
        if full not in members:
            raise InvalidImport(f"the archive has no {full}")
        return json_of(members[full], full)

    manifest = as_object(member(MANIFEST), MANIFEST)
    _check_version(manifest, SCHEMA, VERSION, MANIFEST)
    if manifest.get("packageFormat") != "structured-zip":
        raise InvalidImport(f"{MANIFEST}: packageFormat is not 'structured-zip'")
    _check_storage(as_object(manifest.get("storage"), f"{MANIFEST} storage"), MANIFEST)
    state = {part: as_object(member(name), name) for part, name in META_PARTS.items()}
    keys = as_object(member(API_KEYS), API_KEYS) if prefix + API_KEYS in members else {}
    kv = as_object(member(KV), KV) if prefix + KV in members else {}
    index = as_array(as_object(member(INDEX), INDEX).get("sessions"), f"{INDEX} sessions")
    sessions = []
    for position, entry in enumerate(index):
        where = f"{INDEX} session {position + 1}"
        meta = as_object(entry, where)
        sid = as_text(meta.get("id"), f"{where} id")
        aid = as_text(meta.get("assistantId"), f"{where} assistantId")
        name = f"sessions/{aid}/{sid}.jsonl"
        if prefix + name not in members:
            raise InvalidImport(f"the archive has no {prefix + name}")
        messages = jsonl_of(members[prefix + name], prefix + name)
        count = meta.get("messageCount")
        if type(count) is not int or count != len(messages):
            raise InvalidImport(f"{where}: messageCount {count!r} but {name} has {len(messages)}")
        session = {k: v for k, v in meta.items() if k not in ("messageCount", "preview")}
        sessions.append({**session, "messages": messages})
    return _from_structured(state, keys, sessions, kv)


def _root(members: Mapping[str, bytes]) -> str:
    """'' or the one top folder the entries sit under."""
    if MANIFEST in members:
        return ""
    tops = {name.split("/", 1)[0] for name in members}
    if len(tops) == 1 and f"{next(iter(tops))}/{MANIFEST}" in members:
        return f"{next(iter(tops))}/"
    raise InvalidImport(f"not a ChatBuddy backup: the archive has no {MANIFEST}")


def _fromjson_of(document: Any) -> Backup:
    root = as_object(document, "the backup")
    if "schema" in root:
        schema = root["schema"]
        if schema == SCHEMA_V1 or (schema == SCHEMA and root.get("version") == 1):
            _check_version(root, schema, 1, "the backup")
            return _from_state(as_object(root.get("state"), "the backup's state"))
        _check_version(root, SCHEMA, VERSION, "the backup")
        storage = as_object(root.get("storage"), "the backup's storage")
        _check_storage(storage, "the backup")
        state = as_object(storage.get("structuredState"), "storage.structuredState")
        parts = {part: as_object(state.get(part), f"structuredState.{part}") for part in META_PARTS}
        keys = as_object(storage.get("providerApiKeys", {}), "storage.providerApiKeys")
        sessions = as_array(storage.get("sessions", []), "storage.sessions")
        kv = as_object(storage.get("kv", {}), "storage.kv")
        return _from_structured(parts, keys, sessions, kv)
    for wrapper in ("state", "data"):
        if isinstance(root.get(wrapper), dict):
            return _from_state(root[wrapper])
    if isinstance(root.get("assistants"), list) or isinstance(root.get("sessions"), list):
        return _from_state(root)
    raise InvalidImport("not a ChatBuddy backup: no schema, state, assistants or sessions")


def _from_structured(
    state: JSONObject, keys: JSONObject, sessions: list[Any], kv: JSONObject
) -> Backup:
    core, config, mcp = state["core"], state["settingsModelConfig"], state["settingsMcp"]
    return Backup(
        assistants=as_array(core.get("assistants", []), "core assistants"),
        providers=as_array(config.get("providers", []), "settings providers"),
        api_keys={k: v for k, v in keys.items() if isinstance(v, str) and v},
        sessions=sessions,
        mcp_servers=count_of(as_object(mcp.get("mcp", {}), "settings mcp").get("servers")),
        templates=count_of(core.get("templates")),
        sampling=bool(state["settingsGeneral"]),
        ui=bool(state["ui"]),
        kv=len(kv),
    )


def _from_state(state: JSONObject) -> Backup:
    """The v1 state: settings (providers with their keys, MCP, sampling) inline."""
    settings = as_object(state.get("settings", {}), "state settings")
    providers = as_array(settings.get("providers", []), "settings providers")
    keys = {
        p["id"]: p["apiKey"]
        for p in providers
        if isinstance(p, dict) and isinstance(p.get("id"), str) and isinstance(p.get("apiKey"), str)
    }
    mcp = settings.get("mcp")
    ui_keys = ("selectedAssistantId", "selectedSessionIdByAssistant", "collapsedGroupIds")
    return Backup(
        assistants=as_array(state.get("assistants", []), "state assistants"),
        providers=providers,
        api_keys={k: v for k, v in keys.items() if v},
        sessions=as_array(state.get("sessions", []), "state sessions"),
        mcp_servers=count_of(mcp.get("servers") if isinstance(mcp, dict) else None),
        templates=count_of(state.get("templates")),
        sampling=any(k in settings for k in ("temperature", "topP", "maxTokens")),
        ui=any(k in state for k in ui_keys),
    )


def _check_version(root: JSONObject, schema: str, supported: int, where: str) -> None:
    if root.get("schema") != schema:
        raise InvalidImport(f"{where}: schema {root.get('schema')!r} is not {schema!r}")
    version = number_of(root.get("version"), f"{where}: version")
    if version > supported:
        raise UnsupportedImportVersion(
            f"{where}: ChatBuddy backup version {version} is newer than the supported "
            f"version {supported}"
        )
    if version != supported:
        raise InvalidImport(f"{where}: ChatBuddy backup version {version} is not {supported}")


def _check_storage(storage: JSONObject, where: str) -> None:
    if storage.get("layout") != "compass":
        raise InvalidImport(f"{where}: storage layout {storage.get('layout')!r} is not 'compass'")
    layout = number_of(storage.get("layoutVersion"), f"{where}: storage layoutVersion")
    if layout > LAYOUT_VERSION:
        raise UnsupportedImportVersion(
            f"{where}: storage layoutVersion {layout} is newer than the supported "
            f"layoutVersion {LAYOUT_VERSION}"
        )
