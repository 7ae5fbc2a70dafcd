"""An MCP server for the tests and the benchmark, written with the official SDK's server side.

    python server.py stdio [MODE]          over stdin/stdout
    python server.py http PORT [MODE]      streamable HTTP on 127.0.0.1:PORT/mcp

MODE is `normal` (the default), `crash` (exits at once, before answering anything) or `hang`
(never answers the handshake). Tools: `echo(text)`, `add(a, b)`, `env_sha256(name)` (the
SHA-256 of an environment variable, so a test sees what the server got without the value
itself), `header_sha256(name)` (over HTTP: the same for a request header of the call),
`sleep(seconds)` (only this call waits), `freeze()` (blocks the whole server: pings go unanswered
too) and `crash()` (the process exits). Resource `note://readme`, prompt `greet(name)`.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer

README = "This is the readme of the test server."

server = MCPServer("foya-test", instructions="A server for Foya's tests.")


@server.tool(description="Echo the text back. Useful to test calls.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="SHA-256 of an environment variable of the server (or 'unset').")
def env_sha256(name: str) -> str:
    value = os.environ.get(name)
    return "unset" if value is None else hashlib.sha256(value.encode()).hexdigest()


@server.tool(description="SHA-256 of a header of this HTTP request (or 'unset').")
def header_sha256(name: str, ctx: Context) -> str:
    request = getattr(ctx.request_context, "request", None)
    value = request.headers.get(name) if request is not None else None
    return "unset" if value is None else hashlib.sha256(value.encode()).hexdigest()


@server.tool(description="Wait this many seconds, then answer.")
async def sleep(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "slept"


@server.tool(description="Block the whole server (it answers nothing any more).")
async def freeze() -> str:
    time.sleep(3600)  # on purpose: blocks the event loop, so pings go unanswered too
    return "thawed"


@server.tool(description="Exit the server process at once.")
def crash() -> str:
    os._exit(3)


@server.resource("note://readme", name="readme", description="The readme.", mime_type="text/plain")
def readme() -> str:
    return README


@server.prompt(description="Greet someone.")
def greet(name: str) -> str:
    return f"Please greet {name} warmly."


def main() -> None:
    transport = sys.argv[1]
    mode = sys.argv[-1] if sys.argv[-1] in ("normal", "crash", "hang") else "normal"
    if mode == "crash":
        sys.exit(4)
    if mode == "hang":
        time.sleep(3600)
    if transport == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
