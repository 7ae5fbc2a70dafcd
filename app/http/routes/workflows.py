"""Plan workflows: a session's open workflow, approving its plan,
closing it. Answers are workflow records (`app.kernel.workflows.Workflow`); errors are listed in
`app.kernel.workflows.service`. Plan mode starts with the builtin `plan` command."""

from __future__ import annotations

from fastapi import APIRouter

from app.kernel.api import Kernel, Workflow, WorkflowApproval

WORKFLOW = "/sessions/{session_id}/workflow"


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["workflows"])
    workflows = kernel.workflows

    @api.get(WORKFLOW, response_model_exclude_none=True)
    async def get_workflow(session_id: str) -> Workflow | None:
        """The session's open workflow (planning, or its plan ready for approval); `null` when
        there is none."""
        return await workflows.current(session_id)

    @api.post(WORKFLOW + "/{workflow_id}/approve", response_model_exclude_none=True)
    async def approve_workflow(session_id: str, workflow_id: str) -> WorkflowApproval:
        """Approve a `ready` plan: the session leaves plan mode and a turn that carries out the
        plan is submitted (started, or queued behind a running one)."""
        return await workflows.approve(session_id, workflow_id)

    @api.delete(WORKFLOW + "/{workflow_id}", response_model_exclude_none=True)
    async def close_workflow(session_id: str, workflow_id: str) -> Workflow:
        """Abandon an open workflow: the session's turn is stopped and it leaves plan mode.
        Answers the closed workflow."""
        return await workflows.close(session_id, workflow_id)

    return api
