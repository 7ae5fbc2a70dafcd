"""The loop guard of a turn (Foya's `loopguard`): two layers against a model that repeats itself.

1. A call (tool name and canonical arguments) that failed twice in a row is not run a third
   time: the model gets `GATE_TEXT` as the result and the turn goes on (a call that succeeds is
   never held back, so polling works).
2. A step whose calls and outputs are the same as more than `REPEAT_MAX` of the last
   `REPEAT_WINDOW` steps is no progress: the turn fails with `LoopDetected`.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable
from typing import Any

from app.errors import FoyaError

GATE_THRESHOLD = 3
REPEAT_WINDOW = 20
REPEAT_MAX = 8


class LoopDetected(FoyaError):
    """The turn repeats the same tool calls with the same results: it is ended."""

    code = "loop_detected"


def gate_text(tool: str) -> str:
    return (
        f"Blocked: this {tool} call (with exactly these arguments) failed several times in a "
        "row, and running it again would not change the result, so it was not run. Change the "
        "arguments, or take another step first (read the relevant files, check the current "
        "state), then try again."
    )


def canonical(value: Any) -> str:
    """Arguments as canonical JSON, so that equal objects in another key order match."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def call_signature(name: str, args: Any) -> str:
    return f"{name}\0{canonical(args)}"


class LoopGuard:
    """One turn's loop state; used by that turn's task only."""

    def __init__(self) -> None:
        self._failed: str | None = None
        self._streak = 0
        self._window: deque[str] = deque(maxlen=REPEAT_WINDOW)

    def blocks(self, signature: str) -> bool:
        """Layer 1, before a call runs: it failed `GATE_THRESHOLD - 1` times in a row."""
        return signature == self._failed and self._streak >= GATE_THRESHOLD - 1

    def result(self, signature: str, is_error: bool) -> None:
        """Layer 1, after a call ran (not after it was blocked)."""
        if not is_error:
            self._failed, self._streak = None, 0
        elif signature == self._failed:
            self._streak += 1
        else:
            self._failed, self._streak = signature, 1

    def step(self, interactions: Iterable[tuple[str, Any, str]]) -> None:
        """Layer 2, after a step's tools: (name, args, output) of each call, in call order.
        Raises `LoopDetected` when the step repeats too often; a step without calls is
        ignored."""
        digest = hashlib.sha256()
        calls = 0
        for name, args, output in interactions:
            calls += 1
            for part in (name, canonical(args), output):
                digest.update(part.encode("utf-8", "surrogatepass"))
                digest.update(b"\0")
        if not calls:
            return
        signature = digest.hexdigest()
        self._window.append(signature)
        if self._window.count(signature) > REPEAT_MAX:
            raise LoopDetected(
                "the turn was stopped: the model repeated the same tool calls with the same "
                f"results {REPEAT_MAX + 1} times in its last {len(self._window)} steps "
                "without making progress"
            )
