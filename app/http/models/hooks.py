"""The request body of `PUT /hooks` (the hooks themselves are
`app.kernel.hooks.Hook`, whose unknown fields are refused too).

`scope` is a plain string documented with its values: the kernel checks it and answers 400
`invalid_context_item`, as Foya does for every context scope.
"""

from __future__ import annotations

from app.http.models.common import Strict
from app.http.models.context import ContextScope
from app.kernel.api import Hook


class HooksBody(Strict):
    """A scope's whole hook list; it replaces the one stored."""

    scope: ContextScope
    project_id: str | None = None
    hooks: list[Hook]
