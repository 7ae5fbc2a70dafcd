"""What the conversation runtime needs of the kernel, as ports the root's services fit by
their shape (the turn core, the queue, approvals, questions, bindings, pairings), and the
record that hands them over (`ConversationParts`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from app.broker import Broker
from app.kernel.channels.decisions import ApprovalsPort, QuestionsPort
from app.kernel.sessions import Sessions
from app.kernel.turns.inputs import TurnAccepted, TurnInput
from app.metrics import Metrics
from app.store import Store
from app.store.channel_ledger import Receipt


class TurnsPort(Protocol):
    """The turn core as the runtime drives it (`app.kernel.turns.runner.Turns` fits)."""

    async def submit(
        self, session: str, turn: TurnInput, command: str | None = None, *, receipt: Receipt
    ) -> TurnAccepted: ...
    async def cancel(self, session: str, reason: str = "user_stop") -> None: ...
    def running(self, session: str) -> bool: ...


class QueuesPort(Protocol):
    """`app.kernel.turns.queue.Queues`."""

    restored: dict[str, int]

    def items(self, session: str) -> list[Any]: ...


class BindingsPort(Protocol):
    """`app.kernel.channels.bindings.Bindings`."""

    async def session_of(self, channel_id: str, chat: str) -> str | None: ...
    async def bind(
        self, channel_id: str, chat: str, session_id: str, display_name: str, *, kind: str = ...
    ) -> None: ...
    async def unbind_session(self, session_id: str) -> None: ...


class PairingsPort(Protocol):
    """`app.kernel.channels.pairings.Pairings`: `consume` raises when the code cannot be used."""

    def consume(self, code: str, channel_id: str, chat: str) -> str: ...


@dataclass(frozen=True)
class ConversationParts:
    """What the runtime needs of the kernel (the root hands over its own services)."""

    store: Store
    broker: Broker
    sessions: Sessions
    turns: TurnsPort
    queues: QueuesPort
    approvals: ApprovalsPort
    questions: QuestionsPort
    bindings: BindingsPort
    pairings: PairingsPort
    metrics: Metrics
