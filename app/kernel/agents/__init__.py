"""Sub-agents (Foya's `agentdef` and `subagent`): agent definitions
(`definitions`), limits (`limits`), the runs of child agents and their records (`runs`,
`service`), their scheduling (`admission`), token budget (`budget`), child sessions (`child`,
`package`) and the model's tools (`tools`). Errors: `errors`."""

from typing import TYPE_CHECKING

from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.agents.definitions import Definition, Definitions
    from app.kernel.agents.service import Agents, SpawnRequest
    from app.kernel.agents.tools import agent_tools

# Imported on first lookup: a start reads only the names of the files on disk (`runs`,
# `limits`), and importing one module of a package runs its `__init__`.
__getattr__ = LazyExports(
    __name__,
    {
        "app.kernel.agents.definitions": ("Definition", "Definitions"),
        "app.kernel.agents.service": ("Agents", "SpawnRequest"),
        "app.kernel.agents.tools": ("agent_tools",),
    },
)

__all__ = ["Agents", "Definition", "Definitions", "SpawnRequest", "agent_tools"]
