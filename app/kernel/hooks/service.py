"""The hooks service: each scope's file behind `GET|PUT /hooks`, and a session's hooks of an
event run side by side, their word merged into one `Outcome`.

A project's hooks run only while the project is trusted (`app.kernel.trust`): they are parsed
from the very bytes whose digest was checked. An untrusted project's hooks that would have run
make `trust.requested` announce the project once per digest; they never run. In a
PermissionRequest, a hook's `allow` approves only if the hook has `may_approve` (else it is
recorded as `none` with the reason); a `deny` always counts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from app.errors import FoyaError
from app.events import HOOK_COMPLETED, EventDraft, HookCompleted
from app.files import write_bytes_atomic
from app.jsontypes import JSONObject
from app.kernel.hooks.config import (
    FILE_NAME,
    HOOKS_FILE,
    Hook,
    HookFiles,
    HooksUnreadable,
    checked,
    encoded,
    parse,
)
from app.kernel.hooks.ports import Snapshot, TrustGate
from app.kernel.hooks.process import Call, result
from app.kernel.ids import iso_now, new_id
from app.kernel.sessions import SessionRow, Sessions
from app.kernel.turns.ports import PERMISSION_REQUEST
from app.kernel.usercontext.items import SCOPES, InvalidContextItem
from app.logs import get_logger

MAX_PARENTS = 32  # sub-agent depth walked for `root_session_id`

Decision = Literal["none", "allow", "deny"]
NOT_AN_APPROVER = "allow ignored: this hook may not approve tool calls (may_approve is not set)"


@dataclass(frozen=True)
class Configured:
    """A session's hooks: those that run (global, then a trusted project's), and an untrusted
    project's that are held back, with the snapshot they were read from."""

    hooks: list[Hook]
    held: list[Hook]
    waiting: Snapshot | None = None

    def wanted(self, event: str) -> bool:
        """Whether a held hook is configured for `event`. Its matcher, untrusted, is never
        evaluated (a regular expression can be made to backtrack for ever)."""
        return any(h.applies(event, None) for h in self.held)


def unapproved(done: HookCompleted) -> HookCompleted:
    """A PermissionRequest hook's `allow` from a hook without `may_approve`: recorded, not
    applied."""
    return cast(HookCompleted, {**done, "decision": "none", "reason": NOT_AN_APPROVER})


@dataclass(frozen=True)
class Outcome:
    """The hooks of one event, merged in configuration order: a deny wins over an allow, a halt
    sticks, reasons and contexts add up. `results` are the `hook_completed` payloads."""

    decision: Decision = "none"
    halt: bool = False
    reason: str = ""
    context: tuple[str, ...] = ()
    results: tuple[HookCompleted, ...] = ()

    def feedback(self, fallback: str) -> str:
        """What the hooks said (reasons, then context), or `fallback`."""
        return "\n".join(p for p in (self.reason.strip(), *self.context) if p) or fallback

    def facts(self, session: str, run_id: str) -> list[EventDraft]:
        """The `hook_completed` facts of the run."""
        return [EventDraft(session, HOOK_COMPLETED, r, run_id) for r in self.results]


def merged(found: list[tuple[HookCompleted, list[str]]]) -> Outcome:
    decision: Decision = "none"
    halt = False
    reasons: list[str] = []
    context: list[str] = []
    for done, said in found:
        if done["decision"] == "deny":
            decision = "deny"
        elif done["decision"] == "allow" and decision != "deny":
            decision = "allow"
        halt = halt or done["halt"]
        if done["reason"] and (done["decision"] == "deny" or done["halt"]):
            reasons.append(done["reason"])
        context += said
    return Outcome(decision, halt, "\n".join(reasons), tuple(context), tuple(r for r, _ in found))


class Hooks:
    """The hooks of every scope: their files, and running them for a session's turn."""

    def __init__(self, foya_home: Path, sessions: Sessions, trust: TrustGate) -> None:
        self.foya_home = foya_home
        self.sessions = sessions
        self.trust = trust
        self.files = HookFiles()
        self._parsed: dict[str, tuple[str, list[Hook]]] = {}  # project id → (digest, hooks)
        self.detached: set[asyncio.Task[None]] = set()
        self.log = get_logger("foya.hooks")

    def _path(self, scope: str, project_id: str | None) -> Path:
        if scope not in SCOPES:
            raise InvalidContextItem("scope: must be global or project")
        if scope == "global":
            return self.foya_home / FILE_NAME
        if not project_id or not project_id.strip():
            raise InvalidContextItem("project_id is required for scope project")
        return Path(self.sessions.projects.get(project_id)["path"]) / HOOKS_FILE

    async def read(self, scope: str, project_id: str | None) -> list[Hook]:
        """`GET /hooks`: one scope's hooks."""
        return self.files.load(self._path(scope, project_id))

    async def replace(self, scope: str, project_id: str | None, hooks: list[Hook]) -> list[Hook]:
        """`PUT /hooks`: check `hooks`, then write them as the scope's file; nothing is
        written unless every hook is valid."""
        path = self._path(scope, project_id)
        cleaned = checked(hooks)
        data = encoded(cleaned)
        if scope == "global":
            await asyncio.to_thread(write_bytes_atomic, path, data)
            return cleaned
        assert project_id is not None  # `_path` refused a project scope without one
        if not path.parent.parent.is_dir():
            raise InvalidContextItem(f"the project directory {path.parent.parent} is missing")
        before = self.trust.snapshot(project_id)
        await asyncio.to_thread(write_bytes_atomic, path, data)
        await self.trust.adopt(before, HOOKS_FILE, data)
        return cleaned

    async def close(self) -> None:
        """Kill the `async` hooks still running (shutdown)."""
        tasks = list(self.detached)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def configured(self, row: SessionRow) -> Configured:
        """The session's hooks: global, then its project's if the project is trusted.
        `HooksUnreadable` for a file that would run but cannot be read."""
        hooks = self.files.load(self.foya_home / FILE_NAME)
        pid = row.get("project_id")
        if not pid or not self.sessions.projects.exists(pid):
            return Configured(hooks, [])
        snap = self.trust.snapshot(pid)
        data = snap.files.get(HOOKS_FILE)
        if data is None:
            return Configured(hooks, [])
        if not snap.trusted:
            try:
                return Configured(hooks, self._project(snap, data), snap)
            except HooksUnreadable:  # it would run nothing; its errors are not ours to report
                return Configured(hooks, [])
        return Configured(hooks + self._project(snap, data), [])

    def _project(self, snap: Snapshot, data: bytes) -> list[Hook]:
        """A project's hooks, parsed from the snapshot's own bytes (once per digest)."""
        cached = self._parsed.get(snap.project_id)
        if cached is not None and cached[0] == snap.digest:
            return cached[1]
        hooks = parse(data, snap.path / HOOKS_FILE)
        self._parsed[snap.project_id] = (snap.digest, hooks)
        return hooks

    def wants(self, event: str, row: SessionRow) -> bool:
        """Whether `run` has something to do for `event` in the session: a hook to run, an
        untrusted project's hook to announce, or a configuration file to report as
        unreadable."""
        try:
            found = self.configured(row)
        except HooksUnreadable:
            return True
        return any(h.applies(event, None) for h in found.hooks) or found.wanted(event)

    async def run(
        self,
        event: str,
        row: SessionRow,
        run_id: str,
        fields: JSONObject,
        subject: str | None = None,
    ) -> Outcome:
        """Run the session's hooks of `event` (those whose matcher is found in `subject`) side
        by side, and merge what they said. Never fails: a hook that cannot run is an error in
        its result. Cancelling this kills every hook it started (but the `async` ones)."""
        event_id = new_id()
        try:
            found = self.configured(row)
        except HooksUnreadable as exc:
            return Outcome(results=(result(None, event_id, event, error=exc.message),))
        if found.waiting is not None and found.wanted(event):
            await self.trust.requested(found.waiting)
        chosen = [h for h in found.hooks if h.applies(event, subject)]
        if not chosen:
            return Outcome()
        cwd = self.sessions.workspace(row)
        pid = row.get("project_id") or ""
        projects = self.sessions.projects
        request = {
            "version": 1,
            "event_id": event_id,
            "event": event,
            "occurred_at": iso_now(),
            "session_id": row["id"],
            "root_session_id": await self._root(row),
            "run_id": run_id,
            "cwd": str(cwd),
            "project_id": pid,
            "project_path": projects.get(pid)["path"] if pid and projects.exists(pid) else "",
            "model": row.get("model") or "",
            **fields,
        }
        call = Call({k: v for k, v in request.items() if v not in ("", None, {})}, cwd)
        for hook in chosen:
            if hook.run_async:
                self._detach(hook, call, row["id"], run_id)
        waited = [h for h in chosen if not h.run_async]
        said = await asyncio.gather(*(call.execute(h) for h in waited))
        if event == PERMISSION_REQUEST:
            said = [
                (
                    unapproved(done)
                    if done["decision"] == "allow" and not hook.may_approve
                    else done,
                    context,
                )
                for hook, (done, context) in zip(waited, said, strict=True)
            ]
        return merged(said)

    async def _root(self, row: SessionRow) -> str:
        for _ in range(MAX_PARENTS):
            parent = row.get("parent_id")
            if not parent:
                break
            try:
                row = await self.sessions.row(parent)
            except FoyaError:
                break
        return str(row["id"])

    def _detach(self, hook: Hook, call: Call, session: str, run_id: str) -> None:
        """Run an `async` hook beside the turn; its result is recorded when it ends."""

        async def later() -> None:
            done, _ = await call.execute(hook)
            try:
                await self.sessions.facts.emit(EventDraft(session, HOOK_COMPLETED, done, run_id))
            except FoyaError as exc:  # the session is gone, or the disk is full
                self.log.warning("async hook result not recorded", session=session, error=str(exc))

        task = asyncio.create_task(later(), name=f"hook:{session}")
        self.detached.add(task)
        task.add_done_callback(self.detached.discard)
