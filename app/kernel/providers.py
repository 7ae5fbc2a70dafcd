"""Which provider serves a session: its connection's base URL and key, one client per connection.

The provider module (and with it the `openai` SDK: ~0.3 s and ~15 MB) is imported when the first
client is built, not when the kernel is: a kernel that serves no turn never pays for it, and
`foya serve` listens sooner (bench/http.py's startup and idle-memory figures).
"""

from __future__ import annotations

import hashlib

from app.kernel.approvals import Ask
from app.kernel.connections import Connections
from app.kernel.sessionrow import SessionRow
from app.providers.base import ChatRequest, Provider, ProviderError


class Providers:
    """Provider clients, cached per connection and rebuilt when its URL or key changes.

    A replaced client may still be streaming a turn, so it is retired, not closed: every client
    is closed when the kernel shuts down (`close`). Connections are edited rarely; a retired
    client's idle connections expire on their own meanwhile.
    """

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self._cache: dict[str, tuple[str, Provider]] = {}
        self._retired: list[Provider] = []

    def for_connection(self, connection_id: str) -> Provider:
        connection = self.connections.get(connection_id)
        base_url, key = str(connection.get("base_url", "")), str(connection.get("api_key", ""))
        fingerprint = hashlib.sha256(f"{base_url}\0{key}".encode()).hexdigest()
        cached = self._cache.get(connection_id)
        if cached is None or cached[0] != fingerprint:
            from app.providers.openai import OpenAIProvider  # first use loads the SDK

            self.forget(connection_id)
            cached = (fingerprint, OpenAIProvider(base_url, key))
            self._cache[connection_id] = cached
        return cached[1]

    def for_session(self, row: SessionRow) -> Provider:
        connection_id = row.get("connection_id")
        if not connection_id or not self.connections.exists(connection_id):
            raise ProviderError(
                "auth", "the session has no model connection; add one with POST /connections"
            )
        return self.for_connection(connection_id)

    async def guardian(self, row: SessionRow, prompt: str, ask: Ask) -> bool:
        """The `auto` approval mode's judge; denies whenever it cannot get an answer."""
        question = (
            f"Tool: {ask.tool_name}\nAction: {ask.action}\nArguments: {ask.detail}\n"
            f"Resource: {ask.resource or '-'}\nOutside the working directory: {ask.outside}"
        )
        try:
            completion = await self.for_session(row).complete(
                ChatRequest(
                    model=row["model"],
                    messages=[
                        {"role": "system", "content": prompt},
                        {"role": "user", "content": question},
                    ],
                    max_tokens=5,
                )
            )
        except ProviderError:
            return False
        return completion.text.strip().upper().startswith("ALLOW")

    def forget(self, connection_id: str) -> None:
        cached = self._cache.pop(connection_id, None)
        if cached is not None:
            self._retired.append(cached[1])

    async def close(self) -> None:
        """Close every client, cached or retired (at shutdown, after the turns have ended)."""
        clients = [provider for _, provider in self._cache.values()] + self._retired
        self._cache, self._retired = {}, []
        for client in clients:
            await client.aclose()
