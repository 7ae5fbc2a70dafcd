"""The event store: `<data-dir>/foya.db`, one connection on one thread, which runs every read
and write in order (writes grouped into shared commits: `app.store.db`).

`Store` is the async façade the kernel uses. Every method runs its SQL on the store thread; a
write returns only after the COMMIT that holds it returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from app.events import Checkpoint, Event, EventDraft, FileOutcome, Message, Usage
from app.store import (
    blobs,
    channel_ledger,
    checkpoints,
    filechanges,
    history,
    imports,
    journals,
    recent,
    sessions,
    snapshots,
    usage,
)
from app.store import events as log
from app.store.channel_ledger import ChannelLedger, Receipt
from app.store.conversations import Conversation, Conversations
from app.store.db import Database
from app.store.schema import SchemaTooNew, migrate
from app.store.upkeep import RecoveryReport, Upkeep
from app.store.usage import Boundary

__all__ = ["Boundary", "Conversation", "RecoveryReport", "SchemaTooNew", "Store"]

T = TypeVar("T")
DB_NAME = "foya.db"


class Store(Upkeep, Conversations, ChannelLedger):
    """Facts, projections and session rows (and, from `Upkeep`, recovery and cleanup jobs;
    from `Conversations`, the chats of messaging channels; from `ChannelLedger`, what their
    conversation runtime handled and is replying).

    A write that makes a chat item a turn's input takes its `receipt` and records it in the
    same transaction (`app.store.channel_ledger`)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / DB_NAME
        self.db = Database(self.path)

    def open(self) -> None:
        """Open (creating or migrating) the database. Blocking; raises `SchemaTooNew`."""
        self.db.start(migrate)

    def close(self) -> None:
        """Finish queued work and close the connection."""
        self.db.close()

    async def defer_checkpoints(self) -> None:
        """Leave WAL checkpoints to Litestream while it replicates (app.store.db)."""
        await self.db.defer_checkpoints()

    async def ping(self) -> int:
        """Run a trivial query; returns the head seq."""
        return await self.db.read(log.head_seq)

    # -- facts -----------------------------------------------------------------------------

    async def append(
        self, draft: EventDraft, *, journal: int | None = None, receipt: Receipt | None = None
    ) -> Event:
        """Store one event with its projections; forget a finished file `journal` with it."""

        def run(c: Any) -> Event:
            event = log.append(c, draft)
            if journal is not None:
                journals.finish(c, journal, recorded=True)
            _receive(c, receipt)
            return event

        return await self.db.write(run)

    async def append_all(
        self, drafts: Sequence[EventDraft], *, receipt: Receipt | None = None
    ) -> list[Event]:
        """Store several events atomically, in order."""

        def run(c: Any) -> list[Event]:
            events = log.append_all(c, drafts)
            _receive(c, receipt)
            return events

        return await self.db.write(run)

    async def events_after(
        self, after_seq: int, limit: int = 500, session: str | None = None
    ) -> list[Event]:
        """Stored events after `after_seq` (for replay), oldest first."""
        return await self.db.read(lambda c: log.events_after(c, after_seq, limit, session))

    async def fact_lines(self, session: str, after_seq: int, limit: int) -> tuple[int, list[str]]:
        """A page of a session's stored events as JSON lines (app.store.events.fact_lines)."""
        return await self.db.read(lambda c: log.fact_lines(c, session, after_seq, limit))

    async def head_seq(self) -> int:
        return await self.db.read(log.head_seq)

    async def history(self, session: str, after_seq: int = 0, limit: int = -1) -> list[Message]:
        """Active messages of `session`, paged by seq."""
        return await self.db.read(lambda c: log.history(c, session, after_seq, limit))

    async def history_page(self, session: str, before_seq: int, limit: int) -> list[Message]:
        """The last `limit` active messages before `before_seq`, oldest first."""
        return await self.db.read(lambda c: log.history_page(c, session, before_seq, limit))

    async def active_role(self, session: str, seq: int) -> str:
        """The role of active message `seq`; `MessageNotFound` if it is not active."""
        return await self.db.read(lambda c: history.active_message(c, session, seq))

    async def history_head(self, session: str) -> int:
        return await self.db.read(lambda c: log.history_head(c, session))

    async def recent_messages(self, after_seq: int, limit: int) -> list[recent.RecentMessage]:
        """User and assistant messages of top-level sessions after `after_seq`, across
        sessions, oldest first (what background memory maintenance reads)."""
        return await self.db.read(lambda c: recent.messages_after(c, after_seq, limit))

    # -- history operations ------------------------------------------------------------------

    async def rewind(
        self,
        session: str,
        target_user_seq: int,
        expected_head_seq: int,
        files: list[FileOutcome] | None = None,
        journal: int | None = None,
    ) -> Event:
        return await self.db.write(
            lambda c: history.rewind(c, session, target_user_seq, expected_head_seq, files, journal)
        )

    async def check_rewind(self, session: str, target_user_seq: int, expected_head: int) -> None:
        """Raise unless a rewind to `target_user_seq` at history head `expected_head` is valid."""
        await self.db.read(
            lambda c: history.check_rewind(c, session, target_user_seq, expected_head)
        )

    # -- files -----------------------------------------------------------------------------------

    async def file_spans(
        self, session: str, *, from_seq: int = 0, pending_only: bool = False
    ) -> list[filechanges.FileSpan]:
        """Per path: the file before the first and after the last change since `from_seq`."""
        return await self.db.read(
            lambda c: filechanges.spans(c, session, from_seq=from_seq, pending_only=pending_only)
        )

    async def begin_restore(
        self, session: str, target_user_seq: int, files: list[journals.JournalFile]
    ) -> int:
        """Journal a multi-file restore before any file is written; returns the journal id."""
        return await self.db.write(
            lambda c: journals.create(c, session, target_user_seq, files, time.time_ns())
        )

    async def imported(self, sources: Sequence[str]) -> dict[str, tuple[str, set[str]]]:
        """Which of these import sources are stored: their sessions and imported source ids."""
        return await self.db.read(lambda c: imports.known(c, sources))

    async def store_import(self, plans: Sequence[imports.ImportPlan]) -> list[Event]:
        """Create and fill imported sessions, all in one transaction."""
        return await self.db.write(lambda c: imports.store(c, plans))

    async def blobs(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The contents of stored file blobs, verified against their hashes."""
        return await self.db.read(lambda c: {key: blobs.get(c, key) for key in keys})

    async def fork(
        self,
        source: str,
        new_row: dict[str, Any],
        through_seq: int | None,
        forked_at: str,
        rename_attachment: Callable[[str], str] = str,
    ) -> list[Event]:
        return await self.db.write(
            lambda c: history.fork(c, source, new_row, through_seq, forked_at, rename_attachment)
        )

    async def delete_session(self, session: str) -> int:
        """Delete the session's facts; returns the cleanup job for its directories."""
        return await self.db.write(lambda c: history.delete_session(c, session, time.time_ns()))

    async def source_digest(self, session: str, through_seq: int) -> str:
        """The digest a checkpoint covering the active messages up to `through_seq` must carry."""
        return await self.db.read(lambda c: checkpoints.source_digest(c, session, through_seq))

    async def checkpoint(self, session: str) -> Checkpoint | None:
        """The session's valid compaction checkpoint (repaired or dropped if broken).

        A read in the common case; a write only when the projection needs repair."""
        found = await self.db.read(lambda c: checkpoints.current(c, session))
        if not isinstance(found, checkpoints.Repair):
            return found
        return await self.db.write(lambda c: checkpoints.load(c, session))

    # -- sessions ------------------------------------------------------------------------------

    async def create_session(self, row: dict[str, Any]) -> None:
        await self.db.write(lambda c: sessions.insert(c, row))

    async def update_session(
        self,
        session: str,
        fields: dict[str, Any],
        updated: Callable[[dict[str, Any]], EventDraft],
        then: Sequence[EventDraft] = (),
        before: Sequence[EventDraft] = (),
        receipt: Receipt | None = None,
    ) -> list[Event]:
        """In one transaction: append `before`, update the session row, append
        `updated(new row)` (the `session_updated` fact), then the drafts in `then`."""

        def run(c: Any) -> list[Event]:
            out = [log.append(c, d) for d in before]
            if not sessions.update(c, session, fields):
                log.require_live_session(c, session)
            row = sessions.get(c, session)
            assert row is not None
            out = [*out, log.append(c, updated(row)), *(log.append(c, d) for d in then)]
            _receive(c, receipt)
            return out

        return await self.db.write(run)

    async def sessions_using(self, connection_id: str) -> list[str]:
        """Ids of sessions bound to a connection."""
        return await self.db.read(lambda c: sessions.using_connection(c, connection_id))

    async def get_session(self, session: str) -> dict[str, Any] | None:
        return await self.db.read(lambda c: sessions.get(c, session))

    async def list_sessions(
        self, *, parent_id: str | None = None, project_id: str | None = None
    ) -> list[dict[str, Any]]:
        return await self.db.read(
            lambda c: sessions.list_rows(c, parent_id=parent_id, project_id=project_id)
        )

    # -- usage ---------------------------------------------------------------------------------

    async def last_usage(self, session: str) -> Usage | None:
        return await self.db.read(lambda c: usage.last_request(c, session))

    async def request_inputs(
        self, session: str, route: str
    ) -> tuple[Checkpoint | None, list[Message], Boundary | None]:
        """What a model request is built from, in one read: the valid checkpoint, the active
        messages after it and the last accepted request of `route`. One trip to the store
        thread instead of three, on the path to a turn's first delta."""

        def run(c: Any) -> Any:
            found = checkpoints.current(c, session)
            if isinstance(found, checkpoints.Repair):
                return None
            after = int(found["through_seq"]) if found else 0
            return found, log.history(c, session, after, -1), usage.boundary(c, session, route)

        read = await self.db.read(run)
        if read is None:  # the checkpoint projection needs repair: a write, then read again
            found = await self.checkpoint(session)
            after = int(found["through_seq"]) if found else 0
            return found, await self.history(session, after), await self.boundary(session, route)
        found, history, accepted = read
        return found, history, accepted

    async def boundary(self, session: str, route: str) -> Boundary | None:
        """The last accepted request of (session, route): through_seq and its real usage."""
        return await self.db.read(lambda c: usage.boundary(c, session, route))

    async def usage_ledgers(self, since_day: str) -> tuple[Any, Any, Any]:
        """(tokens per day and model, user messages per day, sessions per day) since a day."""
        return await self.db.read(lambda c: usage.ledgers(c, since_day))

    # -- stream snapshots ------------------------------------------------------------------------

    async def put_snapshot(self, session: str, run_id: str, message: Message) -> None:
        """Replace the session's partial-message snapshot."""
        await self.db.write(lambda c: snapshots.put(c, session, run_id, message, time.time_ns()))


def _receive(conn: Any, receipt: Receipt | None) -> None:
    """Record a chat item's receipt as one more statement of the caller's transaction."""
    if receipt is not None:
        channel_ledger.record(conn, receipt)
