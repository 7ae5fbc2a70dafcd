"""Projects: directories sessions can work in."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import ValidationError

from app.http.models import CreateProject, Project, UpdateProject
from app.kernel import Kernel
from app.logs import get_logger
from app.text import scrub


def _servable(records: list[dict[str, Any]]) -> list[Project]:
    """Projects as served: `projects.json` may have been edited by hand, so a lone surrogate
    becomes U+FFFD and a record of the wrong shape is skipped with a log line, rather than one
    bad record failing the whole listing."""
    out = []
    for record in records:
        try:
            out.append(Project(**scrub(record)))
        except (ValidationError, TypeError):
            get_logger("foya.http").warning(
                "projects.json: skipped a malformed record", project_id=str(scrub(record.get("id")))
            )
    return out


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["projects"])
    projects = kernel.projects

    @api.get("/projects", response_model_exclude_none=True)
    async def list_projects() -> list[Project]:
        return _servable(projects.all())

    @api.post("/projects", status_code=201, response_model_exclude_none=True)
    async def create_project(body: CreateProject) -> Project:
        """Register a directory (default name "New project"; duplicate paths are allowed)."""
        return Project(**await projects.create(body.path, body.name))

    @api.patch("/projects/{project_id}", response_model_exclude_none=True)
    async def update_project(project_id: str, body: UpdateProject) -> Project:
        return Project(**await projects.update(project_id, body.name, body.pinned))

    @api.delete("/projects/{project_id}", status_code=204)
    async def delete_project(project_id: str) -> Response:
        """Delete the project and its sessions; never its directory."""
        await kernel.delete_project(project_id)
        return Response(status_code=204)

    return api
