"""Background memory maintenance (Foya's `memorymaint`): memory kept up to date from recent talk.

A pass reads the conversation since the watermark (user and assistant text of top-level
sessions, in seq order, a bounded batch: `BATCH_MESSAGES` messages, each cut to
`MESSAGE_CHARS`, `PASS_CHARS` in all; `memorytext` builds the excerpts and the prompt), groups
it by scope (a project's sessions feed that project's memory, the others the user's global
memory) and asks the `fast` default model, once per scope, for the scope's updated memory
document. A new document is written through `UserContext`, which announces
`memory_created`/`memory_updated` on the context journal. Only then does the watermark,
`<data-dir>/memory/maintenance.json` `{"through_seq", "updated_at"}` (0600, atomic), move past
the batch: a crash or a restart resumes from the last pass that completed. An unreadable
watermark counts as 0 and is logged.

A pass changes nothing when memory is disabled or no `fast` default model is set: the messages
wait for a later pass. A provider failure, a timeout, or a memory document edited while the
model was answering keeps the watermark; the pass is retried after a growing delay. A document
that cannot be read (`error`), a vanished project, an empty or `NO_CHANGE` answer, or one
longer than `MAX_MEMORY_CHARS` leaves that scope's memory as it is and the pass goes on.

Scheduling: `wake()` is a cheap signal, safe after every completed turn. Passes run one at a
time in one background task, at most once per `min_interval`: at start, when woken, every
`TICK` regardless, and again after `min_interval` while a backlog remains. A turn never waits
for a pass; shutdown cancels one in flight.

Deliberate differences from Foya: the `fast` default model instead of each session's own (one
cheap model for a chore nobody waits on); the scope's one document is rewritten (condensed)
instead of extracted facts appended to it, which would outgrow its 2,000 characters; one
watermark over the global seq instead of one per idle session, so a long conversation is read
in parts, each part once; an unreadable watermark file is not fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.errors import FoyaError
from app.files import write_json_atomic
from app.kernel.connections import Connections
from app.kernel.ids import iso_now
from app.kernel.lifecycle import cancel_and_wait
from app.kernel.projects import ProjectNotFound
from app.kernel.providers import Providers
from app.kernel.usercontext.items import MAX_MEMORY_CHARS, Memory
from app.kernel.usercontext.memorytext import PROMPT, document_of, excerpts_of
from app.kernel.usercontext.service import UserContext
from app.logs import get_logger
from app.providers.base import ChatRequest, Provider, ProviderError
from app.store import Store

FILE = Path("memory") / "maintenance.json"
DEFAULT_INTERVAL = 600.0  # seconds: at most one pass per interval
TICK = 3600.0  # a pass is considered this often even without a wake (Foya's tick)
RETRY_MIN = 60.0  # the first retry after a failure, doubled after each further one
MAX_BACKOFF = 6 * 3600.0
PASS_TIMEOUT = 180.0
BATCH_MESSAGES = 200
PASS_CHARS = 12_000

Status = Literal["disabled", "no_model", "idle", "done", "failed"]


@dataclass(frozen=True)
class PassResult:
    """What a pass did; `through_seq` is the watermark after it, `more` a backlog left."""

    status: Status
    through_seq: int
    more: bool = False


class _Retry(Exception):
    """The pass must not write now (the document changed meanwhile, memory was disabled)."""


class MemoryKeeper:
    """Condenses recent conversation into the memory files, in the background."""

    def __init__(
        self,
        data_dir: Path,
        store: Store,
        connections: Connections,
        providers: Providers,
        user_context: UserContext,
        *,
        min_interval: float = DEFAULT_INTERVAL,
    ) -> None:
        self.path = data_dir / FILE
        self.store = store
        self.connections = connections
        self.providers = providers
        self.user_context = user_context
        self.min_interval = min_interval
        self.log = get_logger("foya.memory")
        self._through: int | None = None  # read from the file by the first pass
        self._failures = 0
        self._lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the background task; its first pass runs right away."""
        if self._task is None:
            self._wakeup.set()
            self._task = asyncio.create_task(self._loop(), name="memory-maintenance")

    def wake(self) -> None:
        """Ask for a pass (never waits; repeated wakes coalesce)."""
        self._wakeup.set()

    async def stop(self) -> None:
        """Cancel the task and a pass in flight (its watermark stays where it was)."""
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        ready_at = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK):
                    await self._wakeup.wait()
            await asyncio.sleep(max(0.0, ready_at - time.monotonic()))
            self._wakeup.clear()  # a wake from now on asks for one more pass
            result = await self.run_pass()
            failed = result.status == "failed"
            ready_at = time.monotonic() + (self._backoff() if failed else self.min_interval)
            if failed or result.more:
                self._wakeup.set()

    def _backoff(self) -> float:
        first = max(self.min_interval, RETRY_MIN)
        return float(min(first * 2 ** (self._failures - 1), MAX_BACKOFF))

    async def run_pass(self) -> PassResult:
        """One pass now, after any pass in flight. Never raises but on cancellation."""
        async with self._lock:
            try:
                async with asyncio.timeout(PASS_TIMEOUT):
                    result = await self._pass()
            except ProviderError as exc:
                self.log.warning("memory pass failed", kind=exc.kind, error=exc.message)
            except TimeoutError:
                self.log.warning("memory pass timed out", seconds=PASS_TIMEOUT)
            except (_Retry, FoyaError) as exc:
                self.log.info("memory pass put off", reason=str(exc))
            except Exception:
                self.log.exception("memory pass failed")
            else:
                self._failures = 0
                return result
            self._failures += 1
            return PassResult("failed", self._through or 0)

    async def _pass(self) -> PassResult:
        through = await self._watermark()
        if not (await self.user_context.memory_settings()).enabled:
            return PassResult("disabled", through)
        chosen = self.connections.defaults()["fast"]
        connection, model = chosen.get("connection_id", ""), chosen.get("model", "")
        if not (connection and model and self.connections.exists(connection)):
            return PassResult("no_model", through)
        head = await self.store.head_seq()
        if through > head:  # the database was restored from an older backup
            self.log.warning("memory watermark beyond the log; reset", through=through, head=head)
            through = head
        batch = await self.store.recent_messages(through, BATCH_MESSAGES)
        if not batch:
            return PassResult("idle", through)
        excerpts = excerpts_of(batch, PASS_CHARS)
        provider = self.providers.for_connection(connection)
        for project_id, lines in excerpts.scopes.items():
            await self._condense(provider, model, project_id, "\n".join(lines))
        await self._save(excerpts.last_seq)
        more = excerpts.cut or len(batch) == BATCH_MESSAGES
        self.log.info("memory pass done", through=excerpts.last_seq, scopes=len(excerpts.scopes))
        return PassResult("done", excerpts.last_seq, more)

    async def _condense(
        self, provider: Provider, model: str, project_id: str | None, excerpt: str
    ) -> None:
        """Ask for the scope's new document and write it, unless it changed meanwhile."""
        scope = "global" if project_id is None else "project"
        try:
            current = await self._memory(scope, project_id)
            if project_id is None:
                label = "Its scope: the user, across all their conversations."
            else:
                name = self.user_context.projects.get(project_id)["name"]
                label = f"Its scope: the project {json.dumps(name)} and its conversations."
        except ProjectNotFound:
            return  # the project went away with its sessions
        if current is not None and current.error:
            self.log.warning("memory file unreadable; left as is", scope=scope, error=current.error)
            return
        document = current.content if current is not None else "(empty)"
        prompt = f"<current_memory>\n{document}\n</current_memory>\n\n"
        prompt += f"<conversation_excerpts>\n{excerpt}\n</conversation_excerpts>"
        answer = await provider.complete(
            ChatRequest(
                model=model,
                messages=[
                    {"role": "system", "content": PROMPT.format(scope=label)},
                    {"role": "user", "content": prompt},
                ],
            )
        )
        updated = document_of(answer.text)
        if updated is None or (current is not None and updated == current.content):
            return
        if len(updated) > MAX_MEMORY_CHARS:
            self.log.warning("memory answer too long; left as is", chars=len(updated))
            return
        if not (await self.user_context.memory_settings()).enabled:
            raise _Retry("memory was disabled")
        if _version(await self._memory(scope, project_id)) != _version(current):
            raise _Retry("the memory document changed while the model answered")
        if current is None:
            await self.user_context.create_memory(scope, project_id, updated)
        else:
            await self.user_context.update_memory(current.id, updated)

    async def _memory(self, scope: str, project_id: str | None) -> Memory | None:
        found = await self.user_context.memories(scope, project_id)
        return found[0] if found else None

    async def _watermark(self) -> int:
        if self._through is None:
            self._through = await asyncio.to_thread(self._load)
        return self._through

    def _load(self) -> int:
        try:
            raw: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return 0
        except (OSError, ValueError):
            raw = None
        seq = raw.get("through_seq") if isinstance(raw, dict) else None
        if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0:
            return seq
        self.log.warning("memory watermark unreadable; starting from the beginning")
        return 0

    async def _save(self, through: int) -> None:
        value = {"through_seq": through, "updated_at": iso_now()}
        await asyncio.to_thread(write_json_atomic, self.path, value)
        self._through = through


def _version(memory: Memory | None) -> tuple[str, str] | None:
    return None if memory is None else (memory.id, memory.content)
