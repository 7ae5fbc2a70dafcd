"""Request bodies of the terminal routes (reference §1 "Terminals"), as Foya's handlers decode
them: sizes are unsigned 16-bit (0 means 80 x 24 at start and "unchanged" on resize), and a start
may send no body at all. Unlike Foya, unknown fields are refused and `input` is required.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from app.http.models import Strict

Size = Annotated[int, Field(ge=0, le=65535)]


class StartTerminal(Strict):
    cols: Size = 0
    rows: Size = 0


class TerminalInput(Strict):
    input: str


class ResizeTerminal(Strict):
    cols: Size = 0
    rows: Size = 0
