"""The flags every command that talks to a kernel shares, and the one `Client` they make.

`--socket`, `--url`, `--token-file`, `--cacert`, `--data-dir` and `--json`: `client_flags` gives
them to a command (in app.ops.client_cli, context_cli, mcp_cli, transfer_cli, trust_cli and
websearch_cli) in place of its `client: Client` parameter. `fail` is the one way these commands
refuse a flag (one line on stderr, exit 2). Like app.cli, this module imports only typer at the
top: the REST client loads when a command runs.
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


def read_token(token_file: Path | None) -> str | None:
    """The bearer token from --token-file, else FOYA_TOKEN (never from a flag: ps shows flags)."""
    if token_file is None:
        return os.environ.get("FOYA_TOKEN") or None
    try:
        return token_file.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--token-file: cannot read {token_file} ({type(exc).__name__})")
