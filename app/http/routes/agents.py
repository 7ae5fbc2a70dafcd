"""Sub-agents: agent definitions, limits, and the runs of a session.

`POST …/agents/wait` waits at most `WAIT_BOUND` (300 s) and then answers the runs as they are
(some still `queued` or `running`). Errors: app.kernel.agents.errors.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.agents import AgentContext, AgentLimitsBody, StartAgent, WaitAgents
from app.kernel.api import (
    AgentDefinition,
    AgentLimits,
    AgentRunSnapshot,
    Budget,
    ContextSelection,
    Kernel,
    SpawnRequest,
)

RUNS = "/sessions/{session_id}/agents"


def _context(body: AgentContext | None) -> ContextSelection:
    if body is None:
        return ContextSelection()
    return ContextSelection(body.mode or None, tuple(body.message_seqs or ()), body.last_turns or 0)


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`: the definitions and limits, then a session's runs."""
    api = APIRouter(tags=["agents"])
    _definitions(api, kernel)
    _runs(api, kernel)
    return api


def _definitions(api: APIRouter, kernel: Kernel) -> None:
    """The agent definitions (everywhere, or as a project sees them) and the run limits."""
    agents = kernel.agents

    @api.get("/agents")
    async def list_agents() -> list[AgentDefinition]:
        """Built-in and user agent definitions, one per name (the user's over a built-in)."""
        return [d.wire() for d in await agents.list_definitions()]

    @api.get("/projects/{project_id}/agents")
    async def project_agents(project_id: str) -> list[AgentDefinition]:
        """As `GET /agents`, with the project's definitions over the others."""
        return [d.wire() for d in await agents.list_definitions(project_id)]

    @api.get("/settings/agent-limits")
    async def get_limits() -> AgentLimits:
        return agents.limits()

    @api.put("/settings/agent-limits")
    async def put_limits(body: AgentLimitsBody) -> AgentLimits:
        """Store and apply; `max_global_concurrency` and `max_per_root` 1-256,
        `max_tree_tokens` ≥ 0 (0: no budget)."""
        return await agents.set_limits(
            {
                "max_global_concurrency": body.max_global_concurrency,
                "max_per_root": body.max_per_root,
                "max_tree_tokens": body.max_tree_tokens,
            }
        )


def _runs(api: APIRouter, kernel: Kernel) -> None:
    """A session's sub-agent runs: start, list, wait, read, cancel, and the tree's budget."""
    agents = kernel.agents

    @api.post(RUNS, status_code=202)
    async def start_agent(session_id: str, body: StartAgent) -> AgentRunSnapshot:
        """Start a child agent (`agent_ref`: a ref or name, else `worker`); answers its run,
        `queued`. Runs of the same `root_run_id` (a new one when absent) share limits."""
        request = SpawnRequest(
            task=body.task,
            agent_ref=body.agent_ref or "",
            root_run_id=body.root_run_id or "",
            parent_tool_call_id=body.parent_tool_call_id or "",
            context=_context(body.context),
        )
        return await agents.spawn(session_id, request)

    @api.get(RUNS)
    async def list_runs(session_id: str) -> list[AgentRunSnapshot]:
        """The runs this session started, oldest first."""
        return await agents.listing(session_id)

    @api.post(RUNS + "/wait")
    async def wait_runs(session_id: str, body: WaitAgents) -> list[AgentRunSnapshot]:
        """Wait until all (or `any`) of the runs ended, at most 300 s; answers them."""
        return await agents.wait(session_id, body.ids, "any" if body.mode == "any" else "all")

    @api.get(RUNS + "/{run_id}")
    async def get_run(session_id: str, run_id: str) -> AgentRunSnapshot:
        return await agents.get(session_id, run_id)

    @api.post(RUNS + "/{run_id}/cancel", status_code=204)
    async def cancel_run(session_id: str, run_id: str) -> Response:
        """Cancel a queued or running run (and what its child started); 204 also when it had
        ended already."""
        await agents.cancel(session_id, run_id)
        return Response(status_code=204)

    @api.get("/sessions/{session_id}/agent-budget")
    async def agent_budget(session_id: str) -> Budget:
        """The token budget of the session's agent tree."""
        return await agents.budget(session_id)
