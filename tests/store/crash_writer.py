"""Crash-test writer: append to a real store from concurrent tasks until killed.

Usage: python crash_writer.py DATA_DIR [TASKS]

Opens `Store(DATA_DIR)`, creates session `crash`, then runs TASKS asyncio tasks that append
`message_end` events in a loop (user, assistant and tool messages; every tool message carries a
file change and its blobs, some shared between tasks). Concurrent tasks make the store thread
commit their writes together (group commit). After EACH acknowledged append (its future resolved,
so the COMMIT holding it returned) the task writes the event's seq as one line to stdout and
flushes. The test SIGKILLs this process at a random moment and checks every printed seq.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
from pathlib import Path

from app import events as k
from app.events import EventDraft, FileChange, Message
from app.store import Store

SESSION = "crash"
SHARED = b"shared file contents\n" * 20


def draft(task: int, i: int) -> EventDraft:
    kind = i % 3
    if kind == 0:
        return EventDraft(SESSION, k.MESSAGE_END, {"role": "user", "content": f"t{task} u{i}"})
    if kind == 1:
        return EventDraft(
            SESSION, k.MESSAGE_END, {"role": "assistant", "content": f"t{task} a{i}"}, run_id="r"
        )
    own = f"task {task} write {i}\n".encode()
    before = SHARED if i % 2 else None
    blobs = {hashlib.sha256(b).hexdigest(): b for b in (own, before) if b is not None}
    change: FileChange = {
        "path": f"/w/t{task}.txt",
        "before_exists": before is not None,
        "before_mode": 0o644 if before is not None else None,
        "after_mode": 0o644,
        "before_blob": hashlib.sha256(before).hexdigest() if before is not None else None,
        "after_blob": hashlib.sha256(own).hexdigest(),
    }
    payload: Message = {"role": "tool", "content": "edited", "file_change": change}
    return EventDraft(SESSION, k.MESSAGE_END, payload, blobs=blobs)


async def writer(store: Store, task: int) -> None:
    out = sys.stdout
    i = 0
    while True:
        event = await store.append(draft(task, i))
        out.write(f"{event.seq}\n")
        out.flush()
        i += 1


async def main(data_dir: Path, tasks: int) -> None:
    store = Store(data_dir)
    store.open()
    now = time.time_ns()
    await store.create_session({"id": SESSION, "created_at_ns": now, "updated_at_ns": now})
    await asyncio.gather(*(writer(store, t) for t in range(tasks)))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8))
