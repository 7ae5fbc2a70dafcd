"""Skills: SKILL.md packages under `~/.foya`, `~/.agents` and a
project's `.foya` and `.agents`, served by `app.kernel.usercontext.skills.Skills`.

A ref is one path segment (`global:review`, `project:<id>:review`); the routes take the rest of
the path so that a ref with a `/` in it (`%2F`) is refused with a 400 naming it, not a 404.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Response

from app.http.models.skills import SkillEnableRequest, SkillPinnedRequest
from app.kernel.api import Kernel, ScanResult, Skill

EVERY = Query(False, alias="all", description="Every scope's skills, not only the winners.")
INVOCABLE = Query(False, description="Only the enabled skills whose required tools exist.")


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["skills"])
    skills = kernel.skills

    @api.get("/skills", response_model_exclude_none=True)
    async def list_skills(every: bool = EVERY, invocable: bool = INVOCABLE) -> list[Skill]:
        """The global skills, one per name (`all=true`: every root's; `invocable=true`: only
        those a turn may use)."""
        return await skills.listing(every=every, invocable=invocable)

    @api.get("/skills/inspect", response_model_exclude_none=True)
    async def inspect_skills() -> ScanResult:
        """The global skills, and the SKILL.md files that could not be loaded, with why."""
        return await skills.inspect(None)

    @api.patch("/skills/{ref:path}/pinned", status_code=204)
    async def pin_skill(ref: str, body: SkillPinnedRequest) -> Response:
        await skills.set_pinned(ref, body.pinned)
        return Response(status_code=204)

    @api.patch("/skills/{ref:path}", status_code=204)
    async def enable_skill(ref: str, body: SkillEnableRequest) -> Response:
        await skills.set_enabled(ref, body.enabled)
        return Response(status_code=204)

    @api.get("/projects/{project_id}/skills", response_model_exclude_none=True)
    async def project_skills(project_id: str, every: bool = EVERY) -> list[Skill]:
        """The skills a turn in the project may use (`all=true`: every scope's, global too)."""
        return await skills.project_listing(project_id, every=every)

    @api.get("/projects/{project_id}/skills/inspect", response_model_exclude_none=True)
    async def inspect_project_skills(project_id: str) -> ScanResult:
        return await skills.inspect(project_id)

    return api
