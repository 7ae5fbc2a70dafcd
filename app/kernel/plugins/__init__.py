"""Plugins: packages bundling skills, commands, agent definitions and MCP servers, installed
from a local directory, a git URL or a marketplace (see `store` and `marketplaces`)."""

from app.kernel.plugins.models import Plugin, PluginFailure, PluginMCPServer
from app.kernel.plugins.store import Plugins

__all__ = ["Plugin", "PluginFailure", "PluginMCPServer", "Plugins"]
