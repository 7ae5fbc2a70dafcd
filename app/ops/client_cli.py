"""The `foya` commands that talk to a kernel: `status`, `exec`, `sessions`, `history`,
`rewind`, `usage` (over its REST API, on the Unix socket or `--url`) and `tunnel` (over ssh).

`app.cli` registers them on the `foya` command. Like it, this module imports only typer at the
top: each command imports its client (app.ops.rest and app.ops.commands, app.ops.client,
app.ops.tunnel) when it runs. They share the flags `--socket`, `--url`, `--token-file`,
`--cacert`, `--data-dir` and `--json`, and the exit codes of app.ops.rest: `client_flags` gives
them to a command (here and in app.ops.context_cli, mcp_cli, websearch_cli) as one `Client`.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from app.ops.commands import Command
    from app.ops.rest import Target

EXIT_CONFIG = 2
# What to do instead of `--url https://user:PASSWORD@host` (app.ops.secretargs).
URL_INSTEAD = "give the bearer token with --token-file FILE or FOYA_TOKEN; the URL holds none"


def env(text: str, variable: str) -> str:
    """Help text that names the flag's environment variable, as click shows its own extras."""
    return f"{text}  [env var: {variable}]"


DataDirOpt = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help=env("State directory.", "FOYA_DATA_DIR"),
        show_default=False,
    ),
]
SocketOpt = Annotated[
    str | None,
    typer.Option(
        "--socket",
        metavar="PATH",
        help=env(
            "The kernel's Unix socket (default: kernel.sock in the data dir).", "FOYA_SOCKET_PATH"
        ),
    ),
]
UrlOpt = Annotated[
    str | None,
    typer.Option("--url", metavar="URL", help="A kernel on TCP, e.g. https://host:8787."),
]
TokenFileOpt = Annotated[
    str | None,
    typer.Option(
        "--token-file",
        metavar="FILE",
        help="File holding the bearer token for --url (else the token in env var FOYA_TOKEN).",
    ),
]
CacertOpt = Annotated[
    str | None,
    typer.Option(
        "--cacert",
        metavar="FILE",
        help="PEM certificate to trust for an https --url (e.g. the kernel's cert.pem).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the kernel's JSON answer as it came.")]


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit non-zero."""
    typer.echo(f"foya: {message}", err=True)
    raise typer.Exit(EXIT_CONFIG)


@dataclass(frozen=True)
class Client:
    """The client flags a command was given: where its kernel is, and whether to print JSON."""

    socket: str | None = None
    url: str | None = None
    token_file: str | None = None
    cacert: str | None = None
    data_dir: str | None = None
    as_json: bool = False

    def target(self) -> Target:
        """Where the kernel is: --url, else the Unix socket (exit 2 on a bad flag)."""
        from app.ops.rest import Target, default_socket
        from app.ops.secretargs import check_url

        url, socket, cacert = self.url, self.socket, self.cacert
        check_url(url, "--url", URL_INSTEAD)
        if url is not None and socket is not None:
            fail("give either --socket or --url, not both")
        if url is None and (self.token_file is not None or cacert is not None):
            fail("--token-file and --cacert need --url")
        if url is not None and not url.startswith(("http://", "https://")):
            fail(f"--url: expected http(s)://host:port, got {url!r}")
        if cacert is not None and not Path(cacert).is_file():
            fail(f"--cacert: cannot read {cacert}")
        if url is None:
            home = None if self.data_dir is None else Path(self.data_dir)
            return Target(socket=Path(socket) if socket else default_socket(home))
        token = read_token(None if self.token_file is None else Path(self.token_file))
        return Target(
            url=url.rstrip("/"), token=token, cacert=None if cacert is None else Path(cacert)
        )

    def run(self, command: Command) -> NoReturn:
        """Run a thin REST client command and exit with its code."""
        from app.ops.commands import Console, run

        raise typer.Exit(run(self.target(), command, Console(sys.stdout, sys.stderr, self.as_json)))


_FLAGS = [
    inspect.Parameter(
        name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=kind
    )
    for name, kind, default in (
        ("socket", SocketOpt, None),
        ("url", UrlOpt, None),
        ("token_file", TokenFileOpt, None),
        ("cacert", CacertOpt, None),
        ("data_dir", DataDirOpt, None),
        ("as_json", JsonOpt, False),
    )
]


def client_flags(*, json: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the client flags (`--json` too unless `json=False`) in place of its
    `client: Client` parameter, at that place in its help; it gets them as one `Client`.

    Typer reads a command's flags from its signature, so the wrapper shows the flags' own
    parameters and folds them into the `Client` it passes on.
    """
    flags = _FLAGS if json else _FLAGS[:-1]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = list(inspect.signature(command, eval_str=True).parameters.values())
        at = [p.name for p in own].index("client")
        shown = inspect.Signature([*own[:at], *flags, *own[at + 1 :]], return_annotation=None)

        @functools.wraps(command)
        def wrapper(*args: object, **kwargs: object) -> None:
            bound = shown.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            client = Client(**{p.name: given.pop(p.name) for p in flags})
            command(**given, client=client)

        wrapper.__signature__ = shown  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in shown.parameters.values()}
        return wrapper

    return decorate


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


def read_token(token_file: Path | None) -> str | None:
    """The bearer token from --token-file, else FOYA_TOKEN (never from a flag: ps shows flags)."""
    if token_file is None:
        return os.environ.get("FOYA_TOKEN") or None
    try:
        return token_file.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--token-file: cannot read {token_file} ({type(exc).__name__})")


def tunnel(
    destination: Annotated[str, typer.Argument(metavar="DESTINATION", hidden=True)],
    stop: Annotated[
        bool,
        typer.Option(
            "--stop",
            help="Stop the kernel a tunnel started there (on --remote-port, in its data dir), "
            "then exit.",
        ),
    ] = False,
    remote_port: Annotated[
        int,
        typer.Option(
            "--remote-port", metavar="PORT", min=1, max=65535, help="The kernel's port there."
        ),
    ] = 8787,
    local_port: Annotated[
        int,
        typer.Option(
            "--local-port", metavar="PORT", min=0, max=65535, help="Local port (0: a free one)."
        ),
    ] = 0,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help="File holding the bearer token (else the token in env var FOYA_TOKEN).",
        ),
    ] = None,
    remote_foya: Annotated[
        str, typer.Option("--remote-foya", metavar="PATH", help="The foya command there.")
    ] = "foya",
    remote_data_dir: Annotated[
        str | None,
        typer.Option(
            "--remote-data-dir",
            metavar="DIR",
            help="Data dir there (default: its FOYA_DATA_DIR, else ~/.config/foya).",
        ),
    ] = None,
    remote_token_hash_file: Annotated[
        str,
        typer.Option(
            "--remote-token-hash-file",
            metavar="FILE",
            help="The token digest file on the remote host, for a kernel started there.",
        ),
    ] = "~/.config/foya/auth-token.sha256",  # noqa: S107 (a path)
    remote_log_file: Annotated[
        str | None,
        typer.Option(
            "--remote-log-file",
            metavar="FILE",
            help="Where a kernel started there logs (default: kernel.log in its data dir).",
        ),
    ] = None,
    ssh: Annotated[str, typer.Option("--ssh", metavar="PATH", help="The ssh client.")] = "ssh",
    ssh_option: Annotated[
        list[str] | None,
        typer.Option(
            "--ssh-option",
            "-o",
            metavar="OPTION",
            help="ssh option, e.g. -o Port=2222 (repeatable).",
        ),
    ] = None,
    ready_timeout: Annotated[
        float,
        typer.Option(
            "--ready-timeout", metavar="SECONDS", min=1.0, help="How long to wait for /readyz."
        ),
    ] = 30.0,
) -> None:
    """Reach a kernel on another machine through ssh.

    DESTINATION is what ssh takes (user@host, or a Host alias). Starts the kernel there unless
    one listens on --remote-port, forwards a local port to it (ssh -L), reconnects when the
    tunnel drops, and prints `ready: URL` each time it is up. With --stop, stops the kernel
    a tunnel started there instead.
    """
    from app.ops.secretargs import check_url
    from app.ops.tunnel.config import TunnelConfig
    from app.ops.tunnel.local import run as run_tunnel
    from app.ops.tunnel.local import stop_remote

    check_url(destination, "DESTINATION", "ssh authenticates with a key or its agent")
    secret = read_token(token_file)
    if secret is None and not stop:
        fail("give the bearer token with --token-file or FOYA_TOKEN")
    config = TunnelConfig(
        destination=destination,
        token=secret or "",
        remote_port=remote_port,
        local_port=local_port,
        remote_foya=remote_foya,
        remote_data_dir=remote_data_dir,
        remote_token_hash_file=remote_token_hash_file,
        remote_log_file=remote_log_file,
        ssh=ssh,
        ssh_options=tuple(a for o in ssh_option or () for a in ("-o", o)),
        ready_timeout=ready_timeout,
    )
    if stop:
        raise typer.Exit(stop_remote(config, on_done=typer.echo))
    raise typer.Exit(run_tunnel(config, on_ready=lambda url: typer.echo(f"ready: {url}")))
