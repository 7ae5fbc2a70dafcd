"""Errors of the automation routes, with Foya's statuses and codes:

- `InvalidAutomation` 400: a create's input is `automation_create_failed`, a `PUT`'s or
  `PATCH`'s `automation_update_failed` (Foya's one code per operation for every invalid field:
  name, prompt, cron, timezone, approval_mode, and here also project_id and connection_id)
- `AutomationNotFound` 404 `automation_not_found`
- `AutomationRunning` 409 `automation_running`: a run of the automation is still going
"""

from __future__ import annotations

from app.errors import BadRequest, Conflict, NotFound

CREATE_FAILED = "automation_create_failed"
UPDATE_FAILED = "automation_update_failed"


class InvalidAutomation(BadRequest):
    code = CREATE_FAILED


class AutomationNotFound(NotFound):
    code = "automation_not_found"


class AutomationRunning(Conflict):
    code = "automation_running"
