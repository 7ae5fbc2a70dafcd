"""The MCP configuration on disk, laid out as Foya lays it out: `~/.foya/mcp.json` and, apart,
the secrets in `~/.foya/mcp-credentials.json` (0600).

`mcp.json` has the shape Foya (and Claude) use, `{"mcpServers": {id: {command, args, env, cwd,
type, url, headers, disabled}}}`, plus our `name` and `exposure` when they are not the defaults.
No secret value is written there: env values and credential headers are left out of it, and
a value found there (a hand-written file) is moved to the credentials file on the next save.
The credentials file maps a server id to its bearer token, as Foya's does, and
`<id>/env/<NAME>` and `<id>/headers/<Name>` to the other secrets (an id has at most one `/`
and a name none, so the keys cannot be mistaken for one another). Both files are written
atomically, 0600.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from pydantic import ValidationError

from app.errors import ConfigError
from app.files import write_json_atomic
from app.jsontypes import JSONObject
from app.kernel.mcp.config import McpConfig, ServerConfig, is_secret_header

CONFIG_FILE = "mcp.json"
CREDENTIALS_FILE = "mcp-credentials.json"


class FileEntry(TypedDict, total=False):
    """One server as `mcp.json` keeps it (the `mcpServers` shape other tools read too)."""

    command: str
    args: list[str]
    cwd: str
    type: str
    url: str
    headers: dict[str, str]
    disabled: bool
    name: str
    exposure: str


def load(root: Path) -> McpConfig:
    """The stored configuration (empty when there is none); `ConfigError` on a broken file."""
    disk = _read(root / CONFIG_FILE)
    secrets = _read(root / CREDENTIALS_FILE)
    entries = disk.get("mcpServers") or {}
    if not isinstance(entries, dict) or not all(isinstance(v, str) for v in secrets.values()):
        raise ConfigError(f"{root / CONFIG_FILE}: not an MCP configuration")
    servers = []
    for server_id, item in sorted(entries.items()):
        if not isinstance(item, dict):
            raise ConfigError(f"{root / CONFIG_FILE}: server {server_id!r} is not an object")
        transport = "stdio"
        if not item.get("command"):
            transport = str(item.get("type") or "http").replace("-", "_")
            transport = "streamable_http" if transport == "http" else transport
        env = dict(item.get("env") or {})
        headers = dict(item.get("headers") or {})
        for key, value in secrets.items():
            # From the right: an id may hold one `/` (`namespace/name`), a name none.
            owner, kind, name = ["", "", *key.rsplit("/", 2)][-3:]
            if owner == server_id and kind == "env":
                env[name] = value
            elif owner == server_id and kind == "headers":
                headers[name] = value
        try:
            server = ServerConfig(
                id=server_id,
                name=str(item.get("name") or server_id),
                enabled=not item.get("disabled", False),
                transport=transport,
                command=str(item.get("command") or ""),
                args=list(item.get("args") or []),
                env=env,
                cwd=str(item.get("cwd") or ""),
                url=str(item.get("url") or ""),
                headers=headers,
                bearer_token=secrets.get(server_id, ""),
                exposure=item.get("exposure") or "direct",
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            message = f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
            raise ConfigError(f"{root / CONFIG_FILE}: server {server_id!r}: {message}") from None
        servers.append(server)
    return McpConfig(servers=servers)


def save(root: Path, config: McpConfig) -> None:
    """Write both files (credentials first, so no secret is ever only in `mcp.json`)."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    entries: dict[str, FileEntry] = {}
    secrets: dict[str, str] = {}
    for server in config.servers:
        entry: FileEntry = {}
        if server.transport == "stdio":
            entry["command"] = server.command
            if server.args:
                entry["args"] = server.args
            if server.cwd:
                entry["cwd"] = server.cwd
        else:
            entry["type"] = server.transport.replace("_", "-")
            entry["url"] = server.url
        plain = {k: v for k, v in server.headers.items() if not is_secret_header(k)}
        if plain:
            entry["headers"] = plain
        if not server.enabled:
            entry["disabled"] = True
        if server.name != server.id:
            entry["name"] = server.name
        if server.exposure != "direct":
            entry["exposure"] = server.exposure
        entries[server.id] = entry
        if server.bearer_token:
            secrets[server.id] = server.bearer_token
        for name, value in server.env.items():
            secrets[f"{server.id}/env/{name}"] = value
        for name, value in server.headers.items():
            if is_secret_header(name):
                secrets[f"{server.id}/headers/{name}"] = value
    write_json_atomic(root / CREDENTIALS_FILE, secrets)
    write_json_atomic(root / CONFIG_FILE, {"mcpServers": entries})


def _read(path: Path) -> JSONObject:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return value
