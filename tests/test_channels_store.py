"""The channels' storage: the `channel_conversations` table arrives by migration (an existing
database of the version before upgrades with its data kept), its one-to-one rule holds in
SQLite itself, and the catalog file names the root checks at start are the catalog's own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.kernel.channels import catalog
from app.kernel.wiring import ondisk
from app.store import Store, schema

CHANNELS_VERSION = 4  # the schema version that added channel_conversations


def old_database(path: Path, version: int) -> None:
    """A database as a Foya of schema `version` left it, with one session."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for script in schema.MIGRATIONS[:version]:
            conn.executescript(script)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("INSERT INTO sessions(id, created_at_ns, updated_at_ns) VALUES ('old', 1, 1)")
    finally:
        conn.close()


def test_a_database_of_the_previous_version_gains_the_conversations_table(
    tmp_path: Path,
) -> None:
    assert schema.VERSION >= CHANNELS_VERSION
    data = tmp_path / "data"
    data.mkdir()
    old_database(data / "foya.db", CHANNELS_VERSION - 1)
    store = Store(data)
    store.open()
    try:
        version = store.db.call(lambda c: c.execute("PRAGMA user_version").fetchone()[0])
        assert version == schema.VERSION
        assert store.db.call(lambda c: c.execute("SELECT id FROM sessions").fetchall()) == [
            ("old",)
        ]
        columns = store.db.call(
            lambda c: [r[1] for r in c.execute("PRAGMA table_info(channel_conversations)")]
        )
        assert columns == [
            *("channel_id", "conversation_key", "kind", "external_id", "display_name"),
            *("active_session_id", "last_seen_at_ns", "updated_at_ns"),
        ]
    finally:
        store.close()


def test_sqlite_itself_refuses_one_session_in_two_chats(tmp_path: Path) -> None:
    path = tmp_path / "foya.db"
    old_database(path, schema.VERSION)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        insert = "INSERT INTO channel_conversations VALUES (?, ?, 'private', 'x', '', ?, 1, 1)"
        conn.execute(insert, ("c", "chat:1", "s"))
        conn.execute(insert, ("c", "chat:2", ""))
        conn.execute(insert, ("d", "chat:3", ""))  # unbound rows share the empty session
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(insert, ("d", "chat:4", "s"))
    finally:
        conn.close()


def test_the_root_checks_the_catalogs_own_file_names() -> None:
    assert set(ondisk.CHANNEL_CATALOGS) == {name for name, _ in catalog.FILES.values()}
