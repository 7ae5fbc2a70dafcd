"""A child session and its one turn: created from the parent and the agent's definition, run
like any session's turn, followed to its `turn_complete`.

The child copies its parent's connection, reasoning effort, project and approval mode; its model
is the definition's, else the parent's. Its row keeps Foya's agent columns (`agent_ref`,
`agent_name`, `agent_digest`, `agent_instructions`, `allowed_tools_json`: the definition's tools,
else the worker's, `agent_max_turns`: the definition's, else 20) and `spawned_by` (the root run
and the parent's tool call). It gets a title (`<agent>: <task>`) so no title request is spent on
it. Without a project it works in a managed workspace of its own.

Its turn is followed through the session's stored events (replay, then live: `SessionStream`),
so a follower cut off by the broker resumes from the store without missing one; each
`usage_updated` is reported as it comes (the tree's token budget). The answer is the last
non-empty assistant message. A child whose turn ended without one failed, as in Foya.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from app import events as k
from app.broker import Broker
from app.errors import NotFound
from app.events import Event
from app.kernel.agents.definitions import WORKER, Definition
from app.kernel.agents.runs import AgentRun
from app.kernel.emit import topic
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.kernel.streams import SessionStream
from app.kernel.turns.control import TurnControl
from app.kernel.turns.inputs import TurnInput
from app.tools.base import settled

DEFAULT_MAX_TURNS = 20
DEFAULT_TIMEOUT = 15 * 60.0
STOP_WAIT = 10.0  # how long a stopped child's turn may take to record its end
TITLE_CHARS = 80
NO_ANSWER = "sub-agent completed without a final answer"

Usage = Callable[[int], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    status: Literal["completed", "failed", "cancelled"]
    output: str = ""
    error: str = ""


class ChildGone(Exception):
    """The child's event topic ended: its session was deleted, or the kernel is stopping."""


@dataclass
class _Watch:
    """What has been seen of the child's turn so far."""

    usage: Usage
    cursor: int = 0
    error: str = ""
    done: dict[str, Any] | None = None

    async def see(self, event: Event) -> None:
        self.cursor = max(self.cursor, event.seq)
        if event.kind == k.USAGE_UPDATED:
            await self.usage(int(event.payload.get("total_tokens") or 0))
        elif event.kind == k.ERROR:
            self.error = str(event.payload)
        elif event.kind == k.TURN_COMPLETE:
            self.done = dict(event.payload)


class Children:
    """Creates child sessions and runs their turn."""

    def __init__(self, sessions: Sessions, broker: Broker, turns: TurnControl) -> None:
        self.sessions = sessions
        self.store = sessions.store
        self.broker = broker
        self.turns = turns
        self.stopping = False  # the kernel is going down: its runner stops every turn itself

    async def create(self, parent: SessionRow, run: AgentRun, definition: Definition) -> str:
        """A new child session of `parent` for `run`; its id."""
        spawned_by = {
            "parent_run_id": run.root_run_id,
            "parent_tool_call_id": run.parent_tool_call_id,
        }
        return await self.sessions.insert(
            {
                "parent_id": parent["id"],
                "spawned_by_json": json.dumps(spawned_by),
                "agent_ref": definition.ref,
                "agent_name": definition.name,
                "agent_digest": definition.digest,
                "agent_instructions": definition.body,
                "allowed_tools_json": json.dumps(list(definition.tools or WORKER.tools)),
                "agent_max_turns": definition.max_turns or DEFAULT_MAX_TURNS,
                "connection_id": parent["connection_id"],
                "model": definition.model or parent["model"],
                "reasoning_effort": parent["reasoning_effort"],
                "project_id": parent["project_id"],
                "approval_mode": parent["approval_mode"],
                "title": title(definition.name, run.task),
            }
        )

    async def run(self, child: str, message: str, limit: float, usage: Usage) -> Outcome:
        """Run the child's turn on `message` to its end (at most `limit` seconds, then it
        is stopped and failed). A cancel stops the child's turn, waits for it to record its
        end, and goes on."""
        watch = _Watch(usage)
        try:
            # Inside the try: a cancel that comes while the turn is being opened (its first
            # request may be out already) must stop that turn too, once it has opened.
            await settled(self.turns.submit(child, TurnInput(message=message)))
            async with asyncio.timeout(limit):
                await self._follow(child, watch)
        except TimeoutError:
            await self._stop(child, watch)
            return Outcome("failed", await self._answer(child), _timed_out(limit))
        except asyncio.CancelledError:
            await self._stop(child, watch)
            raise
        except ChildGone:
            return Outcome("cancelled", error="the agent's session was deleted")
        assert watch.done is not None
        status = watch.done.get("status")
        if status == "cancelled":
            return Outcome("cancelled", await self._answer(child), "the agent's turn was cancelled")
        if status != "completed":
            return Outcome("failed", await self._answer(child), watch.error or "the turn failed")
        answer = await self._answer(child)
        return Outcome("completed", answer) if answer.strip() else Outcome("failed", "", NO_ANSWER)

    async def _follow(self, child: str, watch: _Watch) -> None:
        """Read the child's events until its `turn_complete` (a follower cut off by the broker
        picks up from the store where it was)."""
        while watch.done is None:
            with self.broker.subscribe(topic(child)) as sub:
                stream = SessionStream(self.store, child, sub, watch.cursor)
                while watch.done is None and (event := await stream.next()) is not None:
                    if event.seq:
                        await watch.see(event)
            if watch.done is None and not sub.cut_off:
                raise ChildGone

    async def _stop(self, child: str, watch: _Watch) -> None:
        """End the child's turn and wait (a while) for it to record its end."""
        if watch.done is not None or self.stopping:
            return
        # Whole, even if this task is cancelled again meanwhile: a cancel cut short after it
        # marked the turn would leave that turn running with no way left to stop it.
        await settled(self.turns.cancel(child, "context_cancelled"))
        with contextlib.suppress(TimeoutError, ChildGone):
            async with asyncio.timeout(STOP_WAIT):
                await self._follow(child, watch)

    async def _answer(self, child: str) -> str:
        """The child's last non-empty assistant message ("" if none, or if it is gone)."""
        try:
            history = await self.store.history(child)
        except NotFound:
            return ""
        for message in reversed(history):
            content = message.get("content")
            if message.get("role") == "assistant" and isinstance(content, str) and content.strip():
                return content
        return ""


def title(agent: str, task: str) -> str:
    first = task.strip().splitlines()[0] if task.strip() else ""
    text = f"{agent}: {first}"
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rstrip() + "…"


def _timed_out(timeout: float) -> str:
    return f"the agent did not finish within its timeout of {timeout:g} s"
