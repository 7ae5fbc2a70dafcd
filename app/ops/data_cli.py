"""The data-directory commands of `foya`: `check` (projections against the event log, orphan
files), `backup` (while the kernel runs) and `restore` (from an archive or a replica, with the
kernel stopped). Each imports what it needs when it runs (app.cli keeps start-up light).

A restore refused, and a dry run of one that would be refused, exit 2 after saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.errors import ConfigError, FoyaError
from app.ops.cli_settings import build_settings
from app.ops.client_flags import EXIT_CONFIG, DataDirOpt, fail
from app.ops.progress import Progress

RESTORE_INSTEAD = (
    "give `--from-replica -` and the URL on stdin, or authenticate with a key "
    "(FOYA_REPLICA_SFTP_KEY for sftp, AWS_* variables for s3)"
)


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


ArchiveArg = Annotated[Path | None, typer.Argument(metavar="ARCHIVE", hidden=True)]
FromReplicaOpt = Annotated[
    str | None,
    typer.Option(
        "--from-replica",
        metavar="URL",
        help="Restore from this replica instead of an archive (`-` reads the URL from "
        "stdin: a URL with a password is refused here).",
    ),
]
TimestampOpt = Annotated[
    str | None,
    typer.Option(
        "--timestamp",
        metavar="T",
        help="With --from-replica: the state at T (RFC 3339, e.g. 2026-12-01T07:00:00Z).",
    ),
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Verify everything, change nothing.")]
ReplaceOpt = Annotated[
    bool, typer.Option("--replace", help="Move an existing data directory aside (it is kept).")
]


def restore(
    src: ArchiveArg = None,
    data_dir: DataDirOpt = None,
    from_replica: FromReplicaOpt = None,
    timestamp: TimestampOpt = None,
    dry_run: DryRunOpt = False,
    replace: ReplaceOpt = False,
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
    _restore_archive(src, data_dir, dry_run=dry_run, replace=replace)


def _restore_archive(src: Path, data_dir: str | None, *, dry_run: bool, replace: bool) -> None:
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
    would_be_refused(report.refusals)


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
    would_be_refused(report.refusals)


def would_be_refused(refusals: list[str]) -> None:
    """A dry run verified everything, but the restore it stands for would be refused: exit 2,
    as that restore would, with the first reason on stderr (the notes list all of them)."""
    if refusals:
        typer.echo(f"foya: the restore would be refused: {refusals[0]}", err=True)
        raise typer.Exit(EXIT_CONFIG)
