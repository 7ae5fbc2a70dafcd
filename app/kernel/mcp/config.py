"""MCP server definitions: their wire shape (Foya's `GET|PUT /mcp`), validation, and which of
their values are secrets.

A server is reached over `stdio` (a command with args, env and cwd), `streamable_http` or `sse`
(a URL with headers and an optional bearer token). Secrets are write-only, like a connection's
API key: `bearer_token` never leaves the kernel (`has_token` says whether one is stored, as in
Foya), and, stricter than Foya, neither do env values nor the values of headers that carry
credentials (`is_secret_header`): answers show `SECRET_PLACEHOLDER` in their place. Sending a
server back with a placeholder, or with `bearer_token` empty, keeps what is stored for it.

A server's id is one name or, as the public registry names servers (and Foya keeps them),
`namespace/name` (`valid_id`); two ids whose tools would get the same names are refused.

`exposure` (`direct`, `deferred`, `hidden`; our addition, default `direct` as Foya's MCP tools
are) says how the server's tools reach the model (`app.kernel.turns.tooling`).

Every error here is `McpUpdateFailed` (400 `mcp_update_failed`, Foya's code for a refused
`PUT /mcp`); nothing is stored unless the whole configuration is valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from app.bodies import Lenient
from app.errors import BadRequest

Transport = Literal["stdio", "streamable_http", "sse"]
Exposure = Literal["direct", "deferred", "hidden"]
SECRET_PLACEHOLDER = "********"  # noqa: S105 (what a secret is shown as)

#: A server id: one name, or the registry's `namespace/name` (`io.github.user/server`). Ids are
#: keys in both files and the prefix of tool names, never a path: no segment starts with a dot.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?")
MAX_ID = 200  # the registry's longest name
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_OMITTED_EMPTY = ("command", "args", "env", "cwd", "url", "headers", "bearer_token", "has_token")
_SECRET_HEADER_WORDS = ("auth", "token", "key", "secret", "password", "cookie", "session")


class McpUpdateFailed(BadRequest):
    """A `PUT /mcp` whose configuration breaks a rule (the message names the field)."""

    code = "mcp_update_failed"


class ServerConfig(Lenient):
    """One MCP server, as `PUT /mcp` takes it and as it is kept (secrets included); unknown
    fields are ignored, as Foya's handler does."""

    id: str = Field(description="Unique; the prefix of the server's tool names.")
    name: str = ""
    enabled: bool = False
    transport: str = Field("", description="`stdio`, `streamable_http` or `sse`.")
    command: str = ""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Values are write-only.")
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = Field(
        default_factory=dict, description="Values of credential headers are write-only."
    )
    bearer_token: str = Field("", description="Write-only; empty keeps the stored one.")
    has_token: bool = False
    exposure: Exposure = "direct"


class McpConfig(Lenient):
    """The whole MCP configuration (`GET|PUT /mcp`)."""

    version: int = 1
    servers: list[ServerConfig] = Field(default_factory=list)


def valid_id(server_id: str) -> bool:
    """Whether `server_id` may name a server (`_ID`, at most `MAX_ID` characters)."""
    return len(server_id) <= MAX_ID and bool(_ID.fullmatch(server_id))


def name_prefix(server_id: str) -> str:
    """The server's part of its tools' names (`mcp__<this>__<tool>`): unsafe characters
    (`.`, `/`, …) become `_`."""
    return _UNSAFE_IN_NAME.sub("_", server_id).strip("_")


def is_secret_header(name: str) -> bool:
    """Whether a header's value is a credential (Authorization, Cookie, X-Api-Key, …)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_HEADER_WORDS)


def public(config: McpConfig) -> McpConfig:
    """`config` as answered: secrets replaced by `has_token` and placeholders."""
    servers = []
    for server in config.servers:
        headers = {
            k: SECRET_PLACEHOLDER if is_secret_header(k) else v for k, v in server.headers.items()
        }
        env = dict.fromkeys(server.env, SECRET_PLACEHOLDER)
        servers.append(
            server.model_copy(
                update={
                    "env": env,
                    "headers": headers,
                    "bearer_token": "",
                    "has_token": bool(server.bearer_token),
                }
            )
        )
    return McpConfig(servers=servers)


def wire(config: McpConfig) -> dict[str, Any]:
    """`config` in Foya's JSON shape: empty optional fields are left out (Go's `omitempty`)."""
    servers = []
    for server in config.servers:
        item = server.model_dump()
        for key in _OMITTED_EMPTY:
            if not item[key]:
                del item[key]
        servers.append(item)
    return {"version": config.version, "servers": servers}


def merged(incoming: McpConfig, current: McpConfig) -> McpConfig:
    """The configuration to store for `PUT /mcp`: `incoming` with the secrets it left out
    taken from `current` (same server id), validated; `McpUpdateFailed` otherwise."""
    stored = {s.id: s for s in current.servers}
    seen: set[str] = set()
    prefixes: dict[str, str] = {}
    servers = []
    for item in incoming.servers:
        server_id = item.id.strip()
        if not valid_id(server_id) or server_id in seen:
            raise McpUpdateFailed(f"invalid or duplicate MCP server id {server_id!r}")
        seen.add(server_id)
        other = prefixes.setdefault(name_prefix(server_id), server_id)
        if other != server_id:  # else one server's tools would shadow the other's
            raise McpUpdateFailed(
                f"MCP server ids {other!r} and {server_id!r} give their tools the same names"
            )
        old = stored.get(server_id)
        token = item.bearer_token or (old.bearer_token if old else "")
        env = _kept(server_id, "env", item.env, old.env if old else {}, lambda _: True)
        headers = _kept(
            server_id, "headers", item.headers, old.headers if old else {}, is_secret_header
        )
        server = item.model_copy(
            update={
                "id": server_id,
                "name": item.name.strip() or server_id,
                "env": env,
                "headers": headers,
                "bearer_token": token,
                "has_token": False,
            }
        )
        _validate(server)
        servers.append(server)
    return McpConfig(servers=sorted(servers, key=lambda s: s.id))  # as a reload has them


def _kept(
    server_id: str,
    field: str,
    given: dict[str, str],
    stored: dict[str, str],
    secret: Callable[[str], bool],
) -> dict[str, str]:
    """`given` with each placeholder replaced by the stored value of the same name."""
    out = {}
    for name, value in given.items():
        if value == SECRET_PLACEHOLDER and secret(name):
            if name not in stored:
                raise McpUpdateFailed(
                    f"{server_id}: {field}.{name} is the placeholder but no value is stored "
                    "for it; send the value itself"
                )
            value = stored[name]
        out[name] = value
    return out


def _validate(server: ServerConfig) -> None:
    where = server.id
    if server.transport == "stdio":
        if not server.command.strip():
            raise McpUpdateFailed(f"{where}: stdio transport requires command")
        if server.cwd and not server.cwd.startswith("/"):
            raise McpUpdateFailed(f"{where}: cwd must be an absolute path")
    elif server.transport in ("streamable_http", "sse"):
        parts = urlsplit(server.url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise McpUpdateFailed(f"{where}: remote transport requires an http(s) URL")
    else:
        raise McpUpdateFailed(f"{where}: unsupported transport {server.transport!r}")
    for name, value in server.env.items():
        if not _ENV_NAME.fullmatch(name) or "\0" in value:
            raise McpUpdateFailed(f"{where}: invalid environment variable {name!r}")
    for name, value in server.headers.items():
        if not _HEADER_NAME.fullmatch(name) or any(c in value for c in "\r\n\0"):
            raise McpUpdateFailed(f"{where}: invalid header {name!r}")
    if any(c in server.bearer_token for c in "\r\n\0"):
        raise McpUpdateFailed(f"{where}: invalid bearer_token")
    if any("\0" in a for a in (server.command, *server.args)):
        raise McpUpdateFailed(f"{where}: command and args may not contain NUL")
