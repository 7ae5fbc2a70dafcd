"""Rules, memories and the memory switch: Markdown files under `~/.foya`
and `<project>/.foya`, served by `app.kernel.usercontext.UserContext`."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.context import (
    CreateMemory,
    CreateRule,
    MemorySettingsBody,
    UpdateMemory,
    UpdateRule,
)
from app.kernel.api import Kernel, Memory, MemorySettings, Rule


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["context"])
    context = kernel.user_context

    @api.get("/rules", response_model_exclude_none=True)
    async def list_rules(scope: str = "", project_id: str | None = None) -> list[Rule]:
        """The rules of one scope (`global`, or `project` with `project_id`)."""
        return await context.rules(scope, project_id)

    @api.post("/rules", status_code=201, response_model_exclude_none=True)
    async def create_rule(body: CreateRule) -> Rule:
        fields = body.given()
        return await context.create_rule(body.scope, body.project_id, fields)

    @api.patch("/rules/{rule_id}", response_model_exclude_none=True)
    async def update_rule(rule_id: str, body: UpdateRule) -> Rule:
        """Change the fields sent; every other field keeps its value."""
        return await context.update_rule(rule_id, body.given())

    @api.delete("/rules/{rule_id}", status_code=204)
    async def delete_rule(rule_id: str) -> Response:
        await context.delete_rule(rule_id)
        return Response(status_code=204)

    @api.get("/memories", response_model_exclude_none=True)
    async def list_memories(scope: str = "", project_id: str | None = None) -> list[Memory]:
        """The memory document of one scope (an empty list when there is none)."""
        return await context.memories(scope, project_id)

    @api.post("/memories", status_code=201, response_model_exclude_none=True)
    async def create_memory(body: CreateMemory) -> Memory:
        """Append a fact to the scope's memory document."""
        return await context.create_memory(body.scope, body.project_id, body.content)

    @api.patch("/memories/{memory_id}", response_model_exclude_none=True)
    async def update_memory(memory_id: str, body: UpdateMemory) -> Memory:
        """Replace the memory document's content."""
        return await context.update_memory(memory_id, body.content)

    @api.delete("/memories/{memory_id}", status_code=204)
    async def delete_memory(memory_id: str) -> Response:
        await context.delete_memory(memory_id)
        return Response(status_code=204)

    @api.get("/settings/memory")
    async def get_memory_settings() -> MemorySettings:
        return await context.memory_settings()

    @api.put("/settings/memory")
    async def put_memory_settings(body: MemorySettingsBody) -> MemorySettings:
        return await context.update_memory_settings(body.enabled)

    return api
