"""The `foya` commands that talk to a kernel over its REST API (on the Unix socket or `--url`):
`status`, `exec`, `sessions`, `history`, `rewind`, `usage`.

`app.cli` registers them on the `foya` command (and `tunnel`, from app.ops.tunnel.cli). Like it,
this module imports only typer at the top: each command imports its client (app.ops.commands,
app.ops.client) when it runs. They share the client flags of app.ops.client_flags and the exit
codes of app.ops.rest.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from app.ops.client_flags import Client, client_flags, fail


@client_flags()
def status(*, client: Client) -> None:
    """Ask a kernel whether it is ready and print each check.

    GET /readyz; exit 0 ready, 1 not ready (or an error answer), 2 unreachable.
    """
    from app.ops import commands

    client.run(commands.status)


@client_flags(json=False)
def exec_(
    prompt: Annotated[str, typer.Argument(metavar="PROMPT", hidden=True)],
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="ID", help="Continue this session (default: a new one)."),
    ] = None,
    *,
    client: Client,
    approve_all: Annotated[
        bool, typer.Option("--approve-all", help="Approve every tool call without asking.")
    ] = False,
    show_reasoning: Annotated[
        bool, typer.Option("--show-reasoning", help="Print reasoning, dimmed, on stderr.")
    ] = False,
    connection: Annotated[
        str | None,
        typer.Option(
            "--connection",
            metavar="ID",
            help="Model connection of a new session (default: the default language model's).",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="NAME", help="Model of a new session.")
    ] = None,
    project_id: Annotated[
        str | None, typer.Option("--project-id", metavar="ID", help="Project of a new session.")
    ] = None,
) -> None:
    """Run one turn on a kernel and stream its reply.

    Sends PROMPT in a new session (or --session ID) and prints the reply as it streams. Exit 0
    completed, 1 failed (or an error answer), 2 unreachable, 130 cancelled (Ctrl-C).
    """
    from app.ops.client import ExecOptions, run_exec

    if not prompt.strip():
        fail("PROMPT: must not be empty")
    if session and (connection or model or project_id):
        fail("--connection, --model and --project-id set up a new session: not with --session")
    target = client.target()
    opts = ExecOptions(prompt, session, approve_all, show_reasoning, model, project_id, connection)
    raise typer.Exit(run_exec(target, opts, sys.stdout, sys.stderr, sys.stdin))


@client_flags()
def sessions(*, client: Client) -> None:
    """List the sessions, newest first."""
    from app.ops import commands

    client.run(commands.sessions)


@client_flags()
def history(
    session_id: Annotated[str, typer.Argument(metavar="SESSION_ID", hidden=True)],
    *,
    client: Client,
) -> None:
    """Print the messages of a session.

    Each message of SESSION_ID follows its [seq]: a user message's seq is what `foya rewind`
    takes.
    """
    from app.ops import commands

    client.run(commands.history(session_id))


@client_flags()
def rewind(
    session_id: Annotated[str, typer.Argument(metavar="SESSION_ID", hidden=True)],
    message_seq: Annotated[int, typer.Argument(metavar="MESSAGE_SEQ", hidden=True)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Confirm without asking.")] = False,
    *,
    client: Client,
) -> None:
    """Take a session back to before one of its messages.

    Previews the rewind of SESSION_ID to before its user message MESSAGE_SEQ (the [seq] that
    `foya history` shows): the message, and each file the agent changed since. Then confirms
    it, with --yes or at the prompt: history goes back and the files are restored (a file
    edited by hand since is merged, or left as it is).
    """
    from app.ops import commands

    command = commands.rewind(session_id, message_seq, yes=yes, stdin=sys.stdin)
    client.run(command)


@client_flags()
def usage(
    days: Annotated[
        int | None,
        typer.Option("--days", metavar="N", help="7 or 30 (the kernel's default: 30)."),
    ] = None,
    *,
    client: Client,
) -> None:
    """Print token usage over the last 7 or 30 days.

    Totals, activity and the tokens of each model.
    """
    from app.ops import commands

    client.run(commands.usage(days))
