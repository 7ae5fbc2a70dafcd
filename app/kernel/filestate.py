"""Putting files back: what undoing the agent's changes would do to each file on disk, and doing
it crash-safely. Shared by file review (`undo`) and rewind.

For each changed path we know `target` (before the agent's first change), `current` (on disk now)
and the agent's changes as runs: a run is a stretch of changes each starting from the image the
previous one left, so someone else edited the file between two runs. Undoing only the agent's
changes reverse-applies each run (after → before) onto the current content, newest first: a run
whose after-image is the content as it stands is simply replaced by its before-image, any other
by a three-way merge (`app.text.merge`). A file only the agent touched, or already at the target, is
`ready`; one whose undo needed a merge and merged cleanly is `mergeable` (the user's edits stay);
otherwise it is `modified`, never silently overwritten, and restored (to `target`) only when the
caller forces its key.

Restoring goes through a durable journal (`app.store.journals`): every original image is stored
before the first file is written, so a crash half-way is rolled back at the next start.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.errors import BadRequest, Conflict
from app.events import FileOutcome
from app.failpoints import failpoint
from app.files import restore_file
from app.store import Store
from app.store.filechanges import FileSpan
from app.store.journals import FileImage, JournalFile
from app.text.diff import unified
from app.text.merge import merge_bytes

Status = Literal["ready", "mergeable", "modified"]
FileAction = Literal["restored", "merged", "kept", "force_restored"]


class FileChanged(Conflict):
    """A file changed on disk while it was being restored."""

    code = "file_changed"


class FileStateChanged(Conflict):
    """The files are no longer as the caller saw them."""

    code = "file_state_changed"


@dataclass(frozen=True)
class FilePlan:
    """One path: its state now, what restoring it writes, and how that looks as a diff."""

    key: str
    path: str
    status: Status
    current: FileImage
    result: FileImage
    diff: str
    additions: int
    deletions: int

    def wire(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "path": self.path,
            "status": self.status,
            "additions": self.additions,
            "deletions": self.deletions,
            "diff": self.diff,
        }


def file_key(path: str) -> str:
    """A stable, path-free handle for a file in previews and `force_file_keys`."""
    return hashlib.sha256(path.encode()).hexdigest()[:16]


def read_current(path: str) -> FileImage:
    """The file as it is on disk. Anything but a regular file reads as present without content."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return FileImage(False)
    if not stat.S_ISREG(st.st_mode):
        return FileImage(True, stat.S_IMODE(st.st_mode), None)
    return FileImage(True, stat.S_IMODE(st.st_mode), Path(path).read_bytes())


def plan(spans: Iterable[FileSpan], *, show: Literal["restore", "change"]) -> list[FilePlan]:
    """Classify every span against the disk. `show="restore"` diffs what restoring would do
    (current → result); `"change"` what the agent did (before → after)."""
    out = []
    for span in spans:
        current = read_current(span.path)
        status, result = classify(span, current)
        a, b = (current, result) if show == "restore" else (span.before, span.after)
        d = unified(span.path, a.content if a.exists else None, b.content if b.exists else None)
        out.append(
            FilePlan(
                file_key(span.path),
                span.path,
                status,
                current,
                result,
                d.text,
                d.additions,
                d.deletions,
            )
        )
    return out


def same(a: FileImage, b: FileImage) -> bool:
    """Whether two images are the same file: both absent, or equal content and mode."""
    return a.exists == b.exists and (not a.exists or (a.content, a.mode) == (b.content, b.mode))


def classify(span: FileSpan, current: FileImage) -> tuple[Status, FileImage]:
    """A file's status and what undoing the agent's changes of `span` writes: every run undone,
    newest first, on `current` (see the module docstring)."""
    target = span.before
    if current.exists and current.content is None:
        return "modified", target  # now a directory, socket, symlink…: never merged
    if same(current, target):
        return "ready", target
    result, merged = current, False
    for before, after in reversed(span.runs or ((span.before, span.after),)):
        if same(result, after):
            result = before
            continue
        undone = _merge(after, result, before)
        if undone is None:
            return "modified", target
        result, merged = undone, True
    return ("mergeable" if merged else "ready"), result


def _text(image: FileImage) -> bytes | None:
    """An existing file's content if it is UTF-8 text (only text is merged by lines)."""
    if not image.exists or image.content is None:
        return None
    try:
        image.content.decode()
    except UnicodeDecodeError:
        return None
    return image.content


def _merge(base: FileImage, ours: FileImage, theirs: FileImage) -> FileImage | None:
    """Take one run of the agent's changes (base → theirs reverts it) out of `ours`, if that
    merges cleanly; None when it conflicts or a side is missing or not text."""
    b, o, t = _text(base), _text(ours), _text(theirs)
    if b is None or o is None or t is None:
        return None
    merged = merge_bytes(b, o, t)
    if merged is None:
        return None
    # The mode, like the lines: the agent's change of it is undone unless the user changed it.
    mode = theirs.mode if ours.mode == base.mode else ours.mode
    return FileImage(True, mode, merged)


def state_token(plans: Iterable[FilePlan]) -> str:
    """A digest of every planned file's current state: equal tokens mean untouched files."""
    h = hashlib.sha256()
    for p in sorted(plans, key=lambda p: p.key):
        content = p.current.content
        digest = hashlib.sha256(content).hexdigest() if content is not None else "-"
        h.update(f"{p.key}:{int(p.current.exists)}:{p.current.mode}:{digest}\n".encode())
    return h.hexdigest()


def forced_keys(plans: list[FilePlan], keys: list[str] | None) -> set[str]:
    """`force_file_keys`, each of which must name a planned file."""
    forced = set(keys or ())
    unknown = forced - {p.key for p in plans}
    if unknown:
        raise BadRequest(f"force_file_keys: unknown key(s) {', '.join(sorted(unknown))}")
    return forced


def action(p: FilePlan, forced: set[str]) -> FileAction:
    """What a restore does to a planned file: `restored`, `merged`, and for a file modified
    since the agent, `force_restored` when its key is forced, else `kept` (left alone)."""
    if p.status == "modified":
        return "force_restored" if p.key in forced else "kept"
    return "merged" if p.status == "mergeable" else "restored"


def journal_files(plans: Iterable[FilePlan], forced: set[str]) -> list[JournalFile]:
    """The files a restore writes (all but the kept ones), with their images."""
    out = []
    for p in plans:
        done = action(p, forced)
        if done == "kept":
            continue
        if p.current.exists and p.current.content is None:
            raise FileStateChanged(f"{p.path} is no longer a regular file; it cannot be restored")
        out.append(JournalFile(p.path, p.current, p.result, done))
    return out


def apply(files: list[JournalFile]) -> None:
    """Write every journaled file's target image. Each file is re-read first: if it is no longer
    the image the plan saw, `FileChanged` is raised. On any failure the files already written
    are put back (never the others: they may hold someone's newer edit). Blocking."""
    done: list[JournalFile] = []
    try:
        for f in files:
            assert f.original is not None and f.target is not None
            if not same(read_current(f.path), f.original):
                raise FileChanged(f"{f.path} changed while the files were being restored")
            failpoint("restore_file")
            restore_file(
                Path(f.path), exists=f.target.exists, mode=f.target.mode, content=f.target.content
            )
            done.append(f)
    except BaseException:
        roll_back(done)
        raise


def roll_back(files: Iterable[JournalFile]) -> list[str]:
    """Put journaled files back to their original images, but only those that are exactly as
    the restore left them (a file in any other state was changed since: it is left alone and
    its path returned). Idempotent. Blocking."""
    skipped = []
    for f in files:
        if (
            f.original is None
            or f.target is None
            or (f.original.exists and f.original.content is None)
        ):
            skipped.append(f.path)
            continue
        current = read_current(f.path)
        if same(current, f.original):
            continue
        if not same(current, f.target):
            skipped.append(f.path)
            continue
        restore_file(
            Path(f.path), exists=f.original.exists, mode=f.original.mode, content=f.original.content
        )
    return skipped


def outcome(plans: Iterable[FilePlan], forced: set[str]) -> list[FileOutcome]:
    """Per file, what the restore did: `{path, action}` for the event payload."""
    return [{"path": p.path, "action": action(p, forced)} for p in plans]


async def restore(
    store: Store,
    session: str,
    target_seq: int,
    files: list[JournalFile],
    commit: Callable[[int | None], Awaitable[object]],
) -> None:
    """Journal `files`, write them, then `commit(journal)`: the caller's event, which must
    forget the journal in its own transaction. Any failure puts the written files back; a crash
    leaves the journal for startup recovery. Runs as its own task, so a client that goes away
    mid-way never stops a restore half-done."""

    async def run() -> None:
        journal = await store.begin_restore(session, target_seq, files) if files else None
        try:
            await asyncio.to_thread(apply, files)
        except BaseException:
            if journal is not None:
                await store.finish_journal(journal)
            raise
        try:
            await commit(journal)
        except BaseException:
            await asyncio.to_thread(roll_back, files)
            if journal is not None:
                await store.finish_journal(journal)
            raise

    return await asyncio.shield(asyncio.create_task(run()))
