"""Request bodies of the command routes, as Foya's handlers decode them.

`scope` is a plain string documented with its values: the kernel checks it and answers 400
`bad_request`, as Foya does. `PATCH /commands/{ref}` is not a partial update: name, description
and body are all replaced (a description not sent is cleared), as in Foya.
"""

from __future__ import annotations

from typing import Annotated

from app.http.models.common import Strict, one_of

CommandScope = Annotated[str, one_of("global", "project")]


class CreateCommand(Strict):
    scope: CommandScope
    project_id: str | None = None
    name: str
    body: str | None = None


class UpdateCommand(Strict):
    scope: CommandScope
    project_id: str | None = None
    name: str
    description: str | None = None
    body: str


class RunCommand(Strict):
    """The body may be left out altogether. `workspace_files` as on a turn."""

    args: str | None = None
    workspace_files: list[str] | None = None
