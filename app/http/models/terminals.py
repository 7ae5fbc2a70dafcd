"""Request bodies of the terminal routes, as Foya's handlers decode
them: sizes are unsigned 16-bit (0 means 80 x 24 at start and "unchanged" on resize), and a start
may send no body at all. Unknown fields are ignored, as Foya's handlers do; unlike Foya, `input`
is required.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from app.http.models.common import Lenient

Size = Annotated[int, Field(ge=0, le=65535)]


class StartTerminal(Lenient):
    cols: Size = 0
    rows: Size = 0


class TerminalInput(Lenient):
    input: str


class ResizeTerminal(Lenient):
    cols: Size = 0
    rows: Size = 0
