"""A transport whose read stream tells when it ends (`watching`), so that a server which exits
or closes the connection is noticed at once, not at the next ping (`app.kernel.mcp.link`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from mcp.client import Transport


@contextlib.asynccontextmanager
async def watching(transport: Transport, on_end: Callable[[], None]) -> AsyncIterator[Any]:
    """`transport` with its read stream watched: `on_end` runs when the stream ends."""
    async with transport as (read, write):
        yield Watched(read, on_end), write


class Watched:
    """A transport's read stream that calls `on_end` when it ends (the server closed it, or
    exited): the supervisor then checks the server at once instead of at the next ping."""

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except anyio.EndOfStream:
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
