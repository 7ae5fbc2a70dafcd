"""Files on disk that nothing owns any more: what `foya check` reports and `--repair` removes,
and the staging leftovers the kernel sweeps at start.

Owned directories, one per owner, directly under their root:

    <data-dir>/artifacts/<session>/      a session's attachments   (owner: a `sessions` row)
    <data-dir>/workspaces/<session>/     its managed workspace     (owner: a `sessions` row)
    <data-dir>/canvas-assets/<canvas>/   a canvas's assets         (owner: canvases.json)

A directory there whose owner is gone is an orphan: left by a crash between making it and
committing its owner, or by a removal a crash cut short. Staging is disposable by convention
(`app.staging`): every entry of `<root>/.staging/` of the data directory, the plugin and the
marketplace directories, the canvas upload staging, and the `.<kind>-<random>` directories
(`tempfile.mkdtemp`) that plugin installs staged in before staging had one home.

Safety rules of the scan: only entries directly under those roots, never through a symbolic
link (a link is neither reported nor followed); an owner list that cannot be read (no sessions
table, an unreadable canvases.json) reports nothing for its roots rather than everything.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from app.staging import STAGING, sweep

ARTIFACTS = "artifacts"
WORKSPACES = "workspaces"
CANVAS_ASSETS = "canvas-assets"
CANVASES_FILE = "canvases.json"
CANVAS_STAGING = ".incoming"
# What `tempfile.mkdtemp(prefix=".install-")` and its siblings made (8 chars of [a-z0-9_]).
LEGACY_STAGING = re.compile(r"\.(install|download|preview|marketplace|register)-[a-z0-9_]{8}")
# Owner ids name directories: plain names only (session ids and canvas ids both fit).
_OWNER_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Orphan:
    """One directory (or staging entry) nothing owns; `kind` says which rule found it."""

    kind: str  # "artifacts", "workspace", "canvas-assets" or "staging"
    path: Path

    def describe(self) -> str:
        return f"orphan {self.kind}: {self.path}"


def live_session_ids(db_path: Path) -> frozenset[str] | None:
    """Every session id the database at `db_path` holds (None: it cannot be read)."""
    try:
        conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        return frozenset(str(row[0]) for row in conn.execute("SELECT id FROM sessions"))
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def live_canvas_ids(data_dir: Path) -> frozenset[str] | None:
    """The ids of the canvases in `canvases.json` (none if it is missing; None: unreadable)."""
    try:
        raw = json.loads((data_dir / CANVASES_FILE).read_bytes())
    except FileNotFoundError:
        return frozenset()
    except (OSError, ValueError):
        return None
    if not isinstance(raw, list):
        return None
    ids = [doc.get("id") for doc in raw if isinstance(doc, dict)]
    if len(ids) != len(raw) or not all(isinstance(i, str) for i in ids):
        return None  # not the shape the kernel writes: do not guess which assets are owned
    return frozenset(str(i) for i in ids)


def staging_leftovers(root: Path, *, legacy: bool = True) -> list[Path]:
    """The disposable entries of `root`: everything in `root/.staging/`, and (`legacy`, for the
    plugin and marketplace directories) legacy staging directories directly in `root`."""
    found = [Path(e.path) for e in _entries(root / STAGING)]
    if not legacy:
        return found
    found += [
        Path(e.path)
        for e in _entries(root)
        if LEGACY_STAGING.fullmatch(e.name) and e.is_dir(follow_symlinks=False)
    ]
    return found


def sweep_leftovers(root: Path) -> list[Path]:
    """Delete what `staging_leftovers(root)` lists (at start, before anything stages there);
    return what was removed."""
    removed = sweep(root)
    for path in staging_leftovers(root):
        if path.parent == root and _remove(path):
            removed.append(path)
    return removed


def find(data_dir: Path, db_path: Path, foya_home: Path) -> list[Orphan]:
    """Every orphan of the data directory and of `foya_home` (`~/.foya`), by path."""
    found: list[Orphan] = []
    sessions = live_session_ids(db_path)
    if sessions is not None:
        found += _unowned(data_dir / ARTIFACTS, sessions, "artifacts")
        found += _unowned(data_dir / WORKSPACES, sessions, "workspace")
    canvases = live_canvas_ids(data_dir)
    if canvases is not None:
        found += _unowned(data_dir / CANVAS_ASSETS, canvases, "canvas-assets")
    incoming = data_dir / CANVAS_ASSETS / CANVAS_STAGING
    if not incoming.is_symlink():  # its entries: the directory itself may stay, empty
        found += [Orphan("staging", Path(e.path)) for e in _entries(incoming)]
    found += [Orphan("staging", p) for p in staging_leftovers(data_dir, legacy=False)]
    for root in (foya_home / "plugins", foya_home / "marketplaces"):
        found += [Orphan("staging", p) for p in staging_leftovers(root)]
    return sorted(found, key=lambda o: str(o.path))


def remove(orphans: list[Orphan]) -> list[Orphan]:
    """Delete exactly these entries (links themselves, never what they point to); return the
    ones that are gone."""
    return [o for o in orphans if _remove(o.path)]


def _unowned(root: Path, owners: frozenset[str], kind: str) -> list[Orphan]:
    return [
        Orphan(kind, Path(e.path))
        for e in _entries(root)
        if e.is_dir(follow_symlinks=False) and _OWNER_ID.fullmatch(e.name) and e.name not in owners
    ]


def _entries(root: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(root) as it:
            return sorted(it, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _remove(path: Path) -> bool:
    """Remove a directory tree (rmtree does not follow links inside it) or a single entry."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            path.unlink()
    return not os.path.lexists(path)
