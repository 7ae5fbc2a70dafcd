"""The chats of messaging channels and the sessions they talk to (`channel_conversations`).

A row is one conversation of one channel (`channel_id`, `conversation_key`); its
`active_session_id` is the session it talks to, or empty. A session is bound to at most one
conversation across every channel (a partial unique index, and `bind` clearing the session
from every other row in the same transaction). Unbinding blanks the session and keeps the row;
rows go only with their channel. Functions here run on the store thread; `Conversations` is
the async part of `Store` the kernel calls.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from app.store.db import Database

_COLUMNS = (
    "channel_id, conversation_key, kind, external_id, display_name, active_session_id,"
    " last_seen_at_ns, updated_at_ns"
)


@dataclass(frozen=True)
class Conversation:
    """One row: times in Unix nanoseconds; `active_session_id` empty when unbound."""

    channel_id: str
    conversation_key: str
    kind: str
    external_id: str
    display_name: str
    active_session_id: str
    last_seen_at_ns: int
    updated_at_ns: int


def _one(conn: sqlite3.Connection, where: str, args: tuple[str, ...]) -> Conversation | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM channel_conversations WHERE {where}", args)
    found = row.fetchone()
    return None if found is None else Conversation(*found)


def conversation(conn: sqlite3.Connection, channel_id: str, key: str) -> Conversation | None:
    return _one(conn, "channel_id = ? AND conversation_key = ?", (channel_id, key))


def bound_to(conn: sqlite3.Connection, session: str) -> Conversation | None:
    """The conversation bound to `session`, if any."""
    return _one(conn, "active_session_id = ? AND active_session_id != ''", (session,))


def _key_fields(item: Conversation) -> tuple[str, ...]:
    return item.channel_id, item.conversation_key, item.kind, item.external_id, item.display_name


def bind(conn: sqlite3.Connection, item: Conversation, now: int) -> Conversation:
    """Record the conversation (Foya's `Observe`: a new display name only if not empty) and
    bind it to `item.active_session_id`, which no other conversation keeps."""
    conn.execute(
        f"INSERT INTO channel_conversations({_COLUMNS}) VALUES (?, ?, ?, ?, ?, '', ?, ?)"
        " ON CONFLICT(channel_id, conversation_key) DO UPDATE SET kind = excluded.kind,"
        " external_id = excluded.external_id, last_seen_at_ns = excluded.last_seen_at_ns,"
        " display_name = CASE WHEN excluded.display_name != '' THEN excluded.display_name"
        " ELSE display_name END",
        (*_key_fields(item), now, now),
    )
    session = item.active_session_id
    conn.execute(
        "UPDATE channel_conversations SET active_session_id = '', updated_at_ns = ?"
        " WHERE active_session_id = ? AND NOT (channel_id = ? AND conversation_key = ?)",
        (now, session, item.channel_id, item.conversation_key),
    )
    conn.execute(
        "UPDATE channel_conversations SET active_session_id = ?, updated_at_ns = ?"
        " WHERE channel_id = ? AND conversation_key = ?",
        (session, now, item.channel_id, item.conversation_key),
    )
    found = conversation(conn, item.channel_id, item.conversation_key)
    assert found is not None
    return found


def unbind_session(conn: sqlite3.Connection, session: str, now: int) -> int:
    """Blank `session` wherever it is bound; how many rows changed."""
    if not session:
        return 0
    cursor = conn.execute(
        "UPDATE channel_conversations SET active_session_id = '', updated_at_ns = ?"
        " WHERE active_session_id = ?",
        (now, session),
    )
    return cursor.rowcount


def delete_channel(conn: sqlite3.Connection, channel_id: str) -> int:
    """Remove every conversation of a channel; how many."""
    cursor = conn.execute("DELETE FROM channel_conversations WHERE channel_id = ?", (channel_id,))
    return cursor.rowcount


class Conversations:
    """The store's async part for channel conversations (a mixin of `Store`)."""

    db: Database

    async def conversation(self, channel_id: str, key: str) -> Conversation | None:
        return await self.db.read(lambda c: conversation(c, channel_id, key))

    async def conversation_of(self, session: str) -> Conversation | None:
        """The conversation bound to `session`, if any."""
        return await self.db.read(lambda c: bound_to(c, session))

    async def bind_conversation(self, item: Conversation) -> Conversation:
        """Record `item` and bind it to its session (unbinding that session elsewhere)."""
        return await self.db.write(lambda c: bind(c, item, time.time_ns()))

    async def unbind_conversations(self, session: str) -> int:
        return await self.db.write(lambda c: unbind_session(c, session, time.time_ns()))

    async def delete_conversations(self, channel_id: str) -> int:
        return await self.db.write(lambda c: delete_channel(c, channel_id))
