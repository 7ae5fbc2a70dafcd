"""Compaction: keep a long session inside the model's context window without losing history.

The model's input becomes the validated checkpoint summary plus the active messages after its
boundary; the user's history stays whole (the checkpoint is a fact in the log and a projection).
What is covered, and when a request is over budget, is app.kernel.turns.compaction_plan's; this
module asks the model for the summary (split in halves when the request itself is too long) and
records the checkpoint as `compaction_completed`.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import astuple
from typing import Any

from typing_extensions import TypedDict

from app.errors import Conflict, FoyaError
from app.events import (
    COMPACTION_COMPLETED,
    COMPACTION_FAILED,
    COMPACTION_STARTED,
    USAGE_UPDATED,
    Checkpoint,
    EventDraft,
    Message,
)
from app.events import CompactionFailed as Failed
from app.events import CompactionStarted as Started
from app.kernel import usage
from app.kernel.ids import iso_now, new_id
from app.kernel.providers import Providers
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.kernel.turns.compaction_plan import (
    DEFAULT_WINDOW,
    Plan,
    context_window,
    estimate_tokens,
    output_reserve,
    over_budget,
    plan,
    route_key,
)
from app.kernel.turns.context import summary_message
from app.providers.base import ChatRequest, Provider, ProviderError, Usage
from app.store import Store
from app.store.checkpoints import CHECKPOINT_VERSION

MAX_SPLITS = 3  # a too-long summary request is split at most 3 times: up to 8 segments
__all__ = [
    "DEFAULT_WINDOW",
    "SECTIONS",
    "Compacted",
    "CompactionFailed",
    "CompactionUnavailable",
    "Compactor",
    "NothingToCompact",
    "Plan",
    "checkpoint",
    "compacted",
    "context_window",
    "estimate_tokens",
    "output_reserve",
    "over_budget",
    "plan",
    "route_key",
    "summary_request",
]
SECTIONS = ("Goal", "Progress", "Key Decisions", "Next Steps", "Critical Context")
SUMMARY_PROMPT = (
    "You compact the history of a coding agent's conversation so work can continue in a fresh "
    "context. Write a faithful, specific summary in Markdown with exactly these sections: "
    + ", ".join(f"## {s}" for s in SECTIONS)
    + ". Keep file paths, commands, identifiers, decisions and open problems; drop chit-chat."
)


def summary_request(previous: str | None, covered: list[Message]) -> list[dict[str, Any]]:
    """Messages for the non-streaming summary call."""
    lines = []
    if previous:
        lines.append(f"Summary of the conversation before this part:\n{previous}\n")
    for m in covered:
        role = m.get("role", "")
        text = str(m.get("content") or "")
        if m.get("tool_calls"):
            calls = ", ".join(
                f"{c['name']}({json.dumps(c.get('input', {}))})" for c in m["tool_calls"]
            )
            text = f"{text}\n[tool calls: {calls}]"
        for attached in m.get("attachments") or ():
            text = f"{text}\n[attached image: {attached.get('name', 'image')}]"
        lines.append(f"[{role}] {text[:20_000]}")
    return [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": "\n".join(lines)},
    ]


class Compacted(TypedDict):
    """`POST /sessions/{id}/compact`'s answer: the new checkpoint, without its summary."""

    checkpoint_id: str
    phase: str
    projection_kind: str
    level: str
    segment_count: int
    through_seq: int
    estimated_tokens_before: int
    estimated_tokens_after: int


def checkpoint(
    summary: str,
    through_seq: int,
    source_digest: str,
    phase: str,
    before: int,
    after: int,
    *,
    folds_previous: bool = False,
    segments: int = 1,
) -> Checkpoint:
    """A checkpoint in the current format (validated again whenever it is loaded); `before`
    and `after` are token estimates. Foya's shape: a first summary is one segment; a later one
    folds the previous summary in, which Foya calls a session-level checkpoint."""
    return {
        "version": CHECKPOINT_VERSION,
        "id": new_id(),
        "through_seq": through_seq,
        "source_digest": source_digest,
        "summary": summary,
        "phase": phase,
        "estimated_tokens_before": before,
        "estimated_tokens_after": after,
        "created_at": iso_now(),
        "projection_kind": "text",
        "level": "session" if folds_previous else "segmented",
        "segment_count": segments,
    }


def compacted(made: Checkpoint) -> Compacted:
    """What the compact route answers about checkpoint `made`."""
    return {
        "checkpoint_id": made["id"],
        "phase": made["phase"],
        "projection_kind": made["projection_kind"],
        "level": made["level"],
        "segment_count": made["segment_count"],
        "through_seq": made["through_seq"],
        "estimated_tokens_before": made["estimated_tokens_before"],
        "estimated_tokens_after": made["estimated_tokens_after"],
    }


class NothingToCompact(Conflict):
    """A compaction of a history that is already as short as it gets."""

    code = "nothing_to_compact"


class CompactionUnavailable(FoyaError):
    """The session has no usable model connection to compact with."""

    status = 501
    code = "compaction_unavailable"


class CompactionFailed(FoyaError):
    """The model failed to summarise the history for a compaction."""

    status = 502
    code = "compaction_failed"


class Compactor:
    """Runs compactions: a summary call, then `compaction_completed` with the checkpoint."""

    def __init__(self, sessions: Sessions, store: Store, providers: Providers) -> None:
        self.sessions = sessions
        self.store = store
        self.providers = providers

    async def compact(self, session: str, phase: str, run_id: str | None = None) -> Checkpoint:
        """Compact the session's active history now; returns the new checkpoint."""
        row = await self.sessions.row(session)
        try:
            provider = self.providers.for_session(row)
        except ProviderError as exc:
            raise CompactionUnavailable(exc.message) from None
        history = await self.store.history(session)
        previous = await self.store.checkpoint(session)
        after = int(previous["through_seq"]) if previous else 0
        chosen = plan(history, after, standalone=phase == "standalone")
        if chosen is None:
            raise NothingToCompact("nothing to compact: the history is already as short as it gets")
        prior = str(previous["summary"]) if previous else None

        async def fail(error: str) -> None:
            failed: Failed = {"phase": phase, "error": error}
            await self.sessions.facts.emit(EventDraft(session, COMPACTION_FAILED, failed, run_id))

        opened: Started = {"phase": phase}
        started = EventDraft(session, COMPACTION_STARTED, opened, run_id)
        await self.sessions.facts.emit(started)
        try:
            text, segments, used = await self._summarize(provider, row, prior, chosen.covered)
        except ProviderError as exc:
            await fail(exc.message)
            raise CompactionFailed(f"compaction failed: {exc.message}") from None
        except asyncio.CancelledError:
            await fail("cancelled")
            raise
        before = estimate_tokens(history)
        after = estimate_tokens([summary_message(text), *chosen.tail])
        digest = await self.store.source_digest(session, chosen.through_seq)
        made = checkpoint(
            text,
            chosen.through_seq,
            digest,
            phase,
            before,
            after,
            folds_previous=prior is not None,
            segments=segments,
        )
        await self.sessions.facts.emit(EventDraft(session, COMPACTION_COMPLETED, made, run_id))
        if used.total_tokens:
            spent = usage.payload(row["model"], used)
            await self.sessions.facts.emit(EventDraft(session, USAGE_UPDATED, spent, run_id))
        return made

    async def _summarize(
        self,
        provider: Provider,
        row: SessionRow,
        prior: str | None,
        covered: list[Message],
        depth: int = 0,
    ) -> tuple[str, int, Usage]:
        """(summary, segments, usage). If the summary request itself is too long for the model,
        the messages are summarized in halves, each half continuing the previous summary."""
        request = ChatRequest(model=row["model"], messages=summary_request(prior, covered))
        try:
            completion = await provider.complete(request)
            return completion.text, 1, completion.usage
        except ProviderError as exc:
            if exc.kind != "context_overflow" or depth >= MAX_SPLITS or len(covered) < 2:
                raise
        half = len(covered) // 2
        first, n1, u1 = await self._summarize(provider, row, prior, covered[:half], depth + 1)
        text, n2, u2 = await self._summarize(provider, row, first, covered[half:], depth + 1)
        used = Usage(*(a + b for a, b in zip(astuple(u1), astuple(u2), strict=True)))
        return text, n1 + n2, used
