"""The channel catalog on disk: Foya's two files in the data directory, one per kind.

- `telegram-channels.json`: `{"version": 1, "channels": [{id, name, locale?, enabled, token?,
  connection_id?, model?, project_id?, approval_mode, allowed_users, allowed_chats,
  allow_all}]}`
- `feishu-channels.json`: `{"version": 2, "channels": [{…, app_id, app_secret?, …}]}` (the
  version Foya's newest Feishu manager is read to write; its version 1 held `bots`)

Channels in creation order; the secrets in plain text, as Foya keeps them, so each file is
written atomically (temp file, fsync, rename) with mode 0600, by a worker thread. Read once, at
start. Where Foya refuses to start on a file it cannot read whole, we keep what can be read: an
entry that is not a valid channel (or repeats an id, a token, an app id) is dropped, the file
is copied aside to `<name>.unreadable-<unix time>` and the reason logged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.files import read_versioned_list, write_bytes_atomic, write_json_atomic
from app.kernel.channels.records import (
    LABELS,
    ChannelConfig,
    ChannelInput,
    ChannelKind,
    Secrets,
    normalised,
    problem,
)
from app.logs import get_logger

#: File name and version per kind (app.kernel.wiring.ondisk names them too: a test holds both).
FILES: dict[ChannelKind, tuple[str, int]] = {
    "feishu": ("feishu-channels.json", 2),
    "telegram": ("telegram-channels.json", 1),
}

Entry = tuple[ChannelConfig, Secrets]
_TEXT = ("id", "name", "locale", "connection_id", "model", "project_id", "approval_mode")
_SECRET = {"feishu": "app_secret", "telegram": "token"}


def stored(config: ChannelConfig, secrets: Secrets) -> dict[str, Any]:
    """An entry as Foya's manager of its kind writes it (empty optionals omitted)."""
    out: dict[str, Any] = {"id": config.id, "name": config.name}
    if config.locale:
        out["locale"] = config.locale
    out["enabled"] = config.enabled
    if config.kind == "feishu":
        out["app_id"] = config.app_id
        if secrets.app_secret:
            out["app_secret"] = secrets.app_secret
    elif secrets.token:
        out["token"] = secrets.token
    for key in ("connection_id", "model", "project_id"):
        if value := getattr(config, key):
            out[key] = value
    out["approval_mode"] = config.approval_mode
    out["allowed_users"] = list(config.allowed_users)
    out["allowed_chats"] = list(config.allowed_chats)
    out["allow_all"] = config.allow_all
    return out


def _text(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key) or ""
    if not isinstance(value, str):
        raise ValueError(f"{key}: not text")
    return value


def _list(raw: dict[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: not a list of text")
    return tuple(value)


def loaded(kind: ChannelKind, raw: Any) -> Entry:
    """A stored entry as a valid channel; ValueError if it is not one."""
    if not isinstance(raw, dict):
        raise ValueError("an entry that is not an object")
    flags = {k: raw.get(k, False) for k in ("enabled", "allow_all")}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise ValueError("enabled and allow_all must be true or false")
    text = {k: _text(raw, k) for k in _TEXT}
    given = ChannelInput(
        kind=kind,
        name=text["name"],
        locale=text["locale"],
        enabled=flags["enabled"],
        app_id=_text(raw, "app_id"),
        app_secret=_text(raw, "app_secret"),
        token=_text(raw, "token"),
        connection_id=text["connection_id"],
        model=text["model"],
        project_id=text["project_id"],
        approval_mode=text["approval_mode"],
        allowed_users=_list(raw, "allowed_users"),
        allowed_chats=_list(raw, "allowed_chats"),
        allow_all=flags["allow_all"],
    )
    config, secrets = normalised(text["id"], kind, given)
    if not config.id:
        raise ValueError(f"{LABELS[kind]} channel ID is required")
    if (wrong := problem(config, secrets)) is not None:
        raise ValueError(f"{config.id}: {wrong}")
    return config, secrets


class CatalogFile:
    """One kind's file: read once at start, rewritten whole on every change of that kind."""

    def __init__(self, data_dir: Path, kind: ChannelKind) -> None:
        name, self.version = FILES[kind]
        self.kind = kind
        self.path = data_dir / name
        self.log = get_logger("foya.channels")

    def load(self) -> tuple[list[Entry], list[str]]:
        """The stored channels and what could not be read (missing file: none, none)."""
        what = f"{self.kind} channel catalog"
        items, wrong = read_versioned_list(self.path, self.version, "channels", what)
        if wrong:
            return [], [wrong]
        found: list[Entry] = []
        problems: list[str] = []
        ids: set[str] = set()
        credentials: set[str] = set()
        for item in items:
            try:
                config, secrets = loaded(self.kind, item)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            credential = config.app_id or secrets.token
            if config.id in ids or (credential and credential in credentials):
                problems.append(f"{config.id}: a repeated channel id, token or app id")
                continue
            ids.add(config.id)
            credentials.add(credential)
            found.append((config, secrets))
        return found, problems

    def keep_aside(self, problems: list[str]) -> None:
        """Copy the file as it is beside it, before a save drops what could not be read."""
        aside = self.path.with_name(f"{self.path.name}.unreadable-{int(time.time())}")
        write_bytes_atomic(aside, self.path.read_bytes())
        self.log.warning(
            "channel catalog: kept what could be read; the file is kept aside",
            kept_at=str(aside),
            problem=problems[0],
            problems=len(problems),
        )

    def write(self, entries: Iterable[Entry]) -> None:
        """Write every channel of this kind (blocking)."""
        channels = [stored(config, secrets) for config, secrets in entries]
        write_json_atomic(self.path, {"version": self.version, "channels": channels})

    async def save(self, entries: Iterable[Entry]) -> None:
        """Write every channel of this kind, in a worker thread."""
        await asyncio.to_thread(self.write, list(entries))


def files(data_dir: Path) -> dict[ChannelKind, CatalogFile]:
    return {kind: CatalogFile(data_dir, kind) for kind in FILES}
