"""Masking a server's secrets, by value, in everything that leaves the MCP capability.

A server can be handed a secret (an env value, a credential header, the bearer token; which
values are secrets is `config.is_secret_header` and the rule that every env value is one) and
then say it back: in a JSON-RPC error, a tool's output, a resource, a prompt, a tool's
description. A value configured as `$NAME`/`${NAME}` reaches the server expanded from the
kernel's environment (`expand`), so both the configured and the expanded spelling are secrets,
and so is each one's JSON-escaped spelling (an error may quote a JSON body).

`Redactor.for_server` builds the mask from a server's configuration; `link.Link` applies it to
every error text, status, log line and call result before anything else in the kernel sees
it (one place, so events, the model's tool results, routes and the log all get masked text).

Values shorter than `MIN_SECRET` characters are not masked: env values such as `1`, `true`,
`prod` or `info` are settings rather than secrets, and masking them would replace every
`true` of a tool's JSON output. A secret that short could be guessed anyway.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from app.kernel.mcp.config import ServerConfig, is_secret_header

MIN_SECRET = 6
MASK = "[redacted]"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
Model = TypeVar("Model", bound=BaseModel)


def expand(value: str) -> str:
    """`$NAME` and `${NAME}` replaced by the kernel's environment (unset: empty), as Foya."""
    return _VAR.sub(lambda m: os.environ.get(m.group(1) or m.group(2), ""), value)


def configured_secrets(server: ServerConfig) -> list[str]:
    """Every secret value of `server` as configured (before expansion)."""
    values = [server.bearer_token, *server.env.values()]
    values += [v for k, v in server.headers.items() if is_secret_header(k)]
    return [v for v in values if v]


class Redactor:
    """Replaces each of some secret values with `MASK` in text and in JSON-like values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        spellings: set[str] = set()
        for secret in secrets:
            spellings |= {secret, json.dumps(secret, ensure_ascii=False)[1:-1]}
            spellings.add(json.dumps(secret)[1:-1])
        kept = sorted((s for s in spellings if len(s) >= MIN_SECRET), key=len, reverse=True)
        # Longest first: a secret that contains another one is masked whole.
        self._pattern = re.compile("|".join(map(re.escape, kept))) if kept else None

    @classmethod
    def for_server(cls, server: ServerConfig) -> Redactor:
        """The secrets of `server`, configured and expanded."""
        configured = configured_secrets(server)
        return cls([*configured, *(expand(v) for v in configured)])

    def text(self, text: str) -> str:
        """`text` with every secret masked."""
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

    def value(self, value: Any) -> Any:
        """`value` (strings, lists, tuples and dicts, keys included) with every secret masked."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        if isinstance(value, BaseModel):
            return self.model(value)
        return value

    def model(self, model: Model) -> Model:
        """`model` itself when it holds no secret, else a copy with each one masked."""
        if self._pattern is None:
            return model
        dumped = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        masked = self.value(dumped)
        return model if masked == dumped else type(model).model_validate(masked)
