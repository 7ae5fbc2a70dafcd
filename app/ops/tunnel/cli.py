"""`foya tunnel`: the Typer definition of the command (app.cli registers it).

Like app.cli, this module imports only typer (and the light client flags) at the top: the
supervisor (app.ops.tunnel.local, which loads httpx) is imported when the command runs, so
`foya --help` stays quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.ops.client_flags import fail, read_token

DestinationArg = Annotated[str, typer.Argument(metavar="DESTINATION", hidden=True)]
StopOpt = Annotated[
    bool,
    typer.Option(
        "--stop",
        help="Stop the kernel a tunnel started there (on --remote-port, in its data dir), "
        "then exit.",
    ),
]
RemotePortOpt = Annotated[
    int,
    typer.Option(
        "--remote-port", metavar="PORT", min=1, max=65535, help="The kernel's port there."
    ),
]
LocalPortOpt = Annotated[
    int,
    typer.Option(
        "--local-port", metavar="PORT", min=0, max=65535, help="Local port (0: a free one)."
    ),
]
TokenFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        metavar="FILE",
        help="File holding the bearer token (else the token in env var FOYA_TOKEN).",
    ),
]
RemoteFoyaOpt = Annotated[
    str, typer.Option("--remote-foya", metavar="PATH", help="The foya command there.")
]
RemoteDataDirOpt = Annotated[
    str | None,
    typer.Option(
        "--remote-data-dir",
        metavar="DIR",
        help="Data dir there (default: its FOYA_DATA_DIR, else ~/.config/foya).",
    ),
]
RemoteTokenHashFileOpt = Annotated[
    str,
    typer.Option(
        "--remote-token-hash-file",
        metavar="FILE",
        help="The token digest file on the remote host, for a kernel started there.",
    ),
]
RemoteLogFileOpt = Annotated[
    str | None,
    typer.Option(
        "--remote-log-file",
        metavar="FILE",
        help="Where a kernel started there logs (default: kernel.log in its data dir).",
    ),
]
SshOpt = Annotated[str, typer.Option("--ssh", metavar="PATH", help="The ssh client.")]
SshOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ssh-option",
        "-o",
        metavar="OPTION",
        help="ssh option, e.g. -o Port=2222 (repeatable).",
    ),
]
ReadyTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--ready-timeout", metavar="SECONDS", min=1.0, help="How long to wait for /readyz."
    ),
]
DEFAULT_TOKEN_HASH_FILE = "~/.config/foya/auth-token.sha256"  # noqa: S105 (a path)


def tunnel(
    destination: DestinationArg,
    stop: StopOpt = False,
    remote_port: RemotePortOpt = 8787,
    local_port: LocalPortOpt = 0,
    token_file: TokenFileOpt = None,
    remote_foya: RemoteFoyaOpt = "foya",
    remote_data_dir: RemoteDataDirOpt = None,
    remote_token_hash_file: RemoteTokenHashFileOpt = DEFAULT_TOKEN_HASH_FILE,
    remote_log_file: RemoteLogFileOpt = None,
    ssh: SshOpt = "ssh",
    ssh_option: SshOptionOpt = None,
    ready_timeout: ReadyTimeoutOpt = 30.0,
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
