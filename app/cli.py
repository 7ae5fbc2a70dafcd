"""The `foya` command: serve the kernel, and small helpers for operators.

Flags only override what they name; everything else comes from FOYA_* variables through
`Settings`. A refusal prints one line on stderr naming what to fix and exits 2.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from app.errors import ConfigError
from app.files import write_bytes_atomic
from app.logs import configure_logging
from app.settings import Settings, serve_plan

cli = typer.Typer(
    name="foya",
    help="Foya: a self-hosted, single-tenant agent kernel.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tls_cli = typer.Typer(help="TLS helpers.", no_args_is_help=True)
cli.add_typer(tls_cli, name="tls")

EXIT_CONFIG = 2

DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory [FOYA_DATA_DIR].", show_default=False),
]


def fail(message: str) -> NoReturn:
    """Print one line on stderr and exit non-zero."""
    typer.echo(f"foya: {message}", err=True)
    raise typer.Exit(EXIT_CONFIG)


def build_settings(**flags: Any) -> Settings:
    """Settings from the environment, overridden by the flags that were given."""
    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValueError as exc:  # pydantic's ValidationError: a FOYA_* variable has a bad value
        fail(str(exc).replace("\n", " "))


@cli.callback(invoke_without_command=True)
def default(ctx: typer.Context) -> None:
    """Without a subcommand, `foya` serves on the default Unix socket."""
    if ctx.invoked_subcommand is None:
        serve()


@cli.command()
def serve(
    listen: Annotated[
        str | None, typer.Option("--listen", help="TCP host:port [FOYA_LISTEN_ADDR].")
    ] = None,
    socket: Annotated[
        Path | None, typer.Option("--socket", help="Unix socket path [FOYA_SOCKET_PATH].")
    ] = None,
    data_dir: DataDirOpt = None,
    auth_token_hash_file: Annotated[
        Path | None,
        typer.Option("--auth-token-hash-file", help="File holding the token's SHA-256 hex digest."),
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="PEM certificate chain.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="PEM private key.")] = None,
    allow_plaintext: Annotated[
        bool, typer.Option("--allow-plaintext", help="Serve TCP without TLS (behind a proxy).")
    ] = False,
) -> None:
    """Run the kernel: a Unix socket by default, or TCP with --listen (TLS or --allow-plaintext)."""
    from app import serve as server  # imports hypercorn and the app only when serving

    settings = build_settings(
        listen_addr=listen,
        socket_path=socket,
        data_dir=data_dir,
        auth_token_hash_file=auth_token_hash_file,
        tls_cert_file=tls_cert,
        tls_key_file=tls_key,
        allow_plaintext=allow_plaintext or None,
    )
    try:
        plan = serve_plan(settings)
        configure_logging(settings.log_format, settings.log_level)
        server.run(settings, plan)
    except ConfigError as exc:
        fail(str(exc))


@cli.command()
def token(
    hash_file: Annotated[
        Path, typer.Option("--hash-file", help="Where to write the token's SHA-256 digest.")
    ],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Print a fresh random bearer token once and store only its SHA-256 digest (mode 0600)."""
    if hash_file.exists() and not force:
        fail(f"--hash-file {hash_file} exists; pass --force to replace it")
    value = secrets.token_urlsafe(32)
    write_bytes_atomic(hash_file, hashlib.sha256(value.encode()).hexdigest().encode() + b"\n")
    typer.echo(value)


@tls_cli.command("self-signed")
def tls_self_signed(
    host: Annotated[list[str], typer.Option("--host", help="DNS name or IP (repeatable).")],
    data_dir: DataDirOpt = None,
    cert: Annotated[
        Path | None, typer.Option("--cert", help="Default <data-dir>/tls/cert.pem")
    ] = None,
    key: Annotated[
        Path | None, typer.Option("--key", help="Default <data-dir>/tls/key.pem")
    ] = None,
    days: Annotated[int, typer.Option("--days", min=1, max=3650)] = 825,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
) -> None:
    """Write a self-signed certificate and 0600 key; print the certificate's SHA-256 fingerprint."""
    from app.certs import self_signed

    base = build_settings(data_dir=data_dir).data_dir / "tls"
    cert_path, key_path = cert or base / "cert.pem", key or base / "key.pem"
    for path in (cert_path, key_path):
        if path.exists() and not force:
            fail(f"{path} exists; pass --force to replace it")
    pair = self_signed(host, days)
    write_bytes_atomic(key_path, pair.key_pem, mode=0o600)
    write_bytes_atomic(cert_path, pair.cert_pem, mode=0o644)
    typer.echo(f"certificate: {cert_path}\nkey:         {key_path}")
    typer.echo(f"sha256 fingerprint: {pair.fingerprint}")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="foya")


if __name__ == "__main__":
    main()
