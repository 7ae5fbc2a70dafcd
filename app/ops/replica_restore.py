"""`foya restore --from-replica URL`: rebuild a data dir (and ~/.foya) from the replica that
`foya serve --replicate URL` keeps (app.ops.replicate), optionally as it was at a point in time.

Litestream restores both replicated databases, `<URL>/db` (foya.db) and `<URL>/files` (the file
snapshot, app.store.filesnap), from a generated config (so sftp's key and host key apply, as for
`foya serve`), with `-timestamp` passed to both. The database must pass SQLite's quick check,
have a schema this Foya knows and be clean under `foya check`; then the files are written back.
Everything is staged beside the target and renamed into place at the end with `foya restore`'s
rules (app.ops.restore): a non-empty target is refused unless `replace` (then moved aside, never
deleted), a data dir a kernel holds is refused, an existing non-empty ~/.foya is kept unless
`replace`. Any failure leaves every target as it was.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from app.errors import FoyaError
from app.files import write_json_atomic
from app.ops import replica_config
from app.ops.restore_place import (
    Move,
    RestoreRefused,
    discard_staging,
    existing_ancestor,
    nonempty,
    preflight,
    put_in_place,
    stage_beside,
)
from app.settings import Settings
from app.store import DB_NAME
from app.store.backup import inspect
from app.store.check import check
from app.store.filesnap import FILES_DB, extract

Step = Callable[[str], None]  # one line per step, for the operator
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_NO_BACKUP = "no matching backup files available"  # Litestream's words (cmd/litestream)


@dataclass(frozen=True)
class ReplicaReport:
    """What a replica restore put in place (or, on a dry run, verified)."""

    target: Path | None
    head_seq: int
    files: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    #: What would refuse the real restore (a dry run goes on and lists them).
    refusals: list[str] = field(default_factory=list)


def parse_timestamp(text: str) -> str:
    """`text` if it is an RFC 3339 time with a zone (`2026-12-01T07:00:00Z`), which is what
    Litestream's `-timestamp` takes; else `RestoreRefused`."""
    bad = RestoreRefused(
        f"--timestamp {text!r}: expected an RFC 3339 time with its zone, like"
        " 2026-12-01T07:00:00Z or 2026-12-01T08:00:00+01:00"
    )
    if not _RFC3339.fullmatch(text):
        raise bad
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:  # e.g. month 13
        raise bad from None
    return text


def restore_from_replica(
    url: str,
    settings: Settings,
    *,
    home: Path | None = None,
    timestamp: str | None = None,
    dry_run: bool = False,
    replace: bool = False,
    step: Step | None = None,
) -> ReplicaReport:
    """Make `settings.data_dir` (and `home`, e.g. ~/.foya) what the replica at `url` holds, as
    of `timestamp` (RFC 3339) if given. A dry run restores and verifies into a scratch
    directory, changes nothing, and notes what would stop the real restore."""
    started = time.monotonic()
    say = step or (lambda _: None)
    if timestamp is not None:
        parse_timestamp(timestamp)
    replica_config.parse_url(url, flag="--from-replica")
    binary = replica_config.litestream_binary(settings.litestream_bin, flag="--from-replica")
    options = replica_config.replica_options(url, settings)
    data_dir = settings.data_dir.resolve()
    refusals, lock = preflight(data_dir, replace=replace, dry_run=dry_run)
    # Private (0700) and on the target's file system, so putting it in place is a rename.
    scratch = Path(
        tempfile.mkdtemp(
            prefix=f".{data_dir.name}.restore-", dir=existing_ancestor(data_dir.parent)
        )
    )
    moves: list[Move] = []
    try:
        staged = scratch / "data"
        staged.mkdir(mode=0o700)
        db, files_db = staged / DB_NAME, scratch / FILES_DB
        urls = replica_config.replica_urls(url)
        config = scratch / "litestream.yml"
        write_json_atomic(config, {"dbs": replica_config.databases(url, options, db, files_db)})
        runner = _Litestream(binary, config, url, timestamp)
        say(f"restoring {DB_NAME} from {replica_config.redact(urls['db'])}")
        runner.restore(db, urls["db"])
        say(f"checking {DB_NAME}")
        head_seq = _verify(db)
        say(f"restoring the files from {replica_config.redact(urls['files'])}")
        runner.restore(files_db, urls["files"])
        written = extract(files_db, {"data": staged, "home": scratch / "home"})
        moves.append(Move(staged, data_dir))
        notes = []
        if home is not None and (scratch / "home").is_dir():
            if replace or not nonempty(home):
                moves.append(Move(stage_beside(scratch / "home", home), home))
            else:
                notes.append(f"kept your existing {home} (pass --replace to restore the replica's)")
        if dry_run:
            notes += [f"a restore would be refused: {r}" for r in refusals]
        else:
            say(f"putting {data_dir} in place")
            notes += put_in_place(moves)
        seconds = time.monotonic() - started
        target = None if dry_run else data_dir
        return ReplicaReport(target, head_seq, written, seconds, notes, refusals)
    finally:
        discard_staging(scratch, moves, lock)


def _verify(db: Path) -> int:
    """The restored database's head seq, if it is whole, known to this Foya and clean under
    `foya check`; else `RestoreRefused` (or the `inspect` error saying what is wrong)."""
    db.chmod(0o600)  # Litestream writes 0644; the data dir's files are private
    try:
        info = inspect(db)  # quick check, and a schema newer than ours is refused
    except FoyaError as exc:
        raise RestoreRefused(f"the replica's {DB_NAME} is refused: {exc.message}") from None
    report = check(db)
    if not report.clean:
        raise RestoreRefused(
            f"the restored {DB_NAME} fails foya check with {len(report.differences)}"
            f" difference(s), e.g. {report.differences[0]}"
        )
    return info.head_seq


@dataclass(frozen=True)
class _Litestream:
    """`litestream restore` of one database of the generated config."""

    binary: Path
    config: Path
    url: str  # the base URL, whose password never shows in a message
    timestamp: str | None

    def restore(self, db: Path, replica: str) -> None:
        at = [] if self.timestamp is None else ["-timestamp", self.timestamp]
        args = [str(self.binary), "restore", "-config", str(self.config), "-no-expand-env"]
        try:
            done = subprocess.run(
                [*args, *at, "-o", str(db), str(db)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
                env=replica_config.child_env(),
            )
        except OSError as exc:
            raise RestoreRefused(f"cannot run {self.binary}: {exc}") from None
        if done.returncode == 0 and db.is_file():
            return
        where = replica_config.redact(replica)
        said = [ln for ln in done.stderr.splitlines() if ln.startswith("Error: ")]
        reason = said[-1].removeprefix("Error: ") if said else done.stderr.strip()[-500:]
        if reason == _NO_BACKUP:
            when = "" if self.timestamp is None else f" from {self.timestamp} or earlier"
            raise RestoreRefused(f"the replica holds no backup{when} at {where}")
        password = urlsplit(self.url).password
        if password:
            reason = reason.replace(password, "***")
        raise RestoreRefused(f"litestream could not restore from {where}: {reason}")
