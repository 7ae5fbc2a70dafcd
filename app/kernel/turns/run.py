"""A busy session's runner state: the turn it runs, the reply streaming in, the tool calls
running, and the counts the step loop keeps (steps, the last output size, the loop guard)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from app.events import Message
from app.kernel.turns.loopguard import LoopGuard
from app.tools import ToolResult


@dataclass
class Run:
    """A busy session's runner state."""

    session: str
    task: asyncio.Task[None] | None = None
    turn: asyncio.Task[None] | None = None
    run_id: str = ""
    started_at: str = ""
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    cancel_reason: str | None = None
    tools: dict[str, asyncio.Task[ToolResult]] = field(default_factory=dict)
    steps: int = 0
    last_output: int | None = None
    overflow_retried: bool = False
    completed: bool = False  # `turn_complete` is stored: only bookkeeping is left of the turn
    guard: LoopGuard = field(default_factory=LoopGuard)
    answer: str = ""  # the text of the model's last reply, once it asked for no more tools
    # The first request, sent before the opening commit: a task of `opening.Opening`, typed
    # loosely here because the opening module builds on this one (no circle, even for types).
    early: asyncio.Task[Any] | None = None

    def begin(self, run_id: str, started_at: str) -> None:
        """Reset the per-turn state for a new turn of this runner."""
        self.run_id, self.started_at = run_id, started_at
        self.text, self.reasoning = [], []
        self.steps, self.overflow_retried, self.completed = 0, False, False
        self.answer = ""
        self.guard = LoopGuard()
        self.turn = None

    def partial(self) -> Message:
        message: Message = {"role": "assistant", "content": "".join(self.text)}
        if self.reasoning:
            message["reasoning"] = "".join(self.reasoning)
        message["turn_started_at"] = self.started_at
        return message
