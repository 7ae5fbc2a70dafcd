"""One configured MCP server, kept connected: the official SDK's `Client` over stdio, streamable
HTTP or SSE, supervised.

`Link.start` runs `_supervise` as a task of its own and returns at once (the kernel does not
wait for servers). The supervisor connects (bounded by the connect timeout), lists the
server's tools, resources and prompts, and then checks it: a ping every `ping_interval`, at
once when a call saw the connection break or time out, and at once when the transport's
stream ends (`watch`: a stdio server that exits, however it dies, closes its stdout). A
server that exits, breaks the connection or leaves a ping unanswered is closed (the SDK ends a
stdio server's whole process group), shown `disconnected` (`error` when it never connected),
and connected again after a backoff that doubles from `BACKOFF_FIRST` to `BACKOFF_MAX`;
`status()` shows the error, the restarts and when the next try is due. A call is bounded by the
call timeout whatever the server does. A server that offers no resources or prompts (no
capability, or "Method not found") lists none.

Everything runs under anyio cancel scopes, never a bare `Task.cancel()`: the SDK shuts a stdio
server down in a shielded scope that a native cancellation could cut short (leaking the
process). A stdio server's stderr goes nowhere: it is not ours to log, and may hold secrets.

Whatever the server says passes `redact.Redactor` here, before the rest of the kernel sees it:
every call result (tools, resources, prompts), its tools' descriptions, and every error text
(status, log line, the message a route or the model gets) has the server's secrets masked. A
plugin's server over HTTP gets the address guard (`netguard`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, MCPDeprecationWarning, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from app.events import iso_time
from app.kernel.mcp.common import NotConnected, Timeouts
from app.kernel.mcp.config import ServerConfig
from app.kernel.mcp.listing import Listing
from app.kernel.mcp.listing import listing as list_all
from app.kernel.mcp.netguard import GuardedTransport
from app.kernel.mcp.redact import Redactor, expand
from app.kernel.mcp.watch import watching
from app.kernel.web.guard import AllowList
from app.logs import get_logger

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # connected this long, a later failure starts the backoff over

State = Literal["disabled", "disconnected", "connecting", "connected", "error"]


class Link:
    """A supervised connection to one server; `on_change` runs when its tools change.

    `guard`, when given, is the address rule its HTTP requests must pass (`netguard`)."""

    def __init__(
        self,
        config: ServerConfig,
        timeouts: Timeouts,
        on_change: Callable[[], None],
        guard: AllowList | None = None,
    ) -> None:
        self.config = config
        self.guard = guard
        self.redact = Redactor.for_server(config)
        self.timeouts = timeouts
        self.on_change = on_change
        self.state: State = "connecting"
        self.error = ""
        self.restarts = 0
        self.retry_at: str | None = None
        self.listing = Listing()
        self._client: Client | None = None
        self._check = anyio.Event()
        self._scope = anyio.CancelScope()
        self._task: asyncio.Task[None] | None = None
        self._log = get_logger("foya.mcp").bind(server=config.id)

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.config.id}")

    async def stop(self) -> None:
        """Close the connection (a stdio server's processes end with it) and stop retrying."""
        self._scope.cancel()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def status(self) -> dict[str, Any]:
        """Foya's status fields, plus `restarts` and `retry_at` (ours)."""
        out: dict[str, Any] = {
            "id": self.config.id,
            "name": self.config.name,
            "state": self.state,
            "transport": self.config.transport,
            "tool_count": len(self.listing.tools),
            "tools": [tool.name for tool in self.listing.tools],
            "resource_count": self.listing.resources,
            "prompt_count": self.listing.prompts,
            "restarts": self.restarts,
        }
        if self.error:
            out["error"] = self.error
        if self.retry_at:
            out["retry_at"] = self.retry_at
        return out

    def client(self) -> Client:
        if self._client is None or self.state != "connected":
            raise NotConnected(f"MCP server {self.config.id!r} is not connected")
        return self._client

    async def call(self, work: Callable[[Client], Any]) -> Any:
        """Run `work(client)` within the call timeout; a broken connection or a timeout makes
        the supervisor check the server at once."""
        client = self.client()
        try:
            with anyio.fail_after(self.timeouts.call):
                return self.redact.value(await work(client))
        except TimeoutError:
            self._check.set()
            raise TimeoutError(
                f"MCP server {self.config.id!r} did not answer within {self.timeouts.call:g}s"
            ) from None
        except Exception as exc:
            self._check.set()
            raise RuntimeError(self.scrub(str(exc) or type(exc).__name__)) from None

    def scrub(self, text: str) -> str:
        """`text` with this server's secrets masked (errors may quote a URL, a header, or
        whatever the server put in a JSON-RPC error)."""
        return self.redact.text(text)

    async def _supervise(self) -> None:
        failures = 0
        with self._scope:
            while True:
                self.state, self.retry_at = "connecting", None
                began = time.monotonic()
                try:
                    await self._session()
                except Exception as exc:  # every way a server can fail: retried, reported
                    self.error = self.scrub(_describe(exc))
                if time.monotonic() - began > STABLE_AFTER:
                    failures = 0
                failures += 1
                lost = self._client is not None  # it was up: lost, rather than failing to start
                self._down()
                delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (failures - 1))
                self.state = "disconnected" if lost else "error"
                self.retry_at = iso_time(time.time_ns() + int(delay * 1e9))
                self._log.warning("MCP server failed; retrying", error=self.error, delay=delay)
                await anyio.sleep(delay)
                self.restarts += 1

    async def _session(self) -> None:
        """Connect, list, then watch until the server fails (this only returns by raising)."""
        deadline = anyio.current_time() + self.timeouts.connect
        with anyio.CancelScope(deadline=deadline) as connecting:
            async with self._connected() as client:
                listing = await list_all(client)
                listing.tools = [self.redact.model(tool) for tool in listing.tools]
                connecting.deadline = math.inf  # connected: from now on each ping is bounded
                self._client, self.listing = client, listing
                self.state, self.error = "connected", ""
                self.on_change()
                self._log.info("MCP server connected", tools=len(listing.tools))
                while True:
                    with anyio.move_on_after(self.timeouts.ping_interval):
                        await self._check.wait()
                    self._check = anyio.Event()
                    with anyio.fail_after(self.timeouts.connect):
                        await _ping(client)
        raise TimeoutError  # the connect deadline passed

    def _down(self) -> None:
        had_tools = bool(self.listing.tools)
        self._client, self.listing = None, Listing()
        if had_tools:
            self.on_change()

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        config = self.config
        async with contextlib.AsyncExitStack() as stack:
            if config.transport == "stdio":
                devnull = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115, ASYNC230
                params = StdioServerParameters(
                    command=config.command,
                    args=config.args,
                    env={k: expand(v) for k, v in config.env.items()},
                    cwd=config.cwd or None,
                )
                transport: Any = stdio_client(params, errlog=devnull)
            else:
                headers = {k: expand(v) for k, v in config.headers.items()}
                if config.bearer_token:
                    headers["Authorization"] = f"Bearer {config.bearer_token}"
                if config.transport == "sse":
                    transport = sse_client(
                        config.url, headers=headers, httpx_client_factory=self._http_client
                    )
                else:
                    http = await stack.enter_async_context(self._http_client(headers=headers))
                    transport = streamable_http_client(config.url, http_client=http)
            client = Client(watching(transport, self._check_now), mode="legacy", cache=None)
            yield await stack.enter_async_context(client)

    def _http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        """The HTTP client for this server (the SDK's factory signature): guarded if it must be."""
        transport = GuardedTransport(self.guard) if self.guard is not None else None
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(30, read=300),
            auth=auth,
            transport=transport,
        )

    def _check_now(self) -> None:
        self._check.set()


async def _ping(client: Client) -> None:
    with warnings.catch_warnings():
        # Handshake-era servers (the mode we connect in) all answer ping.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.send_ping()


def _describe(exc: BaseException) -> str:
    """A one-line reason: the first leaf of an exception group, else the exception."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "the server did not answer in time"
    text = str(exc) or type(exc).__name__
    if "Connection closed" in text:
        return "the server closed the connection (it may have exited)"
    return text
