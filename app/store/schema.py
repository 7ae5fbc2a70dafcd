"""Schema and migrations. `PRAGMA user_version` is the schema version.

Each migration runs in its own transaction together with the version bump. A database whose
version is newer than this code knows is refused untouched (`SchemaTooNew`), never opened.
"""

from __future__ import annotations

import sqlite3

from app.errors import FoyaError


class SchemaTooNew(FoyaError):
    """The database was written by a newer Foya."""

    code = "schema_too_new"


_V1 = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    parent_id TEXT,
    spawned_by_json TEXT,
    agent_ref TEXT,
    agent_name TEXT,
    agent_digest TEXT,
    agent_instructions TEXT,
    allowed_tools_json TEXT,
    agent_max_turns INTEGER,
    phase TEXT NOT NULL DEFAULT 'idle',
    agent_mode TEXT,
    pre_plan_mode TEXT,
    connection_id TEXT,
    model TEXT NOT NULL DEFAULT '',
    reasoning_effort TEXT,
    project_id TEXT,
    approval_mode TEXT NOT NULL DEFAULT 'manual',
    title TEXT,
    title_is_manual INTEGER NOT NULL DEFAULT 0,
    pinned_at_ns INTEGER,
    tasks_json TEXT,
    workspace TEXT,
    created_at_ns INTEGER NOT NULL,
    updated_at_ns INTEGER NOT NULL
);
CREATE INDEX sessions_parent ON sessions(parent_id);
CREATE INDEX sessions_project ON sessions(project_id);

CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    run_id TEXT,
    kind TEXT NOT NULL,
    occurred_at_ns INTEGER NOT NULL,
    payload_json TEXT
);
CREATE INDEX events_session_seq ON events(session_id, seq);

CREATE TABLE message_projection (
    event_seq INTEGER PRIMARY KEY REFERENCES events(seq) ON DELETE CASCADE,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX message_projection_session ON message_projection(session_id, active, event_seq);

CREATE TABLE stream_snapshots (
    session_id TEXT PRIMARY KEY,
    run_id TEXT,
    message_json TEXT NOT NULL,
    updated_at_ns INTEGER NOT NULL
);

CREATE TABLE deleted_sessions (
    session_id TEXT PRIMARY KEY,
    deleted_at_ns INTEGER NOT NULL
);

CREATE TABLE cleanup_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    payload_json TEXT,
    run_after_ns INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE compaction_checkpoints (
    session_id TEXT PRIMARY KEY,
    event_seq INTEGER NOT NULL,
    checkpoint_json TEXT NOT NULL
);

CREATE TABLE context_accepted_boundaries (
    session_id TEXT NOT NULL,
    route TEXT NOT NULL,
    event_seq INTEGER NOT NULL,
    through_seq INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    payload_bytes INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, route)
);

CREATE TABLE file_blobs (
    hash TEXT PRIMARY KEY,
    codec TEXT NOT NULL DEFAULT 'gzip',
    raw_size INTEGER NOT NULL,
    data BLOB NOT NULL
);

CREATE TABLE file_changes (
    event_seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    before_exists INTEGER NOT NULL,
    before_mode INTEGER,
    after_mode INTEGER,
    before_blob_hash TEXT REFERENCES file_blobs(hash),
    after_blob_hash TEXT REFERENCES file_blobs(hash),
    review_state TEXT NOT NULL DEFAULT 'pending'
);
CREATE INDEX file_changes_session ON file_changes(session_id, event_seq);

CREATE TABLE file_rewind_journals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    target_user_seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at_ns INTEGER NOT NULL
);

CREATE TABLE file_rewind_journal_files (
    journal_id INTEGER NOT NULL REFERENCES file_rewind_journals(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    original_exists INTEGER NOT NULL,
    original_mode INTEGER,
    original_blob_hash TEXT REFERENCES file_blobs(hash),
    target_exists INTEGER NOT NULL,
    target_mode INTEGER,
    target_blob_hash TEXT REFERENCES file_blobs(hash),
    action TEXT NOT NULL,
    applied INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (journal_id, path)
);

CREATE TABLE usage_records (
    event_seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    total_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    occurred_at_ns INTEGER NOT NULL
);
CREATE INDEX usage_records_session ON usage_records(session_id, event_seq);

CREATE TABLE usage_daily_ledger (
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    request_count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, model)
);

CREATE TABLE usage_message_daily_ledger (
    day TEXT PRIMARY KEY,
    message_count INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE usage_session_days (
    day TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (day, session_id)
);
"""

# Finding a session's compactions (checkpoint repair) without scanning all its events; a partial
# index costs other kinds nothing.
_V2 = """
CREATE INDEX events_compactions ON events(session_id, seq) WHERE kind = 'compaction_completed';
"""

# Imported sessions: where each came from (the key that makes a re-import add only what is new)
# and the rule its source's system prompt became. Session rows are metadata, not projections.
_V3 = """
ALTER TABLE sessions ADD COLUMN import_source TEXT;
ALTER TABLE sessions ADD COLUMN import_rule TEXT;
CREATE UNIQUE INDEX sessions_import_source ON sessions(import_source)
    WHERE import_source IS NOT NULL;
"""

# Messaging channels (app.kernel.channels): which chat of which channel talks to which session,
# Foya's `channel_conversations`. A session is bound to at most one conversation across every
# channel: the partial unique index holds it (an unbound row has the empty session).
_V4 = """
CREATE TABLE channel_conversations (
    channel_id TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    external_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    active_session_id TEXT NOT NULL DEFAULT '',
    last_seen_at_ns INTEGER NOT NULL,
    updated_at_ns INTEGER NOT NULL,
    PRIMARY KEY (channel_id, conversation_key)
);
CREATE UNIQUE INDEX channel_conversations_session_idx
    ON channel_conversations(active_session_id) WHERE active_session_id != '';
"""

# Messaging channels' conversation runtime (app.kernel.channels.conversation): each chat item
# handled, recorded in the transaction that made it a turn's input, so a redelivery after a crash
# runs nothing twice (`channel_inbound`); and each reply streamed into a chat, so a restart
# finishes the one a crash cut instead of sending it again (`channel_replies`).
_V5 = """
CREATE TABLE channel_inbound (
    channel_id TEXT NOT NULL,
    item_key TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    recorded_at_ns INTEGER NOT NULL,
    PRIMARY KEY (channel_id, item_key)
);
CREATE TABLE channel_replies (
    channel_id TEXT NOT NULL,
    chat TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    from_seq INTEGER NOT NULL,
    message_ids_json TEXT NOT NULL DEFAULT '[]',
    state TEXT NOT NULL,
    updated_at_ns INTEGER NOT NULL,
    PRIMARY KEY (channel_id, run_id)
);
CREATE INDEX channel_replies_open ON channel_replies(channel_id, state);
"""

# Each session's queue is its last `queue_updated` (app.kernel.turns.queue): a start finds them
# without scanning every event.
_V6 = """
CREATE INDEX events_queues ON events(session_id, seq) WHERE kind = 'queue_updated';
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6)
VERSION = len(MIGRATIONS)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def check_version(conn: sqlite3.Connection, schema: str = "main") -> int:
    """Raise `SchemaTooNew` if this code cannot read the database; return its version."""
    current = int(conn.execute(f"PRAGMA {schema}.user_version").fetchone()[0])
    if current > VERSION:
        raise SchemaTooNew(
            f"the database schema is version {current}, but this Foya knows only up to {VERSION}; "
            "upgrade Foya (the database was left untouched)"
        )
    return current


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema up to `VERSION`, one transaction per migration."""
    current = check_version(conn)
    for version in range(current + 1, VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
