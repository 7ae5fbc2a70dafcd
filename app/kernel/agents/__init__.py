"""Sub-agents (Foya's `agentdef` and `subagent`): agent definitions
(`definitions`), limits (`limits`), the runs of child agents and their records (`runs`,
`service`), their scheduling (`admission`), token budget (`budget`), child sessions (`child`,
`package`) and the model's tools (`tools`). Errors: `errors`."""

from app.kernel.agents.definitions import Definition, Definitions
from app.kernel.agents.service import Agents, SpawnRequest
from app.kernel.agents.tools import agent_tools

__all__ = ["Agents", "Definition", "Definitions", "SpawnRequest", "agent_tools"]
