"""File-change retention: file recovery is not a backup.

For unpinned sessions a file change is kept while it lies within the range of the session's last
`KEEP_USER_MESSAGES` user messages and is younger than `MAX_AGE_DAYS`; older ones are pruned and
blobs nobody references any more are collected. Expiry only ever grows (new user messages and the
clock move forward), which is what lets `foya check` tell a pruned row from a lost one.
"""

from __future__ import annotations

import sqlite3

from app.store import blobs
from app.store.projections import DAY_NS

KEEP_USER_MESSAGES = 100
MAX_AGE_DAYS = 30

# A file change (alias fc) is expired when an older-than-cutoff time or a seq below the
# 100th-newest user message of its session puts it out of range. Shared with `check`.
EXPIRED = f"""(
    (SELECT occurred_at_ns FROM events WHERE seq = fc.event_seq) < :cutoff_ns
    OR fc.event_seq < COALESCE((
        SELECT event_seq FROM message_projection
        WHERE session_id = fc.session_id AND role = 'user'
        ORDER BY event_seq DESC LIMIT 1 OFFSET {KEEP_USER_MESSAGES - 1}
    ), 0)
)"""


def cutoff_ns(now_ns: int) -> int:
    """Changes that occurred before this instant are past the age limit."""
    return now_ns - MAX_AGE_DAYS * DAY_NS


def prune(conn: sqlite3.Connection, now_ns: int) -> int:
    """Delete expired file changes of unpinned sessions and collect blobs; return rows pruned."""
    cur = conn.execute(
        f"DELETE FROM file_changes AS fc WHERE {EXPIRED}"
        " AND fc.session_id IN (SELECT id FROM sessions WHERE pinned_at_ns IS NULL)",
        {"cutoff_ns": cutoff_ns(now_ns)},
    )
    blobs.collect_garbage(conn)
    return cur.rowcount
