"""The errors of sub-agents, with Foya's statuses and codes (rendered by `app.http.errors`):

- `AgentRunFailed` 400 `agent_run_failed`: a run that cannot start: an empty task, an unknown
  agent, a root run with 64 children already, a tree whose token budget is spent, context
  messages that are not in the parent's history
- `RunNotFound` 404 `not_found`: no such session, or no such run of that session
- `InvalidAgentLimits` 400 `agent_limits_update_failed` (`app.kernel.agents.limits`)
- `ParentProjectNotFound` 404 `project_not_found`: `GET /projects/{id}/agents` of an unknown project
"""

from __future__ import annotations

from app.errors import BadRequest, NotFound


class AgentRunFailed(BadRequest):
    code = "agent_run_failed"


class RunNotFound(NotFound):
    code = "not_found"
