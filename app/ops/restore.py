"""`foya restore`: put a backup written by `foya backup` (app.ops.backup) in place.

A restore verifies before it touches anything: the manifest's versions (an archive or schema
newer than this code is refused), every member against its hash and type (no absolute paths,
no `..`, nothing written through a link), and SQLite's integrity check of the database. It
unpacks beside the target and only then renames it into place; an existing target is moved
aside (with `replace`), never deleted, and a target a kernel holds is refused (those rules, and
`RestoreRefused`, are in app.ops.restore_place). A dry run verifies the same way and reports
what would stop the real restore: the command then exits 2, as the real one would fail.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

from app.jsontypes import JSONObject
from app.ops.backup import CHUNK, DATA, FORMAT, FORMAT_VERSION, HOME, MANIFEST, Progress, Report
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
from app.store import DB_NAME
from app.store.backup import inspect
from app.store.schema import VERSION as SCHEMA_VERSION


def _manifest(tar: tarfile.TarFile) -> JSONObject:
    # Untyped JSON on purpose: an archive may come from anywhere, so each field is checked
    # where it is used rather than trusted to be the `Manifest` a backup writes.
    try:
        member = tar.getmember(MANIFEST)
        raw = tar.extractfile(member)
        assert raw is not None
        manifest = json.loads(raw.read())
    except (KeyError, AssertionError, ValueError):
        raise RestoreRefused("not a Foya backup: it has no readable manifest.json") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RestoreRefused("not a Foya backup: the manifest's format is not foya-backup")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RestoreRefused(
            f"the backup's format version is {version}; this Foya reads up to {FORMAT_VERSION}:"
            " upgrade Foya first"
        )
    schema = manifest.get("schema_version")
    if not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise RestoreRefused(
            f"the backup's database schema is version {schema}; this Foya knows up to"
            f" {SCHEMA_VERSION}: upgrade Foya first"
        )
    return manifest


def _safe_name(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    top = path.parts[:2] == tuple(HOME.split("/")) or path.parts[:1] == (DATA,)
    if path.is_absolute() or ".." in path.parts or not top:
        raise RestoreRefused(f"the archive holds an unsafe path: {name!r}")
    return path


def _unpack(
    tar: tarfile.TarFile, manifest: JSONObject, into: Path, progress: Progress | None
) -> int:
    """Extract and verify every member into `into`; return the bytes written."""
    expected = {m["path"]: m for m in manifest.get("members", []) if isinstance(m, dict)}
    total = sum(int(m.get("size", 0)) for m in expected.values())
    seen: set[str] = set()
    links: list[tuple[Path, str, float]] = []
    dirs: list[tuple[Path, int, float]] = []
    done = 0
    for member in tar:
        if member.name == MANIFEST:
            continue
        want = expected.get(member.name)
        if want is None or member.name in seen:
            raise RestoreRefused(f"{member.name} is not (or twice) in the manifest")
        seen.add(member.name)
        path = into / _safe_name(member.name)
        mode = int(want["mode"]) & 0o7777
        if member.isdir() and want["type"] == "dir":
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
            dirs.append((path, mode, member.mtime))
        elif member.issym() and want["type"] == "symlink" and want["target"] == member.linkname:
            links.append((path, member.linkname, member.mtime))  # last: none is written through
        elif member.isfile() and want["type"] == "file" and want["size"] == member.size:
            done += _write_verified(tar, member, path, want, mode)
            os.utime(path, (member.mtime, member.mtime))
            if progress is not None:
                progress(done, total)
        else:
            raise RestoreRefused(f"{member.name} does not match its manifest entry")
    missing = sorted(set(expected) - seen)
    if missing:
        raise RestoreRefused(f"the archive lacks {len(missing)} member(s), e.g. {missing[0]}")
    for path, target, mtime in links:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.symlink(target, path)
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    for path, mode, mtime in reversed(dirs):  # children first: a read-only parent blocks them
        path.chmod(mode)
        os.utime(path, (mtime, mtime))
    return done


def _write_verified(
    tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path, want: JSONObject, mode: int
) -> int:
    source = tar.extractfile(member)
    assert source is not None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    digest = hashlib.sha256()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
        os.fchmod(out.fileno(), mode)
    if digest.hexdigest() != want.get("sha256"):
        raise RestoreRefused(f"{member.name} does not match its SHA-256 in the manifest")
    return member.size


def restore(
    archive: Path,
    data_dir: Path,
    *,
    home: Path | None = None,
    dry_run: bool = False,
    replace: bool = False,
    progress: Progress | None = None,
) -> Report:
    """Verify `archive` and, unless `dry_run`, make `data_dir` (and `home`) what it holds.

    A dry run verifies the same way and reports (in `notes`) what would stop the real one."""
    started = time.monotonic()
    data_dir = data_dir.resolve()
    notes: list[str] = []
    refusals, lock = preflight(data_dir, replace=replace, dry_run=dry_run)
    # Unpacked on the target's file system, so putting it in place is a rename.
    scratch = Path(
        tempfile.mkdtemp(
            prefix=f".{data_dir.name}.restore-", dir=existing_ancestor(data_dir.parent)
        )
    )
    moves: list[Move] = []
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                manifest = _manifest(tar)
                written = _unpack(tar, manifest, scratch, progress)
        except (tarfile.TarError, OSError) as exc:
            raise RestoreRefused(f"cannot read {archive}: {exc}") from None
        if not (scratch / DATA / DB_NAME).is_file():
            raise RestoreRefused(f"the archive holds no {DATA}/{DB_NAME}")
        info = inspect(scratch / DATA / DB_NAME)
        if (info.schema_version, info.head_seq) != (
            manifest["schema_version"],
            manifest["head_seq"],
        ):
            raise RestoreRefused("the database does not match the manifest's schema and head seq")
        moves.append(Move(scratch / DATA, data_dir))
        saved_home = scratch / HOME
        if home is not None and saved_home.is_dir():
            if replace or not nonempty(home):
                moves.append(Move(stage_beside(saved_home, home), home))
            else:
                notes.append(f"kept your existing {home} (pass --replace to restore the backup's)")
        if dry_run:
            notes += [f"a restore would be refused: {r}" for r in refusals]
        else:
            notes += put_in_place(moves)
        return Report(
            archive,
            None if dry_run else data_dir,
            len(manifest["members"]),
            written,
            info.head_seq,
            time.monotonic() - started,
            notes,
            refusals,
        )
    finally:
        discard_staging(scratch, moves, lock)
