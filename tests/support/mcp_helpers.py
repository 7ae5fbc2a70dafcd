"""The test MCP server (tests/support/mcp_servers/server.py) served over streamable HTTP, for the
tests that need a real MCP server on the network (tests/test_mcp.py, tests/test_mcp_hostile.py)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from support.fake_provider import BOUND
from support.helpers import free_port, wait_until

SERVER = Path(__file__).parent / "mcp_servers" / "server.py"


@contextlib.contextmanager
def http_mcp_server() -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1, answering; its URL. Stopped after."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"

        def up() -> bool:
            try:
                httpx.get(url, timeout=1)
            except httpx.HTTPError:
                return False
            return True

        wait_until(up, "the HTTP MCP server", BOUND)
        yield url
    finally:
        proc.terminate()
        proc.wait(BOUND)
