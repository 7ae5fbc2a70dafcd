"""The file snapshot (app.store.filesnap): real trees, a real SQLite file, a real extract."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from app.store.filesnap import FILES_DB, SnapshotRefused, extract, sync_tree


def rows(db: Path) -> dict[tuple[str, str], tuple[int, bytes | None]]:
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT root, path, mode, data FROM files").fetchall()
    return {(r, p): (m, d) for r, p, m, d in found}


def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, home = tmp_path / "data", tmp_path / "home" / ".foya"
    (data / "artifacts" / "s1").mkdir(parents=True)
    (data / "artifacts" / "s1" / "a.png").write_bytes(b"\x89PNG fake")
    (data / "connections.json").write_text('{"k": "secret"}')
    (data / "connections.json").chmod(0o600)
    (data / "empty").mkdir(mode=0o750)
    home.mkdir(parents=True)
    (home / "rules.md").write_text("be brief\n")
    return data, home, tmp_path / FILES_DB


def test_scan_stores_files_and_directories_with_modes(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    stats = sync_tree(db, {"data": data, "home": home})
    got = rows(db)
    assert set(got) == {
        ("data", "artifacts"),
        ("data", "artifacts/s1"),
        ("data", "artifacts/s1/a.png"),
        ("data", "connections.json"),
        ("data", "empty"),
        ("home", "rules.md"),
    }
    assert got[("data", "artifacts/s1/a.png")][1] == b"\x89PNG fake"
    assert stat.S_IMODE(got[("data", "connections.json")][0]) == 0o600
    assert stat.S_ISDIR(got[("data", "empty")][0]) and got[("data", "empty")][1] is None
    assert (stats.changed, stats.removed) == (6, 0)
    assert stats.bytes == len(b"\x89PNG fake") + len('{"k": "secret"}') + len("be brief\n")
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_rescan_writes_only_what_changed_and_removes_what_vanished(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    sync_tree(db, {"data": data, "home": home})
    assert sync_tree(db, {"data": data, "home": home}).changed == 0  # nothing changed
    (data / "connections.json").write_text('{"k": "rotated secret"}')
    (home / "rules.md").unlink()
    stats = sync_tree(db, {"data": data, "home": home})
    got = rows(db)
    assert got[("data", "connections.json")][1] == b'{"k": "rotated secret"}'
    assert ("home", "rules.md") not in got
    assert (stats.changed, stats.removed, stats.bytes) == (1, 1, len('{"k": "rotated secret"}'))


def test_mode_change_alone_is_picked_up_without_rewriting_the_blob(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    sync_tree(db, {"data": data, "home": home})
    (data / "artifacts" / "s1" / "a.png").chmod(0o640)
    stats = sync_tree(db, {"data": data, "home": home})
    assert (stats.changed, stats.bytes) == (1, 0)
    mode, blob = rows(db)[("data", "artifacts/s1/a.png")]
    assert stat.S_IMODE(mode) == 0o640 and blob == b"\x89PNG fake"


def test_symlinks_sockets_and_live_files_are_skipped(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "x.txt").write_text("not ours")
    (data / "link-to-dir").symlink_to(outside)
    (data / "link-to-file").symlink_to(outside / "deep" / "x.txt")
    os.mkfifo(data / "fifo")
    live = ("foya.db", "foya.db-wal", "foya.db-shm", "kernel.lock", "kernel.log")
    for name in (*live, "backup-status.json", "replica-files.db", "replica-files.db-wal"):
        (data / name).write_text("live")
    for name in ("exports", "replica", ".foya.db-litestream", ".replica-files.db-litestream"):
        (data / name).mkdir()
        (data / name / "inside").write_text("live")
    (data / ".foya-backup-20261201T000000Z.tar.partial").write_text("half")
    (data / "nested").mkdir()
    (data / "nested" / "foya.db").write_text("only the top-level name is live")
    sync_tree(db, {"data": data, "home": home})
    paths = {p for r, p in rows(db) if r == "data"}
    assert paths == {
        "artifacts",
        "artifacts/s1",
        "artifacts/s1/a.png",
        "connections.json",
        "empty",
        "nested",
        "nested/foya.db",
    }


def test_extract_round_trip_keeps_bytes_modes_and_mtimes(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    os.utime(data / "connections.json", ns=(1_700_000_000_123_456_789,) * 2)
    sync_tree(db, {"data": data, "home": home})
    out = tmp_path / "out"
    written = extract(db, {"data": out / "data", "home": out / "home"})
    assert written == 3
    assert (out / "data" / "artifacts" / "s1" / "a.png").read_bytes() == b"\x89PNG fake"
    assert (out / "home" / "rules.md").read_text() == "be brief\n"
    restored = (out / "data" / "connections.json").stat()
    assert stat.S_IMODE(restored.st_mode) == 0o600
    assert restored.st_mtime_ns == 1_700_000_000_123_456_789
    assert stat.S_IMODE((out / "data" / "empty").stat().st_mode) == 0o750
    only_home = extract(db, {"home": tmp_path / "h2"})
    assert only_home == 1 and not (tmp_path / "h2" / "connections.json").exists()


@pytest.mark.parametrize("evil", ["../escaped", "/tmp/escaped", "a/../../escaped", "./x", ""])
def test_extract_refuses_a_row_whose_path_leaves_its_target(tmp_path: Path, evil: str) -> None:
    data, home, db = tree(tmp_path)
    sync_tree(db, {"data": data, "home": home})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE files SET path = ? WHERE root = 'home' AND path = 'rules.md'", (evil,))
    target = tmp_path / "t" / "inner"
    with pytest.raises(SnapshotRefused, match="unsafe path"):
        extract(db, {"home": target})
    assert not (tmp_path / "t" / "escaped").exists() and not Path("/tmp/escaped").exists()


def test_extract_refuses_tampered_bytes_and_strange_types(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    sync_tree(db, {"data": data, "home": home})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE files SET data = X'00' WHERE path = 'rules.md'")
    with pytest.raises(SnapshotRefused, match="do not match their hash"):
        extract(db, {"home": tmp_path / "h"})
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE files SET mode = ? WHERE path = 'rules.md'", (stat.S_IFLNK | 0o777,))
    with pytest.raises(SnapshotRefused, match="neither a file nor a directory"):
        extract(db, {"home": tmp_path / "h2"})


def test_extract_never_writes_through_a_link_or_over_a_file(tmp_path: Path) -> None:
    data, home, db = tree(tmp_path)
    sync_tree(db, {"data": data, "home": home})
    target, outside = tmp_path / "target", tmp_path / "outside"
    target.mkdir()
    outside.mkdir()
    (target / "artifacts").symlink_to(outside)
    with pytest.raises(SnapshotRefused, match="not a directory"):
        extract(db, {"data": target})
    assert list(outside.iterdir()) == []
    again = tmp_path / "again"
    again.mkdir()
    (again / "rules.md").write_text("already here")
    with pytest.raises(SnapshotRefused, match="exists already"):
        extract(db, {"home": again})
    assert (again / "rules.md").read_text() == "already here"


def test_extract_refuses_what_is_not_a_files_snapshot(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.commit()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\0" + b"\xff" * 4080)
    for db in (other, garbage):
        with pytest.raises(SnapshotRefused, match=r"not a files snapshot|damaged"):
            extract(db, {"data": tmp_path / "out"})
    assert not (tmp_path / "out").exists()
