"""Finishing the replies a crash (or a channel's restart) cut: each reply row not `done`.

The turn it shows is read back from the log from its `turn_started` on: the assistant's stored
messages, an `error`, and its `turn_complete` (after a crash the store's recovery has closed
the turn as failed/interrupted, keeping the text streamed before it). A closed turn's messages
are edited to its final text; a turn still running (the channel restarted, the kernel did not)
is handed back to be followed live. Nothing is sent again that was sent before: the row names
the messages to edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app import events as k
from app.kernel.channels.conversation_follow import content, final_text
from app.kernel.channels.conversation_parts import QueuesPort
from app.kernel.channels.replies import Reply, Shape, Writer
from app.kernel.channels.texts import Texts
from app.store import Store
from app.store.channel_ledger import ReplyRow

PAGE = 500


@dataclass
class Run:
    """What the log says of a reply's turn."""

    said: list[str]
    error: str
    done: dict[str, Any] | None


async def read_run(store: Store, row: ReplyRow) -> Run:
    """The turn of `row`, read from its `turn_started` to its `turn_complete` (or the end)."""
    run = Run([], "", None)
    after = row.from_seq - 1
    while run.done is None:
        page = await store.events_after(after, PAGE, row.session_id)
        if not page:
            break
        after = page[-1].seq
        for event in page:
            if event.run_id != row.run_id:
                continue
            if event.kind == k.MESSAGE_END and event.payload.get("role") == "assistant":
                if content(event.payload).strip():
                    run.said.append(content(event.payload))
            elif event.kind == k.ERROR:
                run.error = str(event.payload)
            elif event.kind == k.TURN_COMPLETE:
                run.done = dict(event.payload)
                break
    return run


@dataclass
class Unfinished:
    """A reply whose turn still runs: to be continued by the chat's follower."""

    reply: Reply
    said: list[str]


async def finish_open(
    channel_id: str,
    store: Store,
    writer: Callable[[str], Writer],
    texts: Texts,
    max_text: int,
    running: Callable[[str], bool],
) -> list[Unfinished]:
    """Finish every unfinished reply of the channel whose turn has ended; the others."""
    left: list[Unfinished] = []
    for row in await store.open_replies(channel_id):
        run = await read_run(store, row)
        shape = Shape("\n\n".join(run.said))
        reply = Reply(writer(row.chat), store, row, max_text, shape)
        if run.done is None and running(row.session_id):
            left.append(Unfinished(reply, run.said))
            continue
        done = run.done or {"status": "failed", "reason": "interrupted"}
        await reply.close(final_text(texts, run.said, done, run.error))
    return left


async def restored(channel_id: str, store: Store, queues: QueuesPort) -> list[tuple[str, str, int]]:
    """(chat, session, seq) of each chat of the channel whose session's queue a start put back
    (`Queues.restored`): its follower replays from that seq, so a queued message whose turn ran
    before the channel was up is shown too. Each is taken once, by its channel."""
    found = []
    for session, seq in list(queues.restored.items()):
        bound = await store.conversation_of(session)
        if bound is not None and bound.channel_id == channel_id:
            del queues.restored[session]
            found.append((bound.external_id, session, seq))
    return found
