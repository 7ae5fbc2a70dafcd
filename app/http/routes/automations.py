"""Automations (Foya's `/automations`): prompts run as new sessions on a cron schedule.

Answers are Foya's `Task`; errors: app.kernel.automations.errors. `PATCH` is ours (Foya has
`PUT` only); the rules of runs, the scheduler and daylight saving time are in
app.kernel.automations.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.http.models.automations import AutomationBody
from app.kernel.api import AutomationWire, Kernel

AUTOMATION = "/automations/{automation_id}"


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["automations"])
    automations = kernel.automations

    @api.get("/automations")
    async def list_automations() -> list[AutomationWire]:
        """Enabled first, then by next due time, then the most recently changed."""
        return automations.all()

    @api.post("/automations", status_code=201)
    async def create_automation(body: AutomationBody) -> AutomationWire:
        """A new automation; send `enabled: true` to schedule it."""
        return await automations.create(body.input())

    @api.get(AUTOMATION)
    async def get_automation(automation_id: str) -> AutomationWire:
        return automations.get(automation_id)

    @api.put(AUTOMATION)
    async def replace_automation(automation_id: str, body: AutomationBody) -> AutomationWire:
        """Replace every setting (absent fields take their zero values)."""
        return await automations.replace(automation_id, body.input())

    @api.patch(AUTOMATION)
    async def update_automation(automation_id: str, body: AutomationBody) -> AutomationWire:
        """Change the settings sent, keep the others."""
        return await automations.update(automation_id, body.fields())

    @api.delete(AUTOMATION, status_code=204)
    async def delete_automation(automation_id: str) -> Response:
        """Remove it; a run going on is no longer followed (its session stays)."""
        await automations.delete(automation_id)
        return Response(status_code=204)

    @api.post(AUTOMATION + "/run", status_code=202)
    async def run_automation(automation_id: str) -> AutomationWire:
        """Start a run now (enabled or not); 409 `automation_running` while one is going."""
        return await automations.run_now(automation_id)

    return api
