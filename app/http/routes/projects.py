"""Projects: directories sessions can work in."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.projects import CreateProject, TrustBody, UpdateProject
from app.kernel.api import Kernel, ProjectInfo, TrustInfo


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["projects"])
    projects = kernel.projects

    @api.get("/projects", response_model_exclude_none=True)
    async def list_projects() -> list[ProjectInfo]:
        """Pinned first, then by creation time; `available` says whether the directory is
        there now."""
        return projects.listing()

    @api.post("/projects", status_code=201, response_model_exclude_none=True)
    async def create_project(body: CreateProject) -> ProjectInfo:
        """Register a directory (default name "New project"; duplicate paths are allowed)."""
        return await projects.create(body.path, body.name)

    @api.patch("/projects/{project_id}", response_model_exclude_none=True)
    async def update_project(project_id: str, body: UpdateProject) -> ProjectInfo:
        return await projects.update(project_id, body.name, body.pinned)

    @api.delete("/projects/{project_id}", status_code=204)
    async def delete_project(project_id: str) -> Response:
        """Delete the project and its sessions; never its directory."""
        await kernel.delete_project(project_id)
        return Response(status_code=204)

    @api.get("/projects/{project_id}/trust")
    async def get_project_trust(project_id: str) -> TrustInfo:
        """Whether the project's own executable configuration (its hooks) may run, its digest,
        and every command it would run with its file."""
        return kernel.trust.info(project_id)

    @api.put("/projects/{project_id}/trust")
    async def trust_project(project_id: str, body: TrustBody | None = None) -> TrustInfo:
        """Trust the project's executable files as they are now (a later change asks again);
        with `digest`, 409 `trust_digest_changed` unless they still have it."""
        return await kernel.trust.trust(project_id, body.digest if body else None)

    @api.delete("/projects/{project_id}/trust")
    async def untrust_project(project_id: str) -> TrustInfo:
        """Withdraw trust: nothing of the project runs until it is trusted again."""
        return await kernel.trust.untrust(project_id)

    return api
