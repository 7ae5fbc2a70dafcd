"""Hooks: one scope's configuration, `~/.foya/hooks.json` or
`<project>/.foya/hooks.json`, read and replaced whole (`app.kernel.hooks`)."""

from __future__ import annotations

from fastapi import APIRouter

from app.http.models.hooks import HooksBody
from app.kernel.api import Hook, Kernel


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["hooks"])
    hooks = kernel.hooks

    @api.get("/hooks", response_model_exclude_defaults=True)
    async def get_hooks(scope: str = "", project_id: str | None = None) -> list[Hook]:
        """The hooks of one scope (`global`, or `project` with `project_id`); an empty list
        when it has none."""
        return await hooks.read(scope, project_id)

    @api.put("/hooks", response_model_exclude_defaults=True)
    async def put_hooks(body: HooksBody) -> list[Hook]:
        """Replace the scope's hooks; answers them as stored (strings trimmed). Nothing
        changes unless every hook is valid."""
        return await hooks.replace(body.scope, body.project_id, body.hooks)

    return api
