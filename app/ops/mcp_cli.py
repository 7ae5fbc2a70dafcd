"""The `foya mcp` command group: MCP servers of a running kernel, over its REST API, as Foya's
CLI has them: `list` (the servers' state, also without a command) and `apply FILE` (replace
the configuration with a JSON file of `PUT /mcp`'s shape); `show` (the configuration, secrets
redacted) is ours.

`app.cli` registers the group. Every command takes the client flags of `foya sessions`
(`--socket`, `--url`, `--token-file`, `--cacert`, `--data-dir`) and `--json` where it prints
data: plain text by default, the kernel's JSON as it came with `--json`. Errors as
`app.ops.commands` prints them (a refused configuration: its `code: message`, exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.ops.client_flags import Client, client_flags, fail

if TYPE_CHECKING:
    from app.ops.commands import Command, Console
    from app.ops.rest import Rest

CONTEXT = {"help_option_names": ["-h", "--help"]}
mcp_cli = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=CONTEXT)


def statuses() -> Command:
    """`GET /mcp/status` as a table (or JSON)."""

    def command(rest: Rest, con: Console) -> int:
        found = rest.call("GET", "/mcp/status")
        if con.as_json:
            con.data(found)
        elif not found:
            con.note("no MCP servers configured")
        else:
            rows = [("ID", "STATE", "TRANSPORT", "TOOLS", "RESTARTS", "ERROR")]
            rows += [
                (s["id"], s["state"], s["transport"], str(s["tool_count"]),
                 str(s.get("restarts", 0)), s.get("error") or "")
                for s in found
            ]  # fmt: skip
            con.table(rows)
        return 0

    return command


def show() -> Command:
    """`GET /mcp`: the configuration as JSON (secrets redacted by the kernel)."""

    def command(rest: Rest, con: Console) -> int:
        con.data(rest.call("GET", "/mcp"))
        return 0

    return command


def apply(config: Any) -> Command:
    """`PUT /mcp` with `config`."""

    def command(rest: Rest, con: Console) -> int:
        stored = rest.call("PUT", "/mcp", config)
        if con.as_json:
            con.data(stored)
        else:
            con.line(f"{len(stored['servers'])} MCP server(s) configured")
        return 0

    return command


@mcp_cli.callback(invoke_without_command=True)
def mcp(ctx: typer.Context) -> None:
    """MCP servers: list, apply, show. Without a command, `list`."""
    if ctx.invoked_subcommand is None:
        mcp_list()


@mcp_cli.command("list")
@client_flags()
def mcp_list(*, client: Client) -> None:
    """Each configured server's state, tools, restarts and last error."""
    client.run(statuses())


@mcp_cli.command("show")
@client_flags(json=False)
def mcp_show(*, client: Client) -> None:
    """The configuration as JSON; secrets show as `has_token` and `********`."""
    client.run(show())


@mcp_cli.command("apply")
@client_flags()
def mcp_apply(
    file: Annotated[Path, typer.Argument(metavar="FILE", hidden=True)],
    *,
    client: Client,
) -> None:
    """Replace the configuration with FILE (`{"servers": [...]}`, as `foya mcp show` prints it).

    Nothing changes unless all of it is valid. A secret left as `********` (or an empty
    `bearer_token`) keeps the one stored.
    """
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"{file}: cannot read a JSON configuration ({exc})")
    client.run(apply(config))
