"""What a messaging channel's conversation runtime keeps: the chat items it handled
(`channel_inbound`) and the replies it streams into chats (`channel_replies`).

An item that becomes a turn's input is recorded by a `Receipt` written in the very transaction
that makes it one (the turn's opening commit, or the queue's `queue_updated`): both are durable
or neither is, so an item delivered again after a crash either runs nothing (recorded) or runs
once (not recorded). A receipt for an item already recorded fails that transaction
(`AlreadyRecorded`), so even two deliveries racing cannot both start a turn.

A reply row is written before the reply's first message is sent and updated as messages are
added, so a restart knows which platform messages hold an unfinished reply and finishes them
(`state` streaming → done). Functions here run on the store thread; `ChannelLedger` is the
async part of `Store` the kernel calls.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from app.errors import Conflict
from app.store.db import Database


class AlreadyRecorded(Conflict):
    """A chat item was recorded before (its transaction is rolled back)."""

    code = "channel_item_recorded"


@dataclass(frozen=True)
class Receipt:
    """One chat item (`key` of `channel_id`), handled with `outcome` for `session_id`: a
    statement the store adds to the transaction that carries it."""

    channel_id: str
    key: str
    session_id: str = ""
    outcome: str = "turn"


@dataclass(frozen=True)
class ReplyRow:
    """A reply in a chat: the turn (`run_id`, whose `turn_started` is at `from_seq`) it shows
    and the platform's ids of its messages, in order."""

    channel_id: str
    chat: str
    session_id: str
    run_id: str
    from_seq: int
    message_ids: tuple[str, ...]
    state: str


def record(conn: sqlite3.Connection, receipt: Receipt) -> None:
    """Record `receipt`; `AlreadyRecorded` (rolling its transaction back) if it was."""
    if seen(conn, receipt.channel_id, receipt.key):
        raise AlreadyRecorded(f"chat item {receipt.key} of {receipt.channel_id} was recorded")
    conn.execute(
        "INSERT INTO channel_inbound(channel_id, item_key, session_id, outcome, recorded_at_ns)"
        " VALUES (?, ?, ?, ?, ?)",
        (receipt.channel_id, receipt.key, receipt.session_id, receipt.outcome, time.time_ns()),
    )


def seen(conn: sqlite3.Connection, channel_id: str, key: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM channel_inbound WHERE channel_id = ? AND item_key = ?", (channel_id, key)
    ).fetchone()
    return row is not None


_REPLY = "channel_id, chat, session_id, run_id, from_seq, message_ids_json, state"


def _reply(row: tuple[object, ...]) -> ReplyRow:
    ids = tuple(str(i) for i in json.loads(str(row[5])))
    return ReplyRow(
        str(row[0]), str(row[1]), str(row[2]), str(row[3]), int(str(row[4])), ids, str(row[6])
    )


def put_reply(conn: sqlite3.Connection, reply: ReplyRow) -> None:
    conn.execute(
        f"INSERT OR REPLACE INTO channel_replies({_REPLY}, updated_at_ns)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            reply.channel_id,
            reply.chat,
            reply.session_id,
            reply.run_id,
            reply.from_seq,
            json.dumps(list(reply.message_ids)),
            reply.state,
            time.time_ns(),
        ),
    )


def open_replies(conn: sqlite3.Connection, channel_id: str) -> list[ReplyRow]:
    """The channel's replies a crash left unfinished, oldest first."""
    rows = conn.execute(
        f"SELECT {_REPLY} FROM channel_replies WHERE channel_id = ? AND state != 'done'"
        " ORDER BY from_seq",
        (channel_id,),
    )
    return [_reply(tuple(r)) for r in rows]


class ChannelLedger:
    """The store's async part for the channel runtime (a mixin of `Store`)."""

    db: Database

    async def inbound_seen(self, channel_id: str, key: str) -> bool:
        """Whether the chat item `key` of `channel_id` was recorded."""
        return await self.db.read(lambda c: seen(c, channel_id, key))

    async def record_inbound(self, receipt: Receipt) -> None:
        """Record an item that starts no turn (a command, a refusal, a button press)."""
        await self.db.write(lambda c: record(c, receipt))

    async def put_reply(self, reply: ReplyRow) -> None:
        await self.db.write(lambda c: put_reply(c, reply))

    async def open_replies(self, channel_id: str) -> list[ReplyRow]:
        return await self.db.read(lambda c: open_replies(c, channel_id))
