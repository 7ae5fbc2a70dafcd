"""The `foya` command: serve the kernel, and small helpers for operators.

Flags only override what they name; everything else comes from FOYA_* variables through
`Settings`. A refusal prints one line on stderr naming what to fix and exits 2.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from app.errors import ConfigError, FoyaError
from app.files import write_bytes_atomic
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
    except ValidationError as exc:  # a FOYA_* variable (or a flag) has a bad value
        first = exc.errors()[0]
        name = "FOYA_" + str(first["loc"][0]).upper() if first.get("loc") else "settings"
        fail(f"{name}: {first['msg']}")


@cli.callback(invoke_without_command=True)
def default(ctx: typer.Context) -> None:
    """Without a subcommand, `foya` serves on the default Unix socket."""
    if ctx.invoked_subcommand not in (None, "serve"):
        gc.enable()  # off while the CLI started (app.__main__); `serve` enables it when listening
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
        # structlog imports rich (installed for typer's help) to pretty-print tracebacks; a server
        # that logs JSON pays ~3 MiB and ~40 ms at every start for it. Plain tracebacks instead.
        # FastAPI imports pydantic's legacy `v1` package while it builds routes, only to refuse
        # v1 models (we have none): blocked, its check answers "not v1" (~10 ms, ~1.5 MiB).
        for legacy in ("rich", "pydantic.v1"):
            sys.modules.setdefault(legacy, None)  # type: ignore[arg-type]  # None blocks an import
        from app import serve as server  # hypercorn and the app load only once settings pass
        from app.logs import configure_logging

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
    from app.ops.certs import self_signed

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


@cli.command()
def check(
    data_dir: DataDirOpt = None,
    repair: Annotated[
        bool, typer.Option("--repair", help="Rewrite projections from the event log.")
    ] = False,
) -> None:
    """Rebuild every projection from the event log and compare; exit 1 on any difference."""
    from app.files import data_dir_lock
    from app.store import DB_NAME
    from app.store.check import check as run_check

    settings = build_settings(data_dir=data_dir)
    path = settings.data_dir / DB_NAME
    if not path.is_file():
        fail(f"--data-dir {settings.data_dir}: no {DB_NAME} there")
    try:
        # Repair writes projections: refuse while a kernel owns the data dir.
        with data_dir_lock(settings.data_dir) if repair else contextlib.nullcontext():
            report = run_check(path, repair=repair)
            remaining = run_check(path).differences if report.repaired else report.differences
    except (ConfigError, FoyaError) as exc:
        fail(str(exc))
    for line in report.differences:
        typer.echo(line)
    summary = f"checked {report.events} events and {report.blobs} blob references: "
    summary += f"{len(report.differences)} difference(s)"
    if report.repaired:
        summary += f"; repaired, {len(remaining)} remain"
    typer.echo(summary, err=True)
    for line in remaining if report.repaired else ():
        typer.echo(f"remains: {line}")
    if remaining:
        raise typer.Exit(1)


def _progress(label: str) -> Any:
    """A progress bar on stderr; returns (bar, callback(done, total))."""
    bar = typer.progressbar(length=1, label=label, file=sys.stderr, show_pos=False)

    def update(done: int, total: int) -> None:
        bar.length = max(total, 1)
        bar.update(done - bar.pos)

    return bar, update


def _mb_per_s(size: int, seconds: float) -> str:
    return f"{size / 1e6:.1f} MB in {seconds:.1f} s ({size / 1e6 / max(seconds, 1e-9):.0f} MB/s)"


@cli.command()
def backup(
    dest: Annotated[
        Path, typer.Argument(help="Archive file to write, or a directory for a dated one.")
    ],
    data_dir: DataDirOpt = None,
) -> None:
    """Back up the data directory and ~/.foya into one archive, while the kernel runs."""
    from app.ops.backup import backup as run_backup

    settings = build_settings(data_dir=data_dir)
    bar, update = _progress("backing up")
    try:
        with bar:
            report = run_backup(
                settings.data_dir, dest, home=Path.home() / ".foya", progress=update
            )
    except FoyaError as exc:
        fail(exc.message)
    except OSError as exc:
        fail(f"backup failed: {exc}")
    typer.echo(f"wrote {report.archive}: {report.members} members, head seq {report.head_seq}")
    typer.echo(_mb_per_s(report.bytes, report.seconds), err=True)


@cli.command()
def restore(
    src: Annotated[Path, typer.Argument(help="A backup archive written by `foya backup`.")],
    data_dir: DataDirOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Verify everything, change nothing.")
    ] = False,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Move an existing data directory aside (it is kept)."),
    ] = False,
) -> None:
    """Verify a backup and restore it into the data directory (stop the kernel first)."""
    from app.ops.restore import restore as run_restore

    settings = build_settings(data_dir=data_dir)
    bar, update = _progress("verifying" if dry_run else "restoring")
    try:
        with bar:
            report = run_restore(
                src,
                settings.data_dir,
                home=Path.home() / ".foya",
                dry_run=dry_run,
                replace=replace,
                progress=update,
            )
    except FoyaError as exc:
        fail(exc.message)
    except OSError as exc:
        fail(f"restore failed: {exc}")
    verb = "verified" if dry_run else f"restored into {report.target}"
    typer.echo(f"{verb}: {report.members} members, head seq {report.head_seq}")
    for note in report.notes:
        typer.echo(note)
    typer.echo(_mb_per_s(report.bytes, report.seconds), err=True)


@cli.command("exec")
def exec_(
    prompt: Annotated[str, typer.Argument(help="The message to send.", show_default=False)],
    session: Annotated[
        str | None, typer.Option("--session", help="Continue this session (default: a new one).")
    ] = None,
    socket: Annotated[
        Path | None,
        typer.Option("--socket", help="Unix socket [FOYA_SOCKET_PATH; <data-dir>/kernel.sock]."),
    ] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="TCP kernel, e.g. https://host:port.")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="File holding the bearer token for --url [FOYA_TOKEN]."),
    ] = None,
    cacert: Annotated[
        Path | None, typer.Option("--cacert", help="PEM certificate to trust for --url.")
    ] = None,
    data_dir: DataDirOpt = None,
    approve_all: Annotated[
        bool, typer.Option("--approve-all", help="Approve every tool call without asking.")
    ] = False,
    show_reasoning: Annotated[
        bool, typer.Option("--show-reasoning", help="Print reasoning, dimmed, on stderr.")
    ] = False,
    model: Annotated[str | None, typer.Option("--model", help="Model of a new session.")] = None,
    project_id: Annotated[
        str | None, typer.Option("--project-id", help="Project of a new session.")
    ] = None,
) -> None:
    """Run one turn on a kernel and stream its reply; exit 0 completed, 1 failed, 130 cancelled."""
    from app.ops.client import ExecOptions, Target, run_exec

    if not prompt.strip():
        fail("PROMPT: must not be empty")
    if url is not None and socket is not None:
        fail("give either --socket or --url, not both")
    if url is None and (token_file is not None or cacert is not None):
        fail("--token-file and --cacert need --url")
    if url is not None and not url.startswith(("http://", "https://")):
        fail(f"--url: expected http(s)://host:port, got {url!r}")
    if cacert is not None and not cacert.is_file():
        fail(f"--cacert: cannot read {cacert}")
    if url is None:
        target = Target(
            socket=build_settings(data_dir=data_dir, socket_path=socket).resolved_socket_path
        )
    else:
        target = Target(url=url.rstrip("/"), token=_token(token_file), cacert=cacert)
    opts = ExecOptions(prompt, session, approve_all, show_reasoning, model, project_id)
    raise typer.Exit(run_exec(target, opts, sys.stdout, sys.stderr, sys.stdin))


def _token(token_file: Path | None) -> str | None:
    """The bearer token from --token-file, else FOYA_TOKEN (never from a flag: ps shows flags)."""
    if token_file is None:
        return os.environ.get("FOYA_TOKEN") or None
    try:
        return token_file.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--token-file: cannot read {token_file} ({type(exc).__name__})")


@cli.command()
def tunnel(
    destination: Annotated[
        str, typer.Argument(help="ssh destination: user@host or a Host alias.", show_default=False)
    ],
    remote_port: Annotated[
        int, typer.Option("--remote-port", min=1, max=65535, help="The kernel's port there.")
    ] = 8787,
    local_port: Annotated[
        int, typer.Option("--local-port", min=0, max=65535, help="0: a free one.")
    ] = 0,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="Bearer token file [FOYA_TOKEN].")
    ] = None,
    remote_foya: Annotated[str, typer.Option("--remote-foya", help="foya on the remote.")] = "foya",
    remote_data_dir: Annotated[
        str | None, typer.Option("--remote-data-dir", help="--data-dir for a kernel started there.")
    ] = None,
    remote_token_hash_file: Annotated[
        str, typer.Option("--remote-token-hash-file", help="Its --auth-token-hash-file.")
    ] = "~/.config/foya/auth-token.sha256",  # noqa: S107 (a path)
    remote_log_file: Annotated[
        str | None, typer.Option("--remote-log-file", help="Where a started kernel logs.")
    ] = None,
    ssh: Annotated[str, typer.Option("--ssh", help="The ssh client.")] = "ssh",
    ssh_option: Annotated[
        list[str] | None,
        typer.Option("--ssh-option", "-o", help="ssh -o option, e.g. -o Port=2222 (repeatable)."),
    ] = None,
    ready_timeout: Annotated[float, typer.Option("--ready-timeout", min=1.0)] = 30.0,
) -> None:
    """Forward a local port to a kernel on another machine over ssh, starting it there if it is
    not running; reconnects when the tunnel drops. Prints `ready: URL` each time it is up."""
    from app.ops.tunnel.config import TunnelConfig
    from app.ops.tunnel.local import run as run_tunnel

    secret = _token(token_file)
    if secret is None:
        fail("give the bearer token with --token-file or FOYA_TOKEN")
    config = TunnelConfig(
        destination=destination,
        token=secret,
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
    raise typer.Exit(run_tunnel(config, on_ready=lambda url: typer.echo(f"ready: {url}")))


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="foya")


if __name__ == "__main__":
    main()
