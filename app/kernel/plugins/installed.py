"""Reading what is installed: the package directories below the plugin root, and each one
described as `GET /plugins` lists it (nothing in a package is ever run to describe it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from app.kernel.plugins.manifest import (
    MAX_COMMAND_DIRS,
    count_files,
    count_skills,
    load_manifest,
)
from app.kernel.plugins.mcpspec import load_mcp
from app.kernel.plugins.models import Plugin

MAX_PLUGINS = 128


def package_dirs(root: Path) -> list[Path]:
    """The installed packages' directories, by name (hidden entries and links left out)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [
        Path(e.path)
        for e in entries
        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
    ][:MAX_PLUGINS]


def describe(
    path: Path, data_root: Path, sources: Mapping[str, str], disabled: frozenset[str]
) -> Plugin:
    """The plugin installed at `path` as listed: its manifest (or why it has none), what it
    brings (skills, MCP servers, commands, agents) and its state."""
    root = Path(os.path.realpath(path))
    manifest, found = load_manifest(root)
    name = manifest.name if manifest is not None else root.name
    data = data_root.absolute() / name
    counts = {"skill_count": 0, "mcp_server_count": 0, "command_count": 0, "agent_count": 0}
    if manifest is not None:
        counts["skill_count"], more = count_skills(root)
        found += more
        servers, more = load_mcp(root, data, name)
        counts["mcp_server_count"] = len(servers)
        found += more
        counts["command_count"], more = count_files(root, "commands", MAX_COMMAND_DIRS)
        found += more
        counts["agent_count"], more = count_files(root, "agents", 0)
        found += more
    return Plugin(
        **(manifest.model_dump() if manifest is not None else {"name": name}),
        path=str(root),
        data_path=str(data),
        source=sources.get(name) or None,
        enabled=manifest is not None and name not in disabled,
        valid=manifest is not None,
        **counts,
        diagnostics=found or None,
    )
