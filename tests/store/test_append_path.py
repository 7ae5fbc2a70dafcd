"""The append path's short cuts keep their guarantees: the live-session check that rides on the
events insert, and `Database.read`/`write` handing back the job's future itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app import events as k
from app.events import EventDraft
from app.store import Store
from app.store.db import StoreClosed
from app.store.events import SessionDeleted, SessionNotFound

from .conftest import count, run, say, session_row, tool_change, user


def test_append_with_blobs_to_unknown_session_stores_nothing(store: Store) -> None:
    msg, blobs = tool_change("/w/x", b"after", b"before")
    with pytest.raises(SessionNotFound):
        say(store, "nope", msg, blobs=blobs)
    assert count(store, "events") == 0
    assert count(store, "file_blobs") == 0


def test_append_after_delete_is_refused_in_a_group_commit(store: Store) -> None:
    """A batch where one write targets a deleted session: that write fails alone."""
    for sid in ("a", "b"):
        run(store.create_session(session_row(sid)))
    run(store.delete_session("b"))

    async def both() -> tuple[object, ...]:
        return await asyncio.gather(
            store.append(EventDraft("a", k.MESSAGE_END, user())),
            store.append(EventDraft("b", k.MESSAGE_END, user())),
            store.append(EventDraft("a", k.MESSAGE_END, user("again"))),
            return_exceptions=True,
        )

    first, refused, last = run(both())
    assert isinstance(refused, SessionDeleted)
    assert not isinstance(first, BaseException) and not isinstance(last, BaseException)
    assert count(store, "events", "session_id = ?", ("a",)) == 2
    assert count(store, "events", "session_id = ?", ("b",)) == 0


def test_write_hands_back_an_awaitable_future(store: Store) -> None:
    async def go() -> int:
        future = store.db.write(lambda c: int(c.execute("SELECT 41 + 1").fetchone()[0]))
        assert isinstance(future, asyncio.Future)
        return await future

    assert run(go()) == 42


def test_cancelled_write_still_commits_and_leaves_the_store_usable(store: Store) -> None:
    run(store.create_session(session_row("a")))

    async def go() -> int:
        future = store.db.write(
            lambda c: c.execute("UPDATE sessions SET title = 't' WHERE id = 'a'").rowcount
        )
        future.cancel()
        # The job was queued before the cancel: it runs; its outcome is dropped.
        return await store.db.read(
            lambda c: int(c.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        )

    assert run(go()) == 1
    got = run(store.get_session("a"))
    assert got is not None and got["title"] == "t"


def test_submit_after_close_raises(data_dir: Path) -> None:
    store = Store(data_dir)
    store.open()
    store.close()

    async def go() -> None:
        await store.db.write(lambda c: c.execute("SELECT 1"))

    with pytest.raises(StoreClosed):
        run(go())
    with pytest.raises(StoreClosed):
        store.db.call(lambda c: c.execute("SELECT 1"))
