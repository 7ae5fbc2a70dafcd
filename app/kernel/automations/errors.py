"""Errors of the automation routes, with Foya's statuses and codes:

- `InvalidAutomation` 400 `automation_create_failed`, `InvalidAutomationUpdate` 400
  `automation_update_failed`: a create's, or a `PUT`'s or `PATCH`'s, invalid input (Foya's one
  code per operation for every invalid field: name, prompt, cron, timezone, approval_mode, and
  here also project_id and connection_id)
- `AutomationNotFound` 404 `automation_not_found`
- `AutomationRunning` 409 `automation_running`: a run of the automation is still going
"""

from __future__ import annotations

from app.errors import BadRequest, Conflict, NotFound


class InvalidAutomation(BadRequest):
    """A new automation's settings break a rule (the message names the field)."""

    code = "automation_create_failed"


class InvalidAutomationUpdate(InvalidAutomation):
    """A changed automation's settings break a rule (the message names the field)."""

    code = "automation_update_failed"


class AutomationNotFound(NotFound):
    """No automation of that id."""

    code = "automation_not_found"


class AutomationRunning(Conflict):
    """A run of the automation is still going."""

    code = "automation_running"
