"""What the HTTP layer's request and response models share: body policies and bounds.

Every request body derives from `Strict` (unknown fields refused) or `Lenient` (ignored), as the
Go handler of its route decodes it (`app/bodies.py`); they are re-exported here for the HTTP
layer's models (one models module per routes module, named like it).

Every integer a client sends is bounded to SQLite's INTEGER range (`SqlInt`, `NonNegative`): a
larger one would raise OverflowError when bound to a statement, a 500 instead of a 400. String
fields whose values the kernel checks with its own error code (`invalid_approval_mode`, …) are
typed `str` but documented with their enum (`one_of`), so the OpenAPI schema says what is valid
while an invalid value still reaches the kernel and gets that code.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, WithJsonSchema

from app.bodies import Lenient as Lenient
from app.bodies import Strict as Strict

# SQLite INTEGER is a signed 64-bit integer. `lt=2**63` rather than `le=2**63 - 1`: FastAPI's
# OpenAPI models hold bounds as floats, and 2**63 survives that round trip exactly.
SQLITE_MIN = -(2**63)
SQLITE_END = 2**63
SqlInt = Annotated[int, Field(ge=SQLITE_MIN, lt=SQLITE_END)]
NonNegative = Annotated[int, Field(ge=0, lt=SQLITE_END)]
"""Event seqs, positions, token counts: 0 to 2**63 - 1."""


def one_of(*values: str) -> WithJsonSchema:
    """Document a `str` field as an enum without making pydantic enforce it."""
    return WithJsonSchema({"type": "string", "enum": list(values)})


ReasoningEffort = Annotated[str, one_of("", "low", "medium", "high")]
ApiKey = Annotated[str, Field(description="Write-only: reads say `has_api_key` instead.")]
