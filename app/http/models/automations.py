"""Request bodies of the automation routes (Foya's `automation.Input`).

`POST /automations` and `PUT /automations/{id}` take the whole input: an absent field (or
`null`) is its zero value, as Foya's decoder leaves it (`enabled` false, `approval_mode` `auto`,
`timezone` `Local`). `PATCH` (beyond Foya) changes only the fields it sends. Unknown fields are
400 `bad_request`, as in Foya; the values are checked by the kernel (400
`automation_create_failed` / `automation_update_failed`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from app.http.models.common import Strict, one_of
from app.kernel.api import AutomationInput

ApprovalMode = Annotated[str | None, one_of("auto", "full_access")]


class AutomationBody(Strict):
    name: str | None = None
    prompt: str | None = None
    cron: str | None = Field(None, description="Five cron fields, or a descriptor such as @daily.")
    timezone: str | None = Field(None, description="An IANA time zone, or Local (the default).")
    enabled: bool | None = None
    connection_id: str | None = None
    model: str | None = None
    project_id: str | None = None
    approval_mode: ApprovalMode = None

    def fields(self) -> dict[str, Any]:
        """The fields sent with a value."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def input(self) -> AutomationInput:
        """The whole input, absent fields as zero values."""
        return AutomationInput(**self.fields())
