"""The `foya` command: serve the kernel, small helpers for operators, and (registered from
app.ops.client_cli and app.ops.context_cli) the commands that talk to a kernel.

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
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from app.errors import ConfigError, FoyaError
from app.ops import client_cli, context_cli, mcp_cli, transfer_cli, trust_cli
from app.ops.client_cli import DataDirOpt, env, fail
from app.ops.progress import Progress
from app.ops.websearch_cli import web_search_cli

if TYPE_CHECKING:
    from app.settings import Settings

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

T = TypeVar("T")
# What to do instead of `--replicate URL-with-a-password` (app.ops.secretargs).
REPLICA_INSTEAD = (
    "set FOYA_REPLICA_URL to the URL instead (a process's environment is its user's only), "
    "or authenticate with a key: FOYA_REPLICA_SFTP_KEY for sftp, AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY for s3"
)
RESTORE_INSTEAD = (
    "give `--from-replica -` and the URL on stdin, or authenticate with a key "
    "(FOYA_REPLICA_SFTP_KEY for sftp, AWS_* variables for s3)"
)


def build_settings(**flags: Any) -> Settings:
    """Settings from the environment, overridden by the flags that were given."""
    from pydantic import ValidationError

    from app.settings import Settings

    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:  # a FOYA_* variable (or a flag) has a bad value
        first = exc.errors()[0]
        name = "FOYA_" + str(first["loc"][0]).upper() if first.get("loc") else "settings"
        fail(f"{name}: {first['msg']}")


def renamed(new: T | None, new_flag: str, old: T | None, old_flag: str) -> T | None:
    """The value of a flag given by its name or by its deprecated old name (hidden in help)."""
    if old is None:
        return new
    if new is not None:
        fail(f"give {new_flag} only ({old_flag} is its deprecated old name)")
    typer.echo(f"foya: {old_flag} is deprecated; use {new_flag}", err=True)
    return old


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
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            help=env("Serve TCP instead of the Unix socket.", "FOYA_LISTEN_ADDR"),
        ),
    ] = None,
    socket: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            metavar="PATH",
            help=env(
                "Unix socket path (default: kernel.sock in the data dir).", "FOYA_SOCKET_PATH"
            ),
        ),
    ] = None,
    data_dir: DataDirOpt = None,
    auth_token_hash_file: Annotated[
        Path | None,
        typer.Option(
            "--auth-token-hash-file",
            metavar="FILE",
            help=env("File holding the token's SHA-256 hex digest.", "FOYA_AUTH_TOKEN_HASH_FILE"),
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert", metavar="FILE", help=env("PEM certificate chain.", "FOYA_TLS_CERT_FILE")
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key", metavar="FILE", help=env("PEM private key.", "FOYA_TLS_KEY_FILE")
        ),
    ] = None,
    allow_plaintext: Annotated[
        bool,
        typer.Option(
            "--allow-plaintext",
            help=env("Serve TCP without TLS (behind a TLS proxy).", "FOYA_ALLOW_PLAINTEXT=1"),
        ),
    ] = False,
    replicate: Annotated[
        str | None,
        typer.Option(
            "--replicate",
            metavar="URL",
            help=env(
                "Replicate the database and files continuously with Litestream to URL "
                "(file:///path, sftp://user@host/path, s3://bucket/prefix); a URL with a "
                "password only in FOYA_REPLICA_URL.",
                "FOYA_REPLICA_URL",
            ),
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Check the settings, TLS files, token digest and data dir, print what would be "
            "served, and exit (0 fine, 2 refused) without listening.",
        ),
    ] = False,
) -> None:
    """Run the kernel on a Unix socket, or on TCP with --listen.

    TCP needs a token digest and either TLS (--tls-cert and --tls-key) or, behind a TLS
    proxy, --allow-plaintext.
    """
    from app.ops.secretargs import check_url

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
        # structlog imports rich (installed for typer's help) to pretty-print tracebacks; a server
        # that logs JSON pays ~3 MiB and ~40 ms at every start for it. Plain tracebacks instead.
        # FastAPI imports pydantic's legacy `v1` package while it builds routes, only to refuse
        # v1 models (we have none): blocked, its check answers "not v1" (~10 ms, ~1.5 MiB).
        for legacy in ("rich", "pydantic.v1"):
            sys.modules.setdefault(legacy, None)  # type: ignore[arg-type]  # None blocks an import
        from app.serve import (
            listeners as server,
        )  # hypercorn and the app load only once settings pass

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


# The commands that talk to a kernel (app.ops.client_cli), listed after `serve` in the help.
cli.command()(client_cli.status)
cli.command("exec")(client_cli.exec_)
cli.command()(client_cli.sessions)
cli.command()(client_cli.history)
cli.command()(client_cli.rewind)
cli.command()(client_cli.usage)
cli.command()(client_cli.tunnel)
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


@cli.command()
def check(
    data_dir: DataDirOpt = None,
    repair: Annotated[
        bool,
        typer.Option(
            "--repair", help="Rewrite projections from the event log; remove the orphans."
        ),
    ] = False,
) -> None:
    """Rebuild each projection from the event log; list orphan files.

    Orphans are directories nothing owns (a deleted or never-stored session's artifacts or
    workspace, a removed canvas's assets) and staging a crash left. Exit 1 on any difference
    or orphan. Run --repair with the kernel stopped.
    """
    import contextlib

    from app.files import data_dir_lock
    from app.store import DB_NAME
    from app.store import orphans as orphan_files
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
            orphans = orphan_files.find(settings.data_dir, path, Path.home() / ".foya")
            removed = orphan_files.remove(orphans) if repair else []
    except (ConfigError, FoyaError) as exc:
        fail(str(exc))
    for line in report.differences:
        typer.echo(line)
    for orphan in orphans:
        typer.echo(orphan.describe())
    summary = f"checked {report.events} events and {report.blobs} blob references: "
    summary += f"{len(report.differences)} difference(s)"
    if report.repaired:
        summary += f"; repaired, {len(remaining)} remain"
    summary += f"; {len(orphans)} orphan(s)" + (f", {len(removed)} removed" if repair else "")
    typer.echo(summary, err=True)
    for line in remaining if report.repaired else ():
        typer.echo(f"remains: {line}")
    left = [o for o in orphans if o not in removed]
    for orphan in left if repair else ():
        typer.echo(f"remains: {orphan.describe()}")
    if remaining or left:
        raise typer.Exit(1)


def _mb_per_s(size: int, seconds: float) -> str:
    return f"{size / 1e6:.1f} MB in {seconds:.1f} s ({size / 1e6 / max(seconds, 1e-9):.0f} MB/s)"


@cli.command()
def backup(
    dest: Annotated[str, typer.Argument(metavar="DEST", hidden=True)],
    data_dir: DataDirOpt = None,
) -> None:
    """Back up the data directory, while the kernel runs.

    Writes the data directory and ~/.foya into one archive: DEST, or a dated
    foya-backup-<UTC time>.tar when DEST is a directory (one that exists, or a path ending
    in /, which must exist).
    """
    from app.ops.backup import backup as run_backup

    settings = build_settings(data_dir=data_dir)
    try:
        with Progress("backing up") as progress:
            report = run_backup(
                settings.data_dir, dest, home=Path.home() / ".foya", progress=progress
            )
    except FoyaError as exc:
        fail(exc.message)
    except OSError as exc:
        fail(f"backup failed: {exc}")
    typer.echo(f"wrote {report.archive}: {report.members} members, head seq {report.head_seq}")
    typer.echo(_mb_per_s(report.bytes, report.seconds), err=True)


@cli.command()
def restore(
    src: Annotated[Path | None, typer.Argument(metavar="ARCHIVE", hidden=True)] = None,
    data_dir: DataDirOpt = None,
    from_replica: Annotated[
        str | None,
        typer.Option(
            "--from-replica",
            metavar="URL",
            help="Restore from this replica instead of an archive (`-` reads the URL from "
            "stdin: a URL with a password is refused here).",
        ),
    ] = None,
    timestamp: Annotated[
        str | None,
        typer.Option(
            "--timestamp",
            metavar="T",
            help="With --from-replica: the state at T (RFC 3339, e.g. 2026-12-01T07:00:00Z).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Verify everything, change nothing.")
    ] = False,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Move an existing data directory aside (it is kept)."),
    ] = False,
) -> None:
    """Restore a backup, or a replica, into the data directory.

    Verifies ARCHIVE (written by `foya backup`) or, with --from-replica URL, the replica
    `foya serve --replicate URL` keeps, and puts it in place. Stop the kernel first.
    """
    from app.ops.secretargs import STDIN, check_url, read_stdin

    check_url(from_replica, "--from-replica", RESTORE_INSTEAD)
    if (src is None) == (from_replica is None):
        fail("give either ARCHIVE (a file `foya backup` wrote) or --from-replica URL")
    if timestamp is not None and from_replica is None:
        fail("--timestamp needs --from-replica (an archive holds one point in time)")
    if from_replica is not None:
        if from_replica == STDIN:
            from_replica = read_stdin("--from-replica")
        _restore_replica(from_replica, data_dir, timestamp, dry_run=dry_run, replace=replace)
        return
    assert src is not None
    from app.ops.restore import restore as run_restore

    settings = build_settings(data_dir=data_dir)
    try:
        with Progress("verifying" if dry_run else "restoring") as progress:
            report = run_restore(
                src,
                settings.data_dir,
                home=Path.home() / ".foya",
                dry_run=dry_run,
                replace=replace,
                progress=progress,
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


def _restore_replica(
    url: str, data_dir: str | None, timestamp: str | None, *, dry_run: bool, replace: bool
) -> None:
    from app.ops.replica_restore import restore_from_replica

    settings = build_settings(data_dir=data_dir)
    try:
        report = restore_from_replica(
            url,
            settings,
            home=Path.home() / ".foya",
            timestamp=timestamp,
            dry_run=dry_run,
            replace=replace,
            step=lambda line: typer.echo(f"foya: {line}", err=True),
        )
    except FoyaError as exc:
        fail(exc.message)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"restore failed: {exc}")
    verb = "verified" if dry_run else f"restored into {report.target}"
    typer.echo(f"{verb}: head seq {report.head_seq}, {report.files} files")
    for note in report.notes:
        typer.echo(note)
    typer.echo(f"took {report.seconds:.1f} s", err=True)


@cli.command()
def version() -> None:
    """Print the version."""
    print_version()


def print_version() -> None:
    import app

    typer.echo(f"foya {app.__version__}")


def defer_typer_coercion() -> None:
    """Let typer skip coercing the options that were not given.

    typer 0.29 coerces each parameter's value through a pydantic `TypeAdapter` it builds the
    first time the parameter is processed, even when there is no value (--help on every run),
    so every command imported pydantic (~40 ms) before it began. A missing value coerces to
    None (or () for a repeatable option), and a string given to a plain `str` parameter to
    itself: those are answered without the adapter (the thin clients take their paths as
    `str` for that). A typer without that machinery is left as it is.
    """
    from typer import core

    param = getattr(core, "_TyperParameter", None)
    build: Any = getattr(param, "get_runtime_param", None)
    if param is None or build is None:
        return

    class Deferred:
        """Stands in for a parameter's coercion until it has a value to coerce."""

        def __init__(self, owner: Any) -> None:
            self.owner = owner

        def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
            if value is None:
                return () if param.multiple or param.nargs == -1 else None
            desc = param.type_descriptor
            if isinstance(value, str) and desc.annotation is str and not desc.parameter_info.parser:
                return value
            return build(self.owner).coerce(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        return Deferred(self) if self._runtime_param is None else self._runtime_param

    param.get_runtime_param = get_runtime_param


def main() -> None:
    """Console-script entry point."""
    defer_typer_coercion()
    cli(prog_name="foya")


if __name__ == "__main__":
    main()
