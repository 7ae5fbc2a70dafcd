"""Changing a workspace by hand: create a file or a directory, rename, delete; and resolving a
path to where it is on disk. Path rules and errors: app.kernel.workspace.paths.

Each change is one system call the file system makes atomic (an exclusive create, `mkdir`,
`rename`), then the directory is synced, so a crash leaves the entry either as it was or as
asked; a directory is deleted with everything in it, as Foya deletes it (not to a trash).
These are the user's own changes: like an edit in any editor they are not the agent's, so file
review and rewind never list or undo them, and an agent's later change of the same file is
recorded from what the user left (app.kernel.workspace has the why).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from app.files import ProtectedPaths, fsync_dir
from app.kernel.workspace.paths import (
    WorkspaceEntryExists,
    existing,
    new,
    refuse_holders,
    refuse_names,
    relative,
    valid_name,
)


def create(root: Path, rel: str, directory: bool, protected: ProtectedPaths) -> str:
    """Create an empty file or a directory at `rel` (modes from the umask, as an editor's);
    its relative path. Blocking."""
    target = new(root, rel, protected)
    refuse_names(relative(root, target))
    try:
        if directory:
            os.mkdir(target, 0o777)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
    except FileExistsError:  # made by someone else since `new` looked
        raise WorkspaceEntryExists(f"{rel} already exists in the workspace") from None
    fsync_dir(target.parent)
    return relative(root, target)


def rename(root: Path, rel: str, new_name: str, protected: ProtectedPaths) -> str:
    """Give the entry at `rel` the name `new_name` in the same directory; its new relative
    path. Blocking."""
    entry = existing(root, rel, protected)
    refuse_names(relative(root, entry))
    refuse_holders(rel, entry, protected)
    destination = entry.parent / valid_name(new_name)
    refuse_names(relative(root, destination))
    if os.path.lexists(destination):
        raise WorkspaceEntryExists(f"{new_name} already exists beside {rel}")
    os.rename(entry, destination)
    fsync_dir(entry.parent)
    return relative(root, destination)


def delete(root: Path, rel: str, protected: ProtectedPaths) -> None:
    """Delete the entry at `rel`, a directory with its contents. Blocking."""
    entry = existing(root, rel, protected)
    refuse_names(relative(root, entry))
    refuse_holders(rel, entry, protected)
    if entry.is_dir():  # `existing` refused a link, so this is the directory itself
        shutil.rmtree(entry)  # never follows a link inside (fd-based on Linux)
    else:
        entry.unlink()
    fsync_dir(entry.parent)


def resolve(root: Path, rel: str, protected: ProtectedPaths) -> str:
    """Where `rel` is on disk: the workspace root for an empty path, else the existing
    entry's absolute path (its parents' links resolved). Blocking."""
    if not rel.strip():
        return str(root.resolve())
    return str(existing(root, rel, protected))
