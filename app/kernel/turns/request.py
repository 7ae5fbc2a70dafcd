"""A step's model request: the session's history since its last checkpoint, the system message
with the user's context (rules, memory, skills, AGENTS.md) and what the capabilities add to it
(a sub-agent's role, plan mode), the tools the session may use, and the estimate of its size.
A request that would not fit the model's context window is compacted first, once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import sys
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from app.errors import FoyaError
from app.events import Checkpoint, Message
from app.jsontypes import JSONObject
from app.kernel.providers import Providers
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.kernel.turns import compaction, context
from app.kernel.turns.compaction import Compactor
from app.kernel.turns.ports import Instructions, PromptPort, Where, activity
from app.kernel.turns.run import Run
from app.kernel.turns.tooling import ToolRunner
from app.logs import get_logger
from app.providers.base import ChatRequest
from app.store import Boundary, Store


def agent_role(row: SessionRow) -> str | None:
    """A sub-agent's role instructions (its definition's body), stored on its row."""
    text = row.get("agent_instructions")
    return f"<agent_instructions>\n{text}\n</agent_instructions>" if text else None


@dataclass(frozen=True)
class UserInput:
    """The user's context in a step's request: the system message, the text of messages that
    named a skill (by event seq), and the estimated tokens of the context sections."""

    system: JSONObject
    expanded: dict[int, str]
    tokens: int


#: The `event_seq` of a turn's user message in a request built before its commit.
PENDING = sys.maxsize

#: What a request is built from: the checkpoint, the messages after it, the accepted boundary.
Inputs = tuple[Checkpoint | None, list[Message], Boundary | None]


class Draft(NamedTuple):
    """A request's messages before the tools are added, and what they were built from."""

    messages: list[JSONObject]
    estimate: int
    checkpoint: Checkpoint | None
    history: list[Message]
    tokens: int


class Request(NamedTuple):
    """A step's model request and what its `context_request_accepted` records."""

    chat: ChatRequest
    route: str
    through_seq: int
    checkpoint_id: str | None
    context_tokens: int


class Requests:
    """Builds the model request of each step of a turn."""

    def __init__(
        self,
        sessions: Sessions,
        store: Store,
        providers: Providers,
        tool_runner: ToolRunner,
        compactor: Compactor,
        prompt: PromptPort | None = None,
        instructions: Sequence[Instructions] = (),
    ) -> None:
        """`instructions` are what the capabilities add to a session's system prompt (plan
        mode's), after a sub-agent's own role."""
        self.sessions = sessions
        self.store = store
        self.providers = providers
        self.tool_runner = tool_runner
        self.compactor = compactor
        self.prompt = prompt
        self.instructions: tuple[Instructions, ...] = (agent_role, *instructions)
        self.log = get_logger("foya.turns")

    async def build(self, run: Run, row: SessionRow, cwd: Path) -> Request:
        """The step's model request (compacting first if it would not fit); its route, the last
        message seq it includes and the checkpoint it starts from."""
        route, window = self._route(row)
        for attempt in range(2):
            # Only the messages after the checkpoint are read: the summary stands for the rest.
            read = await self.store.request_inputs(run.session, route)
            draft = await self._draft(run, row, cwd, read)
            if attempt or not compaction.over_budget(draft.estimate, window, run.last_output):
                break
            phase = "mid_turn" if run.steps else "pre_turn"
            try:
                await self.compactor.compact(run.session, phase, run.run_id)
            except FoyaError as exc:  # nothing to compact, or the summary failed: try as is
                self.log.warning("compaction before a request failed", error=exc.message)
                break
        return await self._request(run, row, draft)

    def inputs(self, session: str, row: SessionRow) -> Coroutine[Any, Any, Inputs]:
        """The read a request is built from (checkpoint, messages, accepted boundary)."""
        return self.store.request_inputs(session, self._route(row)[0])

    async def opening(
        self, run: Run, row: SessionRow, cwd: Path, read: Inputs, user: Message
    ) -> Request | None:
        """A turn's first request, built before its opening facts are committed: from `read`
        (made before that commit) and the turn's user message `user`, which has no seq yet
        (`through_seq` is `PENDING`). None if the request would need compacting first, which
        only the turn itself may do."""
        checkpoint, history, accepted = read
        pending: Message = {**user, "event_seq": PENDING}
        draft = await self._draft(run, row, cwd, (checkpoint, [*history, pending], accepted))
        if compaction.over_budget(draft.estimate, self._route(row)[1], run.last_output):
            return None
        return await self._request(run, row, draft)

    async def _draft(self, run: Run, row: SessionRow, cwd: Path, read: Inputs) -> Draft:
        """The messages of a request from what was read, and the estimate of their size."""
        checkpoint, history, accepted = read
        user = await self._user_context(row, cwd, history, opening=not run.steps)
        notes = [text for note in self.instructions if (text := note(row))]
        if notes:
            content = "\n\n".join([user.system["content"], *notes])
            user = dataclasses.replace(user, system={**user.system, "content": content})
        messages = context.build(user.system, history, checkpoint, user.expanded)
        estimate = self._estimate(accepted, messages, history, checkpoint, user)
        return Draft(messages, estimate, checkpoint, history, user.tokens)

    async def _request(self, run: Run, row: SessionRow, draft: Draft) -> Request:
        messages = draft.messages
        if any(isinstance(m.get("content"), list) for m in messages):
            load = functools.partial(self.sessions.artifacts.read, run.session)
            messages = await asyncio.to_thread(context.inline_images, messages, load)
        request = ChatRequest(
            model=row["model"],
            messages=messages,
            tools=self.tool_runner.schemas(row),
            reasoning_effort=row.get("reasoning_effort") or None,
        )
        checkpoint, history = draft.checkpoint, draft.history
        after = int(checkpoint["through_seq"]) if checkpoint else 0
        last = int(history[-1]["event_seq"]) if history else after
        checkpoint_id = checkpoint["id"] if checkpoint else None
        return Request(request, self._route(row)[0], last, checkpoint_id, draft.tokens)

    def _route(self, row: SessionRow) -> tuple[str, int | None]:
        """The session's route key (which checkpoints and boundaries it reads) and the size of
        its model's context window."""
        connection = self.providers.connections.get(str(row["connection_id"]))
        return compaction.route_key(row, connection), compaction.context_window(
            connection, row["model"]
        )

    async def _user_context(
        self, row: SessionRow, cwd: Path, history: list[Message], opening: bool = False
    ) -> UserInput:
        """The system message with the user's context (rules, memory, skills, AGENTS.md), and
        the text of messages that named a skill, read off the event loop. In a turn's `opening`
        step, a skill its message names that cannot be loaded fails the turn."""
        if self.prompt is None:
            return UserInput(context.system_message(cwd), {}, 0)
        prompt = self.prompt
        where = self.where(row, cwd)

        def read() -> UserInput:
            done = activity(history, cwd)
            if row.get("import_rule"):  # the imported session's own system prompt, a manual rule
                done += f"\n@{row['import_rule']}"
            sections = prompt.sections(where, done)
            text = "\n\n".join(s.text for s in sections)
            users = [m for m in history if m.get("role") == "user"]
            expanded = {
                int(m["event_seq"]): prompt.invoked_skill(
                    str(m["skill_ref"]),
                    where,
                    str(m.get("content") or ""),
                    strict=opening and m is users[-1],
                )
                for m in users
                if m.get("skill_ref")
            }
            tokens = compaction.estimate_tokens([{"content": text}]) if text else 0
            return UserInput(context.system_message(cwd, text), expanded, tokens)

        return await asyncio.to_thread(read)

    def where(self, row: SessionRow, cwd: Path) -> Where:
        """The session's project (if it still exists) and working directory."""
        projects = self.sessions.projects
        pid = row.get("project_id")
        if pid and projects.exists(pid):
            return Where(pid, Path(str(projects.get(pid)["path"])), cwd)
        return Where(None, None, cwd)

    @staticmethod
    def _estimate(
        accepted: Boundary | None,
        messages: list[JSONObject],
        history: list[Message],
        checkpoint: Checkpoint | None,
        user: UserInput,
    ) -> int:
        """Tokens of `messages`: the `accepted` request's real count for what it covered (if the
        context below it has not changed since), corrected by how much the user's context grew
        or shrank since, plus an estimate of the rest."""
        same_base = accepted is not None and accepted["checkpoint_id"] == (
            checkpoint["id"] if checkpoint else None
        )
        if accepted is None or not same_base or not accepted["input_tokens"]:
            return compaction.estimate_tokens(messages)
        newer = [m for m in history if int(m["event_seq"]) > accepted["through_seq"]]
        grown = user.tokens - int(accepted.get("context_tokens") or 0)
        return (
            int(accepted["input_tokens"])
            + grown
            + compaction.estimate_tokens([context.to_openai(m, user.expanded) or {} for m in newer])
        )
