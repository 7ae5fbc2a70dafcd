"""What on disk makes a capability start with the kernel.

A capability whose start only reads what it recorded (sub-agents' runs and limits, the
automations, plan mode's workflows, the installed plugins, the MCP configuration, the channel
catalogs, the push subscriptions) has nothing to do at start while it recorded nothing: it is
then built on first use, and a start imports none of its modules. Each check reads only file
names, from the capability's own module.
"""

from __future__ import annotations

from pathlib import Path

from app.kernel.agents import limits as agent_limits
from app.kernel.agents import runs as agent_runs
from app.kernel.automations import store as automation_store
from app.kernel.workflows import records as workflow_records

#: `app.kernel.mcp.store.CONFIG_FILE`, named here so that a start with no MCP configuration
#: imports none of the MCP modules (a test holds the two equal).
MCP_CONFIG = "mcp.json"
#: `app.kernel.channels.catalog.FILES`' names, named here for the same reason (a test holds
#: them equal).
CHANNEL_CATALOGS = ("feishu-channels.json", "telegram-channels.json")
#: `app.kernel.push.records.FILE`, for the same reason.
PUSH_SUBSCRIPTIONS = "push-subscriptions.json"


def _nonempty(directory: Path) -> bool:
    try:
        return any(directory.iterdir())
    except FileNotFoundError:
        return False


def agents(data_dir: Path) -> bool:
    """Whether sub-agents recorded limits or runs (a start marks unfinished runs interrupted)."""
    return (data_dir / agent_limits.FILE).exists() or _nonempty(data_dir / agent_runs.DIRECTORY)


def automations(data_dir: Path) -> bool:
    """Whether automations were recorded (a start schedules them and ends cut-short runs)."""
    return (data_dir / automation_store.FILE).exists()


def channels(data_dir: Path) -> bool:
    """Whether a channel was recorded (a start starts the enabled ones)."""
    return any((data_dir / name).exists() for name in CHANNEL_CATALOGS)


def push(data_dir: Path) -> bool:
    """Whether a browser subscribed to push messages (a start starts sending them)."""
    return (data_dir / PUSH_SUBSCRIPTIONS).exists()


def plugins(foya_home: Path) -> bool:
    """Whether a plugin or a marketplace was ever installed (their directories exist)."""
    return (foya_home / "plugins").exists() or (foya_home / "marketplaces").exists()


def mcp(foya_home: Path) -> bool:
    """Whether the user configured MCP servers (a start connects the enabled ones)."""
    return (foya_home / MCP_CONFIG).exists()


def workflows(data_dir: Path) -> bool:
    """Whether plan mode recorded workflows (a deleted session's must go with it)."""
    return (data_dir / workflow_records.FILE).exists()
