"""A bare MCP server over stdio, JSON-RPC written by hand (no SDK), for what the SDK's own server
side never does: offer tools only.

    python bare.py [MODE] [--marker=…]

MODE `silent` (the default) advertises the `tools` capability alone; `unimplemented` also
advertises `resources` and `prompts` but answers their methods "Method not found" (-32601),
as servers that copy a capability block do. Tools: `alpha` and `beta` (they take nothing and
answer their name). Any other request is "Method not found". `--marker=…` is ignored (tests
find the process by it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

METHOD_NOT_FOUND = -32601
TOOLS = [
    {"name": name, "description": f"Answer {name}.", "inputSchema": {"type": "object"}}
    for name in ("alpha", "beta")
]


def answer(request: dict[str, Any], mode: str) -> dict[str, Any]:
    """The JSON-RPC response to `request`."""
    method = request.get("method")
    params = request.get("params") or {}
    result: dict[str, Any] | None = None
    if method == "initialize":
        capabilities: dict[str, Any] = {"tools": {}}
        if mode == "unimplemented":
            capabilities |= {"resources": {}, "prompts": {}}
        result = {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": capabilities,
            "serverInfo": {"name": "bare", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") in ("alpha", "beta"):
        result = {"content": [{"type": "text", "text": params["name"]}], "isError": False}
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    if result is None:
        reply["error"] = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
    else:
        reply["result"] = result
    return reply


def main() -> None:
    modes = [a for a in sys.argv[1:] if not a.startswith("--")]
    mode = modes[0] if modes else "silent"
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # a notification, or a response to us: nothing to answer
        sys.stdout.write(json.dumps(answer(request, mode)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
