"""A marketplace entry's preview: what installing its package would bring, counted from a
copy of the package before anything is installed.

The package is `compatible` when every part it holds is one this kernel loads, `partial` when
some part is not (hooks, LSP servers, legacy layouts, a component with an error), and
`unsupported` when its manifest is not valid for the entry's name or it holds nothing loadable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.kernel.plugins.manifest import (
    MAX_COMMAND_DIRS,
    count_files,
    count_skills,
    load_manifest,
)
from app.kernel.plugins.mcpspec import load_mcp
from app.kernel.plugins.models import MarketplacePluginPreview

UNSUPPORTED = {
    "hooks": ("hooks", "hooks.json"),
    "lsp": ("lsp.json", ".lsp.json", "lsp-config"),
    "legacy_mcp": (".mcp.json", ".github/mcp.json"),
}
UNSUPPORTED_FIELDS = {
    "agents": "agents",
    "commands": "commands",
    "hooks": "hooks",
    "lspServers": "lsp",
    "mcpServers": "legacy_mcp",
    "skills": "legacy_skills",
}


def preview_package(root: Path, name: str, data_root: Path) -> MarketplacePluginPreview:
    """What installing the package at `root` as plugin `name` would bring, and how much of it
    this kernel loads (blocking)."""
    manifest, found = load_manifest(root)
    skills, more = count_skills(root)
    servers, mcp = load_mcp(root, data_root / name, name)
    commands, more_commands = count_files(root, "commands", MAX_COMMAND_DIRS)
    agents, more_agents = count_files(root, "agents", 0)
    component_problems = [*more, *mcp, *more_commands, *more_agents]
    valid = manifest is not None and manifest.name == name
    unsupported = _unsupported(root)
    if not valid or skills + len(servers) + commands + agents == 0:
        compatibility = "unsupported"
    elif unsupported or any(d.severity == "error" for d in component_problems):
        compatibility = "partial"
    else:
        compatibility = "compatible"
    diagnostics = [*found, *component_problems]
    return MarketplacePluginPreview(
        name=name,
        valid=valid,
        compatibility=compatibility,
        skill_count=skills,
        mcp_server_count=len(servers),
        command_count=commands,
        agent_count=agents,
        unsupported_components=unsupported or None,
        diagnostics=diagnostics or None,
    )


def _unsupported(root: Path) -> list[str]:
    """The parts of a package this kernel does not load (hooks, LSP, legacy layouts)."""
    found = {c for c, paths in UNSUPPORTED.items() if any(os.path.lexists(root / p) for p in paths)}
    try:
        raw = json.loads((root / "plugin.json").read_bytes())
    except (OSError, ValueError):
        raw = None
    if isinstance(raw, dict):
        found |= {c for f, c in UNSUPPORTED_FIELDS.items() if raw.get(f) is not None}
        if isinstance(raw.get("extensions"), dict) and raw["extensions"]:
            found.add("extensions")
    return sorted(found)
