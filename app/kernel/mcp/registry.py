"""`GET /mcp/registry`: servers of the public MCP registry, shaped as Foya shapes them: each with a
ready `config` (a remote `streamable_http`/`sse` URL first, else an npm package run over stdio
through `npx` or its runtime hint) and `installable` false with a `reason` when it needs more
configuration or has no way we can run it. The id (of the item and of its config) is the
registry's name, `namespace/name`, as in Foya, so the client's "installed" check matches it.
An item is only installable when `PUT /mcp` takes its config as the client sends it: the
config is checked by the very rule `PUT /mcp` applies (`config.merged`), and one it refuses is
answered with `installable` false and the reason. The registry's URL is a setting
(`FOYA_MCP_REGISTRY_URL`), so tests and air-gapped hosts can point it elsewhere.

The registry is fetched through the guarded fetcher of `web_fetch` (`app.kernel.web.fetch`):
what it answers is someone else's, and so are the redirects it may send, so a private,
loopback or link-local address is refused unless `FOYA_WEB_FETCH_ALLOW_HOSTS` allows it (a
registry on the operator's own network is allowed there), every redirect is checked again,
and the answer is capped at `MAX_BYTES` and `TIMEOUT` seconds.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NotRequired, TypedDict

from pydantic import ValidationError
from yarl import URL

from app.jsontypes import JSONObject
from app.kernel.mcp.config import McpConfig, McpUpdateFailed, ServerConfig, merged

if TYPE_CHECKING:
    from app.kernel.web.fetch import Fetcher

LIMIT = 40
TIMEOUT = 15.0
MAX_BYTES = 4 * 1024 * 1024


class InstallConfig(TypedDict):
    """The server's configuration as `PUT /mcp` takes it (`transport` empty when there is no
    way to run it, as Foya sends it)."""

    id: str
    name: str
    enabled: bool
    transport: str
    url: NotRequired[str]
    command: NotRequired[str]
    args: NotRequired[list[str]]
    env: NotRequired[dict[str, str]]


class RegistryItem(TypedDict):
    """One server of the registry as `GET /mcp/registry` answers it."""

    id: str
    name: str
    installable: bool
    config: InstallConfig
    description: NotRequired[str]
    version: NotRequired[str]
    reason: NotRequired[str]


async def registry_servers(fetcher: Fetcher, url: str, query: str) -> list[RegistryItem]:
    """One page of the registry's answer to `query`, deduplicated by name, in its order;
    `FetchError` when it cannot be fetched, `ValueError` when it is not a registry answer."""
    params = {"limit": str(LIMIT)}
    if query.strip():
        params["search"] = query.strip()
    try:
        target = str(URL(url).update_query(params))
    except (ValueError, TypeError):
        raise ValueError("the MCP registry URL is invalid") from None
    body = await fetcher.read(target, max_bytes=MAX_BYTES, time_limit=TIMEOUT)
    try:
        answer = json.loads(body)  # a JSONDecodeError (and a UnicodeDecodeError) is a ValueError
    except RecursionError:
        raise ValueError("the MCP registry's answer is nested too deeply") from None
    if not isinstance(answer, dict):
        raise ValueError("the MCP registry did not answer a JSON object")
    entries = answer.get("servers") or []
    if not isinstance(entries, list):
        raise ValueError("the MCP registry's servers are not a list")
    found: dict[str, RegistryItem] = {}
    for entry in entries:
        server = entry.get("server") if isinstance(entry, dict) else None
        if not isinstance(server, dict):
            continue  # not a server entry: nothing to offer
        item = _install(server)
        if item["id"]:
            found[item["id"]] = _checked(item)
    return list(found.values())


def _checked(item: RegistryItem) -> RegistryItem:
    """`item`, no longer installable when `PUT /mcp` would refuse its config."""
    if not item["installable"]:
        return item
    try:
        merged(McpConfig(servers=[ServerConfig.model_validate(item["config"])]), McpConfig())
    except (McpUpdateFailed, ValidationError) as exc:
        reason = str(exc).splitlines()[0]
        refused = item.copy()
        refused["installable"], refused["reason"] = False, f"invalid configuration: {reason}"
        return refused
    return item


def _install(server: JSONObject) -> RegistryItem:
    name = str(server.get("name") or "")
    title = str(server.get("title") or "").strip() or name
    # `transport` is always there (empty when there is no way to run it), as Foya sends it.
    config: InstallConfig = {"id": name, "name": title, "enabled": True, "transport": ""}
    item: RegistryItem = {"id": name, "name": title, "installable": False, "config": config}
    for key in ("description", "version"):
        if server.get(key):
            item[key] = str(server[key])
    for remote in server.get("remotes") or []:
        transport = str(remote.get("type") or "").replace("-", "_")
        if transport in ("streamable_http", "sse") and remote.get("url"):
            config["transport"], config["url"] = transport, str(remote["url"])
            item["installable"] = True
            return item
    for package in server.get("packages") or []:
        if (
            package.get("registryType") != "npm"
            or (package.get("transport") or {}).get("type") != "stdio"
        ):
            continue
        args = _arguments(package.get("runtimeArguments") or [])
        extra = _arguments(package.get("packageArguments") or [])
        if args is None or extra is None:
            continue
        identifier = str(package.get("identifier") or "")
        version = str(package.get("version") or server.get("version") or "")
        if version and not identifier.endswith("@" + version):
            identifier += "@" + version
        env: dict[str, str] = {}
        ready = True
        for variable in package.get("environmentVariables") or []:
            value = str(variable.get("value") or variable.get("default") or "")
            ready = ready and not (variable.get("isRequired") and not value)
            if value:
                env[str(variable.get("name") or "")] = value
        config["transport"] = "stdio"
        config["command"] = str(package.get("runtimeHint") or "npx")
        config["args"] = [*args, identifier, *extra]
        if env:
            config["env"] = env
        item["installable"] = ready
        if not ready:
            item["reason"] = "needs more configuration"
        return item
    item["reason"] = "no compatible way to install it"
    return item


def _arguments(items: list[JSONObject]) -> list[str] | None:
    """Registry arguments as argv; None when a required one has no usable value."""
    out: list[str] = []
    for item in items:
        value = str(item.get("value") or item.get("default") or "")
        if item.get("isRequired") and (not value or "{" in value):
            return None
        if not value:
            continue
        if item.get("name"):
            out.append(str(item["name"]))
        out.append(value)
    return out
