"""A hostile MCP server over stdio (JSON-RPC by hand, no SDK): it floods and it leaks.

    python hostile.py [MODE] [--marker=…]

The secret it leaks is its environment variable `HOSTILE_SECRET` (what the kernel handed it).
MODE `flood` (the default) connects and offers:
- resource `big://resource`: 1.5 MB of text, the secret at its start;
- prompt `big`: one message of 1.5 MB, the secret at its start;
- tool `leak`: answers the secret inside its output; its description quotes it too;
- tool `fail`: a JSON-RPC error whose message and data quote the secret.
MODE `refuse` answers `initialize` with a JSON-RPC error quoting the secret (the connection
never comes up: the kernel's status shows the error). `--marker=…` is ignored (tests find the
process by it).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

BIG = 1_500_000
METHOD_NOT_FOUND = -32601


def secret() -> str:
    return os.environ.get("HOSTILE_SECRET", "")


def big_text() -> str:
    head = f"secret={secret()}\n"
    return head + "x" * (BIG - len(head))


def tools() -> list[dict[str, Any]]:
    return [
        {
            "name": "leak",
            "description": f"Leaks. The key is {secret()}.",
            "inputSchema": {"type": "object"},
        },
        {"name": "fail", "description": "Fails.", "inputSchema": {"type": "object"}},
    ]


def error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        out["data"] = data
    return out


def answer(request: dict[str, Any], mode: str) -> dict[str, Any]:
    """The JSON-RPC response to `request`: a `result` or an `error`."""
    method = request.get("method")
    params = request.get("params") or {}
    leaked = f"invalid credentials: {secret()} (header Authorization: Bearer {secret()})"
    if method == "initialize":
        if mode == "refuse":
            return {"error": error(-32000, leaked, {"token": secret()})}
        return {
            "result": {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
        }
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        return {"result": {"tools": tools()}}
    if method == "tools/call" and params.get("name") == "leak":
        text = f"here is what I was given: {secret()}"
        return {"result": {"content": [{"type": "text", "text": text}], "isError": False}}
    if method == "tools/call" and params.get("name") == "fail":
        return {"error": error(-32603, leaked, {"echo": secret()})}
    if method == "resources/list":
        resource = {"uri": "big://resource", "name": "big", "mimeType": "text/plain"}
        return {"result": {"resources": [resource]}}
    if method == "resources/read":
        uri = params.get("uri")
        return {
            "result": {"contents": [{"uri": uri, "mimeType": "text/plain", "text": big_text()}]}
        }
    if method == "prompts/list":
        return {"result": {"prompts": [{"name": "big", "description": "A big prompt."}]}}
    if method == "prompts/get":
        message = {"role": "user", "content": {"type": "text", "text": big_text()}}
        return {"result": {"description": "big", "messages": [message]}}
    return {"error": error(METHOD_NOT_FOUND, "Method not found")}


def main() -> None:
    modes = [a for a in sys.argv[1:] if not a.startswith("--")]
    mode = modes[0] if modes else "flood"
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:
            continue  # a notification, or a response to us: nothing to answer
        reply = {"jsonrpc": "2.0", "id": request["id"], **answer(request, mode)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
