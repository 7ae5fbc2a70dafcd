"""The two base models of a JSON request body, one per unknown-field policy.

Foya's Go handlers decode some bodies with `DisallowUnknownFields` and the rest without, and
its desktop client relies on the difference: it echoes read-only fields (`id`, `has_api_key`,
`models_cached`, …) back to routes that ignore them. Every body model derives from exactly one
of these, chosen from the Go handler of its route:

- `Strict`: an unknown field is a 400 `bad_request` (the handler calls `DisallowUnknownFields`).
- `Lenient`: an unknown field is dropped (the handler does not). A known field of the wrong JSON
  type is still a 400.

The models nested in a body follow the body's policy, as Go's flag covers the whole decode
(`tests/test_body_policy.py` checks both rules for every route). Each body's JSON schema
carries its policy under `x-unknown-fields`, read from the model's config, so the OpenAPI
document, and `docs/api.md` made from it by `tools/apidoc.py`, state the policy of every body
from this one source.

A leaf: the kernel's own wire models (turn input, canvas, MCP configuration) derive from these
as well as the HTTP layer's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

Policy = Literal["refused", "ignored"]
SCHEMA_KEY = "x-unknown-fields"
"""The JSON-schema key that carries a body model's policy."""


_POLICIES: dict[str, Policy] = {"forbid": "refused", "ignore": "ignored"}


class _Body(BaseModel):
    def given(self) -> dict[str, Any]:
        """Only the fields the client sent (unknown ones are never among them)."""
        return self.model_dump(exclude_unset=True)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # From the config itself (not `json_schema_extra`, which a model's examples replace).
        schema = handler(core_schema)
        policy = _POLICIES.get(str(cls.model_config.get("extra")))
        if policy is not None:
            handler.resolve_ref_schema(schema)[SCHEMA_KEY] = policy
        return schema


class Strict(_Body):
    """A request body whose unknown fields are a 400 `bad_request`."""

    model_config = ConfigDict(extra="forbid")


class Lenient(_Body):
    """A request body whose unknown fields are dropped, as Go's decoder drops them."""

    model_config = ConfigDict(extra="ignore")


def policy_of(model: type[BaseModel]) -> Policy | None:
    """`model`'s policy, or None if it derives from neither base."""
    strict, lenient = issubclass(model, Strict), issubclass(model, Lenient)
    if strict == lenient:
        return None
    return "refused" if strict else "ignored"
