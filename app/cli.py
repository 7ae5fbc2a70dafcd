"""The `foya` command: serve the kernel, small helpers for operators, and (registered from
app.ops.client_cli, app.ops.tunnel.cli and app.ops.context_cli) the commands that talk to a
kernel.

Flags only override what they name; everything else comes from FOYA_* variables through
`Settings`. A refusal prints one line on stderr naming what to fix and exits 2.

Start-up time is part of the interface (`foya --help`, `version` and `status` start in
<= 150 ms; bench.cli measures it): this module imports only typer and light leaves at the top,
and each command imports what it needs when it runs (pydantic-settings alone costs ~100 ms,
httpx ~90 ms). Help is click's plain text (typer's rich help costs ~40 ms more to import), with
a metavar on every value and the environment variable of every flag that has one.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Annotated

import typer

from app.errors import ConfigError
from app.ops import client_cli, context_cli, data_cli, mcp_cli, transfer_cli, trust_cli
from app.ops.cli_settings import build_settings, renamed
from app.ops.client_flags import DataDirOpt, env, fail
from app.ops.serve_options import (
    REPLICA_INSTEAD,
    AllowPlaintextOpt,
    AuthTokenHashFileOpt,
    CheckOpt,
    ListenOpt,
    ReplicateOpt,
    SocketOpt,
    TlsCertOpt,
    TlsKeyOpt,
)
from app.ops.tunnel.cli import tunnel
from app.ops.typer_fixes import defer_typer_coercion
from app.ops.websearch_cli import web_search_cli

CONTEXT = {"help_option_names": ["-h", "--help"]}
cli = typer.Typer(
    name="foya",
    help="Foya: a self-hosted, single-tenant agent kernel.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=CONTEXT,
)
tls_cli = typer.Typer(
    help="TLS helpers.", no_args_is_help=True, rich_markup_mode=None, context_settings=CONTEXT
)
cli.add_typer(tls_cli, name="tls")


@cli.callback(invoke_without_command=True)
def default(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    """Without a subcommand, `foya` serves on the default Unix socket."""
    if version:
        print_version()
        raise typer.Exit()
    if ctx.invoked_subcommand not in (None, "serve"):
        gc.enable()  # off while the CLI started (app.__main__); `serve` enables it when listening
    if ctx.invoked_subcommand is None:
        serve()


@cli.command()
def serve(
    listen: ListenOpt = None,
    socket: SocketOpt = None,
    data_dir: DataDirOpt = None,
    auth_token_hash_file: AuthTokenHashFileOpt = None,
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    allow_plaintext: AllowPlaintextOpt = False,
    replicate: ReplicateOpt = None,
    check: CheckOpt = False,
) -> None:
    """Run the kernel on a Unix socket, or on TCP with --listen.

    TCP needs a token digest and either TLS (--tls-cert and --tls-key) or, behind a TLS
    proxy, --allow-plaintext.
    """
    from app.ops.secretargs import check_url
    from app.serve.lean import lean_start

    lean_start()  # before the settings model and the server's modules are defined
    check_url(replicate, "--replicate", REPLICA_INSTEAD)
    settings = build_settings(
        listen_addr=listen,
        socket_path=socket,
        data_dir=data_dir,
        auth_token_hash_file=auth_token_hash_file,
        tls_cert_file=tls_cert,
        tls_key_file=tls_key,
        allow_plaintext=allow_plaintext or None,
        replica_url=replicate,
    )
    from app.settings import serve_plan

    try:
        plan = serve_plan(settings)
        # Hypercorn and the app load only once the settings pass.
        from app.serve import listeners as server

        if check:
            from app.ops.preflight import describe

            server.hypercorn_config(plan)  # loads the TLS key pair as serving does
            typer.echo(describe(settings, plan))
            return
        from app.logs import configure_logging

        configure_logging(settings.log_format, settings.log_level)

        server.run(settings, plan)
    except ConfigError as exc:
        fail(str(exc))


# The commands that talk to a kernel (app.ops.client_cli, app.ops.tunnel.cli), listed after
# `serve` in the help.
cli.command()(client_cli.status)
cli.command("exec")(client_cli.exec_)
cli.command()(client_cli.sessions)
cli.command()(client_cli.history)
cli.command()(client_cli.rewind)
cli.command()(client_cli.usage)
cli.command()(tunnel)
cli.command("import")(transfer_cli.import_)
cli.command()(transfer_cli.export)
cli.add_typer(context_cli.rules_cli, name="rules")
cli.add_typer(context_cli.memory_cli, name="memory")
cli.add_typer(context_cli.skills_cli, name="skills")
cli.add_typer(mcp_cli.mcp_cli, name="mcp")
cli.add_typer(trust_cli.projects_cli, name="projects")
cli.add_typer(web_search_cli, name="web-search")


@cli.command()
def token(
    auth_token_hash_file: Annotated[
        Path | None,
        typer.Option(
            "--auth-token-hash-file",
            metavar="FILE",
            help=env(
                "Where to write the token's SHA-256 digest (what serve reads).",
                "FOYA_AUTH_TOKEN_HASH_FILE",
            ),
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    hash_file: Annotated[Path | None, typer.Option("--hash-file", hidden=True)] = None,
) -> None:
    """Print a new bearer token; store only its digest.

    The token is printed once; its SHA-256 digest goes to a 0600 file for `foya serve`.
    """
    import hashlib
    import secrets

    from app.files import write_bytes_atomic

    given = renamed(auth_token_hash_file, "--auth-token-hash-file", hash_file, "--hash-file")
    path = build_settings(auth_token_hash_file=given).auth_token_hash_file
    if path is None:
        fail("give --auth-token-hash-file FILE (or set FOYA_AUTH_TOKEN_HASH_FILE)")
    if path.exists() and not force:
        fail(f"--auth-token-hash-file {path} exists; pass --force to replace it")
    value = secrets.token_urlsafe(32)
    write_bytes_atomic(path, hashlib.sha256(value.encode()).hexdigest().encode() + b"\n")
    typer.echo(value)


@tls_cli.command("self-signed")
def tls_self_signed(
    host: Annotated[
        list[str], typer.Option("--host", metavar="NAME", help="DNS name or IP (repeatable).")
    ],
    data_dir: DataDirOpt = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            metavar="FILE",
            help=env(
                "Certificate to write (default: tls/cert.pem in the data dir).",
                "FOYA_TLS_CERT_FILE",
            ),
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key",
            metavar="FILE",
            help=env("Key to write (default: tls/key.pem in the data dir).", "FOYA_TLS_KEY_FILE"),
        ),
    ] = None,
    days: Annotated[
        int, typer.Option("--days", metavar="N", min=1, max=3650, help="Days of validity.")
    ] = 825,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    cert: Annotated[Path | None, typer.Option("--cert", hidden=True)] = None,
    key: Annotated[Path | None, typer.Option("--key", hidden=True)] = None,
) -> None:
    """Write a certificate and key for direct HTTPS.

    A certificate signed by its own key (mode 0600) for each --host, and its SHA-256
    fingerprint.
    """
    from app.files import write_bytes_atomic
    from app.ops.certs import self_signed

    settings = build_settings(
        data_dir=data_dir,
        tls_cert_file=renamed(tls_cert, "--tls-cert", cert, "--cert"),
        tls_key_file=renamed(tls_key, "--tls-key", key, "--key"),
    )
    base = settings.data_dir / "tls"
    cert_path = settings.tls_cert_file or base / "cert.pem"
    key_path = settings.tls_key_file or base / "key.pem"
    for path in (cert_path, key_path):
        if path.exists() and not force:
            fail(f"{path} exists; pass --force to replace it")
    pair = self_signed(host, days)
    write_bytes_atomic(key_path, pair.key_pem, mode=0o600)
    write_bytes_atomic(cert_path, pair.cert_pem, mode=0o644)
    typer.echo(f"certificate: {cert_path}\nkey:         {key_path}")
    typer.echo(f"sha256 fingerprint: {pair.fingerprint}")


# The data-directory commands (app.ops.data_cli).
cli.command()(data_cli.check)
cli.command()(data_cli.backup)
cli.command()(data_cli.restore)


@cli.command()
def version() -> None:
    """Print the version."""
    print_version()


def print_version() -> None:
    import app

    typer.echo(f"foya {app.__version__}")


def main() -> None:
    """Console-script entry point."""
    defer_typer_coercion()
    cli(prog_name="foya")


if __name__ == "__main__":
    main()
