"""The kernel's operations that span several services: a session's events, forking a session,
deleting a project or a connection, a connection's models, approvals, the queue and the usage
report. Each is one call a route makes. (Deleting a session is the kernel's life:
`app.kernel.wiring.root`.)"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator

from app.errors import BadRequest
from app.events import MESSAGE_SNAPSHOT, Event, QueueItem
from app.kernel import usage
from app.kernel.connections import Models, ModelsFailed
from app.kernel.emit import topic
from app.kernel.ids import now_ns
from app.kernel.sessions import Session
from app.kernel.streams import SessionStream
from app.kernel.turns.activity import SessionBusy
from app.kernel.wiring import Wiring
from app.providers.base import ProviderError


class Operations(Wiring):
    """The cross-service operations of `Kernel`."""

    @contextlib.asynccontextmanager
    async def session_events(self, session: str, after: int | None) -> AsyncIterator[SessionStream]:
        """A stream of the session's events: stored ones after `after` (if given), then live."""
        await self.sessions.row(session)
        with self.broker.subscribe(topic(session)) as sub:
            stream = SessionStream(self.store, session, sub, after)
            # Taken after subscribing, so the deltas that follow continue exactly this text.
            partial = self.turns.partial(session)
            if partial is not None:
                stream.prepend([Event(0, MESSAGE_SNAPSHOT, session, None, now_ns(), partial)])
            yield stream

    async def usage_report(self, raw_days: str) -> usage.UsageReport:
        """`GET /usage`: totals over `days`, a year of daily activity, per-model shares."""
        days = usage.range_days(raw_days)
        today = dt.datetime.now(dt.UTC).date()
        since = (today - dt.timedelta(days=usage.ACTIVITY_DAYS - 1)).isoformat()
        tokens, messages, session_days = await self.store.usage_ledgers(since)
        return usage.report(days, today, tokens, messages, session_days)

    async def fork_session(
        self, session: str, title: str | None, through_seq: int | None
    ) -> Session:
        """A copy of an idle session (no turn, nothing queued) as a new top-level session."""
        await self.sessions.row(session)
        if self.turns.is_busy(session):
            raise SessionBusy("the session is busy; wait for the turn and its queue to finish")
        return await self.sessions.fork(session, title, through_seq)

    async def delete_project(self, project_id: str) -> None:
        """Remove a project and its sessions; its directory is never touched."""
        self.projects.get(project_id)
        for row in await self.store.list_sessions(project_id=project_id):
            await self.delete_session(row["id"])
        await self.projects.remove(project_id)
        await self.trust.forget(project_id)

    async def delete_connection(self, connection_id: str) -> None:
        """Remove a connection; sessions using it keep their model but lose the connection."""
        await self.connections.remove(connection_id)
        self.providers.forget(connection_id)
        for session in await self.store.sessions_using(connection_id):
            await self.sessions.save(session, {"connection_id": None})

    async def list_models(self, connection_id: str, refresh: bool) -> Models:
        """The connection's models: its stored selection, or, with `refresh` or none stored,
        the provider's catalog. The catalog is never stored: `models` is the user's selection
        (Foya's desktop saves it with the connection and refreshes right after every save, so
        storing the catalog would replace what the user picked)."""
        connection = self.connections.get(connection_id)
        models = list(connection.get("models") or [])
        if refresh or not models:
            try:
                models = await self.providers.for_connection(connection_id).models()
            except ProviderError as exc:
                raise ModelsFailed(exc.message) from None
        out: Models = {"models": models}
        settings = connection.get("model_settings") or {}
        windows = {m: s["context_window"] for m, s in settings.items() if s.get("context_window")}
        if windows:
            out["context_windows"] = windows
        return out

    async def decide_approval(
        self, session: str, request_id: str, body_request_id: str | None, decision: str
    ) -> None:
        """`POST /sessions/{id}/approvals/{request_id}`: the session must exist, a `request_id`
        in the body must name the same request, and only that session's request is decided."""
        await self.sessions.row(session)
        if body_request_id not in (None, "", request_id):
            raise BadRequest("request_id: does not match the request in the URL")
        self.approvals.decide(session, request_id, decision)

    async def queue_items(self, session: str) -> list[QueueItem]:
        """The session's queued inputs."""
        await self.sessions.row(session)
        return self.queues.items(session)
