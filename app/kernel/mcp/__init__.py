"""MCP servers (Foya's `/mcp*`): configuration and its secrets (`config`, `store`), supervised
connections through the official SDK (`link`) and what they list (`listing`), the service the
kernel holds (`service`), the tools the model sees (`tools`), and the public registry
(`registry`)."""

from typing import TYPE_CHECKING

from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.mcp.common import Timeouts
    from app.kernel.mcp.config import McpConfig, ServerConfig
    from app.kernel.mcp.service import McpService
    from app.kernel.mcp.tools import control_tools

# Imported on first lookup: a start with no MCP server configured loads none of these.
__getattr__ = LazyExports(
    __name__,
    {
        "app.kernel.mcp.common": ("Timeouts",),
        "app.kernel.mcp.config": ("McpConfig", "ServerConfig"),
        "app.kernel.mcp.service": ("McpService",),
        "app.kernel.mcp.tools": ("control_tools",),
    },
)

__all__ = [
    "McpConfig",
    "McpService",
    "ServerConfig",
    "Timeouts",
    "control_tools",
]
