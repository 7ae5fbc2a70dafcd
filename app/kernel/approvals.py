"""Approvals: who may let a tool call run.

- `full_access`: everything runs.
- `manual`: reads inside the working directory run; anything else waits for the user's
  decision (`approval_request` → `POST …/approvals/{id}` → `approval_resolved`).
- `auto`: a guardian model call decides; it denies when it cannot run.

A request (`approval_request`, Foya's fields) says what would run: the tool, its action, the
call's arguments as JSON text in `detail` (the command, the path and content…), the path or
address in `resource`, and `execution_session`, the session whose tool asks. It is published on
that session's own stream (a sub-agent's too: a client watching the child sees it there) and
decided through that session's route, as Foya's desktop does with `session`.

`approved_for_session` leaves an in-memory grant for (session, tool, action, scope) so the same
kind of call runs without asking again. Grants and pending requests die with the process.

Before the guardian or the user is asked, the running turn's `PermissionRequest` hooks
(`app.kernel.hooks`) may decide: allowed, it runs; denied, it is refused; no approval request
is made either way (Foya's order). The turn hands them over in `permission_hooks`, a context
variable it sets in its own task, as Foya passes them in the turn's context: approvals keep no
per-turn state, and a call outside a turn asks no hook.

A decision for a request that is pending in another session changes nothing and is refused
with 404 `approval_not_found` (Foya answers 204, and its client then believes the decision was
taken). One for a request pending nowhere (unknown, already decided, or lost with a restart)
changes nothing and is answered 204, as Foya does: Foya's desktop closes its approval dialog only
when the call succeeds or `approval_resolved` arrives, and for a request lost with a restart
nothing else would ever close it. It is logged as a warning and counted in
`foya_approval_decisions_ignored_total`, since a client sending it is out of step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from app.errors import ApprovalNotFound, BadRequest
from app.events import APPROVAL_REQUEST, APPROVAL_RESOLVED, ApprovalRequest, ApprovalResolved
from app.kernel.ids import new_id
from app.logs import get_logger
from app.metrics import Metrics

Decision = Literal["approved", "approved_for_session", "denied"]
DECISIONS: tuple[Decision, ...] = ("approved", "approved_for_session", "denied")


class InvalidDecision(BadRequest):
    """An approval decision that is not one of the decisions offered."""

    code = "invalid_approval_decision"


@dataclass(frozen=True)
class Ask:
    """A tool call that may need approval."""

    session: str
    tool_name: str
    action: str  # read | write | delete | execute
    detail: str
    resource: str | None
    outside: bool  # touches a path outside the working directory
    area: Literal["browser", "internet"] | None = None  # a scope of its own (browser, web)

    @property
    def scope(self) -> Literal["workspace", "outside", "browser", "internet"]:
        return self.area or ("outside" if self.outside else "workspace")


Emit = Callable[[str, Any], Awaitable[None]]
Guardian = Callable[[Ask], Awaitable[bool]]
#: `(ask, request id)` → the hooks' decision, or None when they leave it to the mode.
PermissionHooks = Callable[[Ask, str], Awaitable["Decision | None"]]
permission_hooks: ContextVar[PermissionHooks | None] = ContextVar("permission_hooks", default=None)
#: How much of a request id from the URL a log line repeats.
LOGGED_ID_CHARS = 64


class Approvals:
    """Pending requests and session grants."""

    def __init__(self, metrics: Metrics) -> None:
        self._pending: dict[str, tuple[str, asyncio.Future[Decision]]] = {}
        self._grants: set[tuple[str, str, str, str]] = set()
        self._metrics = metrics
        self._log = get_logger("foya.approvals")

    def _granted(self, ask: Ask) -> bool:
        return (ask.session, ask.tool_name, ask.action, ask.scope) in self._grants

    async def check(self, mode: str, ask: Ask, emit: Emit, guardian: Guardian) -> Decision:
        """The decision for `ask` under `mode`: approved, approved_for_session or denied."""
        if mode == "full_access" or (ask.action == "read" and not ask.outside):
            return "approved"
        if self._granted(ask):
            return "approved"
        request_id = new_id()
        hooks = permission_hooks.get()
        decided = await hooks(ask, request_id) if hooks is not None else None
        if decided is not None:
            return decided
        request: ApprovalRequest = {
            "id": request_id,
            "session": ask.session,
            "execution_session": ask.session,
            "tool_name": ask.tool_name,
            "action": ask.action,
            "detail": ask.detail,
            "scope": ask.scope,
        }
        if ask.resource:
            request["resource"] = ask.resource
        await emit(APPROVAL_REQUEST, request)
        decision: Decision
        if mode == "auto":
            decision = "approved" if await guardian(ask) else "denied"
        else:
            future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
            self._pending[request_id] = (ask.session, future)
            try:
                decision = await future
            except asyncio.CancelledError:
                # The turn was cancelled while the user was asked: close the request for every
                # client showing it (shielded, so the record survives the cancellation).
                resolved: ApprovalResolved = {"id": request_id, "decision": "denied"}
                await asyncio.shield(emit(APPROVAL_RESOLVED, resolved))
                raise
            finally:
                self._pending.pop(request_id, None)
        if decision == "approved_for_session":
            self._grants.add((ask.session, ask.tool_name, ask.action, ask.scope))
        final: ApprovalResolved = {"id": request_id, "decision": decision}
        await emit(APPROVAL_RESOLVED, final)
        return decision

    def decide(self, session: str, request_id: str, decision: str) -> None:
        """Record the user's decision on `session`'s request; one pending in another session is
        refused (`ApprovalNotFound`), an unknown or already decided one is a no-op."""
        chosen = next((d for d in DECISIONS if d == decision), None)
        if chosen is None:
            raise InvalidDecision(f"decision: must be one of {', '.join(DECISIONS)}")
        pending = self._pending.get(request_id)
        if pending is not None and pending[0] != session:
            raise ApprovalNotFound("no pending approval with this id in this session")
        if pending is not None and not pending[1].done():
            pending[1].set_result(chosen)
            return
        self._log.warning(
            "approval decision ignored: no pending request with this id in this session",
            session=session,
            approval_id=request_id[:LOGGED_ID_CHARS],
            decision=chosen,
        )
        self._metrics.approval_decisions_ignored.inc()

    def forget(self, session: str) -> None:
        """Drop the session's grants and deny its pending requests."""
        self._grants = {g for g in self._grants if g[0] != session}
        for owner, future in list(self._pending.values()):
            if owner == session and not future.done():
                future.set_result("denied")
