"""MCP servers (Foya's `/mcp*`): configuration and its secrets (`config`, `store`), supervised
connections through the official SDK (`link`), the service the kernel holds (`service`), the
tools the model sees, with `tool_search` for deferred tools (`tools`), and the public registry
(`registry`)."""

from app.kernel.mcp.common import Timeouts
from app.kernel.mcp.config import McpConfig, ServerConfig
from app.kernel.mcp.service import McpService
from app.kernel.mcp.tools import ToolSearch, control_tools

__all__ = [
    "McpConfig",
    "McpService",
    "ServerConfig",
    "Timeouts",
    "ToolSearch",
    "control_tools",
]
