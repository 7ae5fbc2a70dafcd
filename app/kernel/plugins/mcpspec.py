"""A plugin's `mcp.json`: the MCP servers it brings, checked before any of them is started.

    {"$schema": MCP_SCHEMA, "mcpServers": {name: server}}

A server that is wrong is skipped with a warning; the others still load. A stdio server's
`command` is a bare executable name or `./path` inside the package; its `cwd` starts with `./`,
`${PLUGIN_ROOT}` or `${PLUGIN_DATA}` and stays inside that directory; `args` and `env` values
have `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` expanded. An HTTP server's `url` is http(s) without
user info or fragment, and HTTPS unless its host is loopback.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from app.jsontypes import JSONObject
from app.kernel.plugins.manifest import diagnostic
from app.kernel.plugins.models import Diagnostic, PluginMCPServer, Problem
from app.kernel.plugins.tree import inside, read_limited

MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
MAX_MCP_BYTES = 256 * 1024


def load_mcp(root: Path, data: Path, plugin: str) -> tuple[list[PluginMCPServer], list[Diagnostic]]:
    """The servers of `mcp.json` (none without one) and what is wrong with them."""
    path = root / "mcp.json"

    def fail(code: str, message: str) -> tuple[list[PluginMCPServer], list[Diagnostic]]:
        return [], [diagnostic("mcp", path, code, message)]

    try:
        raw = json.loads(read_limited(path, MAX_MCP_BYTES))
    except FileNotFoundError:
        return [], []
    except Problem as exc:
        return fail("invalid_mcp_document", exc.message)
    except ValueError:
        return fail("mcp_invalid", "mcp.json must contain a JSON object")
    if not isinstance(raw, dict) or set(raw) != {"$schema", "mcpServers"}:
        return fail("mcp_invalid", "mcp.json may contain only $schema and mcpServers")
    if raw["$schema"] != MCP_SCHEMA or not isinstance(raw["mcpServers"], dict):
        return fail("unsupported_mcp_schema", "unsupported $schema or missing mcpServers")
    servers: list[PluginMCPServer] = []
    found: list[Diagnostic] = []
    for name, spec in sorted(raw["mcpServers"].items()):
        try:
            servers.append(_server(spec, root, data, plugin, name))
        except Problem as exc:
            message = f"server {name} skipped: {exc.message}"
            found.append(
                diagnostic(f"mcp:{name}", path, "invalid_mcp_server", message, error=False)
            )
    return servers, found


class _Named(TypedDict):
    """What every server of a plugin is called: its id and its name."""

    id: str
    name: str


def _server(spec: Any, root: Path, data: Path, plugin: str, name: str) -> PluginMCPServer:
    if not isinstance(spec, dict):
        raise Problem("server must be an object")
    kind = spec.get("type")
    common = _Named(id=f"plugin:{plugin}:{name}", name=f"{plugin}/{name}")
    if kind == "stdio":
        _only(spec, "type", "command", "args", "env", "cwd")
        command = spec.get("command")
        if not isinstance(command, str) or not command.strip():
            raise Problem("stdio command is required")
        command = command.strip()
        if command.startswith("./"):
            command = str(_rooted(root, command[2:]))
        elif "/" in command or "\\" in command:
            raise Problem("command must be a bare executable or start with ./")
        args = _strings(spec.get("args", []), list, "args must be an array of strings")
        env = _strings(spec.get("env", {}), dict, "env must contain string values")
        if {"PLUGIN_ROOT", "PLUGIN_DATA"} & set(env):
            raise Problem("env cannot override PLUGIN_ROOT or PLUGIN_DATA")
        cwd = spec.get("cwd")
        return PluginMCPServer(
            **common,
            plugin_id=plugin,
            transport="stdio",
            command=command,
            args=[_expand(a, root, data) for a in args] or None,
            env={
                **{k: _expand(v, root, data) for k, v in env.items()},
                "PLUGIN_ROOT": str(root),
                "PLUGIN_DATA": str(data),
            },
            cwd=str(root if cwd is None else _working_dir(cwd, root, data)),
        )
    if kind in ("streamable-http", "sse"):
        _only(spec, "type", "url", "headers")
        url = spec.get("url")
        if not isinstance(url, str):
            raise Problem("url is required")
        _check_url(url)
        headers = _strings(spec.get("headers", {}), dict, "headers must contain string values")
        transport = "sse" if kind == "sse" else "streamable_http"
        return PluginMCPServer(
            **common, plugin_id=plugin, transport=transport, url=url, headers=headers or None
        )
    raise Problem("server type is required" if not kind else f"unsupported transport {kind!r}")


def _only(spec: JSONObject, *allowed: str) -> None:
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise Problem(f"unknown field {unknown[0]!r}")


def _strings(value: Any, kind: type, message: str) -> Any:
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(value, kind) or not all(isinstance(v, str) for v in items):
        raise Problem(message)
    return value


def _expand(value: str, root: Path, data: Path) -> str:
    return value.replace("${PLUGIN_ROOT}", str(root)).replace("${PLUGIN_DATA}", str(data))


def _working_dir(value: Any, root: Path, data: Path) -> Path:
    if not isinstance(value, str):
        raise Problem("cwd must be a string")
    for prefix, base in (("./", root), ("${PLUGIN_ROOT}", root), ("${PLUGIN_DATA}", data)):
        rest = value.removeprefix(prefix)
        if rest != value and (prefix == "./" or rest == "" or rest.startswith("/")):
            return _rooted(base, rest.lstrip("/"))
    raise Problem("cwd must start with ./, ${PLUGIN_ROOT} or ${PLUGIN_DATA}")


def _rooted(base: Path, relative: str) -> Path:
    """`base`/`relative`, refused when it leaves `base` by `..` or through a link."""
    candidate = Path(os.path.normpath(base / relative))
    real_base = os.path.realpath(base)
    if not inside(candidate, base) or (
        candidate.exists() and not inside(os.path.realpath(candidate), real_base)
    ):
        raise Problem(f"path {relative!r} leaves its permitted root")
    return candidate


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        raise Problem("url must be an absolute HTTP URL") from None
    if not host or parts.username is not None or parts.fragment:
        raise Problem("url must be an absolute HTTP URL without user info or fragment")
    if parts.scheme not in ("http", "https"):
        raise Problem("url must use HTTP or HTTPS")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host.lower() == "localhost"
    if parts.scheme != "https" and not loopback:
        raise Problem("non-loopback MCP endpoints must use HTTPS")
