"""The kernel as the HTTP layer sees it: the one module `app.http` imports the kernel from.

It re-exports, and defines nothing: the `Kernel` itself, the wire types routes accept and
answer, the few kernel errors and functions a route needs to shape an answer, and the limits a
route enforces before the kernel is called. A route reaching past this surface into a kernel
module is refused by the import contracts and by tests/test_kernel_api.py; a name a route
needs is added here (and to `__all__`, which lists every export), so what the wire depends on
can be read in one place. The names of the capabilities built on first use (canvas, channels,
imports, terminals, questions, plugins, sub-agents, automations, MCP, web search, plan mode, the
turn core's compaction) are looked up on first use as well, by the module's `__getattr__`.
"""

from __future__ import annotations

import typing

from app.kernel import Kernel, NotReady
from app.kernel.connections import Connection, Models
from app.kernel.filestate import FileAction, Status
from app.kernel.lazyexports import LazyExports as _LazyExports
from app.kernel.messageshape import servable
from app.kernel.projects import ProjectInfo
from app.kernel.readiness import Check, CheckName
from app.kernel.sessions import Session
from app.kernel.trust import TrustInfo
from app.kernel.turns.inputs import TurnAccepted, TurnInput
from app.kernel.usage import UsageReport
from app.kernel.usercontext import Memory, MemorySettings, Rule

if typing.TYPE_CHECKING:
    from app.kernel.agents.budget import Budget
    from app.kernel.agents.definitions import AgentDefinition
    from app.kernel.agents.limits import AgentLimits
    from app.kernel.agents.package import ContextSelection
    from app.kernel.agents.runs import AgentRunSnapshot
    from app.kernel.agents.service import SpawnRequest
    from app.kernel.automations.store import AutomationInput, AutomationWire
    from app.kernel.canvas.media import MAX_VIDEO_BYTES
    from app.kernel.canvas.models import (
        Asset,
        AssetTooLarge,
        CanvasChanges,
        Document,
        GenerationRequest,
        MissingAsset,
        NewCanvas,
    )
    from app.kernel.channels.pairings import ConversationBindingWire, PairingWire
    from app.kernel.channels.records import ChannelInput, ChannelWire, FeishuBotWire
    from app.kernel.channels.registration import FeishuRegistrationState, RegistrationInput
    from app.kernel.hooks.config import Hook
    from app.kernel.imports import UPLOADABLE, ImportSummary, UploadForm
    from app.kernel.interactions import Answer
    from app.kernel.interactions.browser import ActionResult
    from app.kernel.mcp.config import McpConfig
    from app.kernel.mcp.config import wire as mcp_config_wire
    from app.kernel.plugins.models import (
        MarketplaceCatalog,
        MarketplacePluginPreview,
        MarketplaceSummary,
        Plugin,
    )
    from app.kernel.terminals import TerminalSnapshot
    from app.kernel.turns.compaction import Compacted
    from app.kernel.usercontext.commandfiles import Command
    from app.kernel.usercontext.commands import CommandExecution
    from app.kernel.usercontext.skillmodels import ScanResult, Skill
    from app.kernel.usercontext.stream import context_events
    from app.kernel.web.config import KINDS as SEARCH_PROVIDER_KINDS
    from app.kernel.web.config import PublicSettings as WebSearchSettings
    from app.kernel.web.results import SearchResult
    from app.kernel.workflows.records import Workflow
    from app.kernel.workflows.service import WorkflowApproval

# The names of capabilities built on first use are imported on first use too: a start (whose
# probes import this module) then loads none of their modules.
__getattr__ = _LazyExports(
    __name__,
    {
        "app.kernel.agents.budget": ("Budget",),
        "app.kernel.agents.definitions": ("AgentDefinition",),
        "app.kernel.agents.limits": ("AgentLimits",),
        "app.kernel.agents.package": ("ContextSelection",),
        "app.kernel.agents.runs": ("AgentRunSnapshot",),
        "app.kernel.agents.service": ("SpawnRequest",),
        "app.kernel.automations.store": ("AutomationInput", "AutomationWire"),
        "app.kernel.canvas.media": ("MAX_VIDEO_BYTES",),
        "app.kernel.channels.pairings": ("ConversationBindingWire", "PairingWire"),
        "app.kernel.channels.records": ("ChannelInput", "ChannelWire", "FeishuBotWire"),
        "app.kernel.channels.registration": ("FeishuRegistrationState", "RegistrationInput"),
        "app.kernel.canvas.models": (
            "Asset",
            "AssetTooLarge",
            "CanvasChanges",
            "Document",
            "GenerationRequest",
            "MissingAsset",
            "NewCanvas",
        ),
        "app.kernel.hooks.config": ("Hook",),
        "app.kernel.imports": ("UPLOADABLE", "ImportSummary", "UploadForm"),
        "app.kernel.interactions": ("Answer",),
        "app.kernel.interactions.browser": ("ActionResult",),
        "app.kernel.mcp.config": ("McpConfig", "mcp_config_wire=wire"),
        "app.kernel.plugins.models": (
            "MarketplaceCatalog",
            "MarketplacePluginPreview",
            "MarketplaceSummary",
            "Plugin",
        ),
        "app.kernel.terminals": ("TerminalSnapshot",),
        "app.kernel.turns.compaction": ("Compacted",),
        "app.kernel.usercontext.commandfiles": ("Command",),
        "app.kernel.usercontext.commands": ("CommandExecution",),
        "app.kernel.usercontext.skillmodels": ("ScanResult", "Skill"),
        "app.kernel.usercontext.stream": ("context_events",),
        "app.kernel.web.config": (
            "SEARCH_PROVIDER_KINDS=KINDS",
            "WebSearchSettings=PublicSettings",
        ),
        "app.kernel.web.results": ("SearchResult",),
        "app.kernel.workflows.records": ("Workflow",),
        "app.kernel.workflows.service": ("WorkflowApproval",),
    },
)


__all__ = [
    "MAX_VIDEO_BYTES",
    "SEARCH_PROVIDER_KINDS",
    "UPLOADABLE",
    "ActionResult",
    "AgentDefinition",
    "AgentLimits",
    "AgentRunSnapshot",
    "Answer",
    "Asset",
    "AssetTooLarge",
    "AutomationInput",
    "AutomationWire",
    "Budget",
    "CanvasChanges",
    "ChannelInput",
    "ChannelWire",
    "Check",
    "CheckName",
    "Command",
    "CommandExecution",
    "Compacted",
    "Connection",
    "ContextSelection",
    "ConversationBindingWire",
    "Document",
    "FeishuBotWire",
    "FeishuRegistrationState",
    "FileAction",
    "GenerationRequest",
    "Hook",
    "ImportSummary",
    "Kernel",
    "MarketplaceCatalog",
    "MarketplacePluginPreview",
    "MarketplaceSummary",
    "McpConfig",
    "Memory",
    "MemorySettings",
    "MissingAsset",
    "Models",
    "NewCanvas",
    "NotReady",
    "PairingWire",
    "Plugin",
    "ProjectInfo",
    "RegistrationInput",
    "Rule",
    "ScanResult",
    "SearchResult",
    "Session",
    "Skill",
    "SpawnRequest",
    "Status",
    "TerminalSnapshot",
    "TrustInfo",
    "TurnAccepted",
    "TurnInput",
    "UploadForm",
    "UsageReport",
    "WebSearchSettings",
    "Workflow",
    "WorkflowApproval",
    "context_events",
    "mcp_config_wire",
    "servable",
]
