"""What an automation's settings must be, and what a restart makes of a stored automation.

Settings are trimmed and get Foya's defaults (timezone `Local`, approval mode `auto`); name,
prompt and cron are required; approval modes are `auto` and `full_access` only, as in Foya
(nobody is there to approve a run's tool calls); a project or connection must exist (stricter
than Foya, which fails the run later).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from app.kernel.automations.errors import InvalidAutomation
from app.kernel.automations.schedule import LOCAL, Schedule, schedule_of
from app.kernel.automations.store import Automation, AutomationInput
from app.kernel.sessions import Sessions

APPROVAL_MODES = ("auto", "full_access")
INTERRUPTED = "interrupted: the kernel stopped during the run"


def validated(
    given: AutomationInput, failure: type[InvalidAutomation], sessions: Sessions
) -> tuple[AutomationInput, Schedule]:
    """`given` normalised, and its schedule; `failure` (the operation's `InvalidAutomation`)
    naming the first field that is wrong."""
    spec = AutomationInput(
        name=given.name.strip(),
        prompt=given.prompt.strip(),
        cron=given.cron.strip(),
        timezone=given.timezone.strip() or LOCAL,
        enabled=given.enabled,
        connection_id=given.connection_id.strip(),
        model=given.model.strip(),
        project_id=given.project_id.strip(),
        approval_mode=given.approval_mode.strip() or "auto",
    )
    try:
        if not spec.name:
            raise InvalidAutomation("name: required")
        if not spec.prompt:
            raise InvalidAutomation("prompt: required")
        schedule = schedule_of(spec.cron, spec.timezone)
        if spec.approval_mode not in APPROVAL_MODES:
            raise InvalidAutomation(
                "approval_mode: must be auto or full_access (nobody is there to approve)"
            )
        if spec.project_id and not sessions.projects.exists(spec.project_id):
            raise InvalidAutomation(f"project_id: project {spec.project_id} not found")
        if spec.connection_id and not sessions.connections.exists(spec.connection_id):
            raise InvalidAutomation(f"connection_id: connection {spec.connection_id} not found")
    except InvalidAutomation as exc:
        raise failure(exc.message) from None
    return spec, schedule


def restored(record: Automation, schedule: Schedule, now: dt.datetime) -> Automation:
    """`record` as the kernel starts at `now`: a run it was in the middle of is `failed`; an
    enabled automation keeps a due time that went by while the kernel was down (so it runs
    once, now), else gets its next one."""
    if record.last_status == "running":
        record = dataclasses.replace(record, last_status="failed", last_error=INTERRUPTED)
    if not record.spec.enabled:
        return dataclasses.replace(record, next_run_at=None)
    missed = record.next_run_at is not None and record.next_run_at <= now
    return dataclasses.replace(
        record, next_run_at=record.next_run_at if missed else schedule.next_after(now)
    )
