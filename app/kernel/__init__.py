"""The kernel façade: every decision the service makes goes through here.

HTTP routes make one call on `Kernel` and shape the answer; the kernel never sees HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from app.broker import Broker
from app.errors import BadRequest, FoyaError, Unavailable
from app.events import MESSAGE_SNAPSHOT, Event, QueueItem
from app.files import ProtectedPaths
from app.kernel import usage
from app.kernel.agents import Agents, Definitions, agent_tools
from app.kernel.approvals import Approvals
from app.kernel.automations import Automations, Clock, SystemClock
from app.kernel.background import BackgroundCommands
from app.kernel.canvas import Canvases
from app.kernel.connections import Connections, Models
from app.kernel.emit import Facts, topic
from app.kernel.exports import Exports
from app.kernel.hooks import Hooks
from app.kernel.ids import now_ns
from app.kernel.imports import Imports
from app.kernel.interactions import AskUser, BrowserActions, Questions, browser_tools
from app.kernel.lifecycle import cancel_and_wait
from app.kernel.maintenance import Maintenance
from app.kernel.mcp import McpService, ServerConfig, Timeouts, ToolSearch, control_tools
from app.kernel.plugins import Plugins
from app.kernel.projects import Projects
from app.kernel.providers import Providers
from app.kernel.readiness import (
    Check,
    CheckFn,
    data_dir_writable,
    database,
    free_disk,
    replication_check,
)
from app.kernel.recovery import recover
from app.kernel.review import Reviews
from app.kernel.rewind import Rewinds
from app.kernel.sessions import Session, Sessions
from app.kernel.streams import SessionStream
from app.kernel.terminals import Terminals
from app.kernel.trust import ProjectTrust
from app.kernel.turns.activity import SessionBusy
from app.kernel.turns.inputs import SessionArtifacts
from app.kernel.turns.queue import Queues
from app.kernel.turns.runner import Turns
from app.kernel.usercontext import ContextJournal, UserContext
from app.kernel.usercontext.commands import Commands
from app.kernel.usercontext.keeper import MemoryKeeper
from app.kernel.usercontext.prompt import PromptContext
from app.kernel.usercontext.skills import Skills
from app.kernel.usercontext.tools import context_tools
from app.kernel.web import WebSearch, web_tools
from app.kernel.web.guard import AllowList
from app.kernel.workflows import Workflows, task_tools
from app.kernel.workspace import Workspaces
from app.metrics import Metrics, ReplicationStatus
from app.providers.base import ProviderError
from app.settings import Settings
from app.staging import staging_root, sweep_staging
from app.store import Store
from app.tools import registry
from app.tools.bash import bash_tools

__all__ = ["Check", "Kernel", "NotReady"]

READINESS_TTL = 1.0


class BadGateway(FoyaError):
    status = 502


class NotReady(Unavailable):
    """At least one readiness check failed."""

    code = "not_ready"

    def __init__(self, checks: list[Check]) -> None:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok)
        super().__init__(f"not ready: {failed}")
        self.checks = checks
        self.extra = {"checks": [vars(c) for c in checks]}


class Kernel:
    """Owns the service's state and rules. Built by the app factory, closed by its lifespan."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        replication: Callable[[], ReplicationStatus] | None = None,
    ) -> None:
        """`clock` is the automations scheduler's (tests drive their own); `replication` the
        status of the replicator `foya serve --replicate` runs beside the kernel."""
        self.settings = settings
        self.replication = replication
        self.metrics = metrics
        metrics.watch_backups(settings.data_dir)
        self.store = Store(settings.data_dir)
        self.broker = Broker(metrics)
        self.facts = Facts(self.store, self.broker)
        self.projects = Projects(settings.data_dir)
        self.connections = Connections(settings.data_dir)
        self.sessions = Sessions(
            self.store, self.facts, self.projects, self.connections, settings.data_dir
        )
        # The user's own context: ~/.foya (and ~/.agents for skills) of the kernel's HOME.
        home = Path.home()
        self.context_journal = ContextJournal(settings.data_dir, self.broker)
        self.user_context = UserContext(
            home / ".foya", settings.data_dir, self.projects, self.context_journal
        )
        # Plugins under ~/.foya/plugins: their skills, commands and agents join the user's.
        self.plugins = Plugins(
            home / ".foya",
            settings.data_dir,
            on_change=self._plugins_changed,
            allow=AllowList.parse(settings.web_fetch_allow_hosts),  # git remotes: web_fetch's rule
        )
        # `required-tools` are checked against the tools turns offer (built below).
        self.skills = Skills(
            home,
            settings.data_dir,
            self.projects,
            lambda: self.turns.tool_runner.tools,
            plugin_dirs=self.plugins.enabled_dirs,
        )
        self.providers = Providers(self.connections)
        self.approvals = Approvals(metrics)
        self.queues = Queues()
        # Foya's own data and secrets, but the managed workspaces tools work in.
        protected = ProtectedPaths(settings.protected_paths, (self.sessions.workspaces,))
        self.prompt = PromptContext(self.user_context, self.skills)
        tools = registry(protected) | context_tools(self.prompt, self.user_context, self.projects)
        # A project's own executable configuration runs once the user trusts its content.
        self.trust = ProjectTrust(settings.data_dir, self.projects, self.context_journal)
        self.hooks = Hooks(home / ".foya", self.sessions, self.trust)
        self.memory_keeper = MemoryKeeper(
            settings.data_dir, self.store, self.connections, self.providers, self.user_context
        )
        self.turns = Turns(
            self.sessions,
            self.store,
            self.providers,
            self.approvals,
            self.queues,
            tools,
            settings.data_dir,
            metrics,
            self.prompt,
            hooks=self.hooks,
            protected=protected,
            turn_completed=self.memory_keeper.wake,
            user_stopped=lambda session: self.agents.cancel_tree(session),
            turn_answered=lambda session, run_id, answer: self.workflows.answered(
                session, run_id, answer
            ),
        )
        # Sub-agents: child sessions of a session, their runs, limits and the agent tools.
        self.agents = Agents(
            settings,
            self.sessions,
            self.broker,
            self.turns,
            self.projects,
            Definitions(home, self.projects, plugin_dirs=self.plugins.enabled_dirs),
            metrics,
        )
        self.turns.tool_runner.tools.update(agent_tools(self.agents))
        # bash with its background mode, bash_status and bash_cancel, kept per session.
        self.background = BackgroundCommands(self.sessions)
        self.turns.tool_runner.tools.update(bash_tools(self.background))
        # Plan mode (its workflows limit a planning session's tools) and the task list tools.
        self.workflows = Workflows(settings.data_dir, self.sessions, self.turns)
        self.turns.tool_runner.policies.append(self.workflows.policy)
        self.turns.steps.instructions.append(self.workflows.instructions)
        self.turns.tool_runner.tools.update(task_tools(self.sessions))
        # ask_user and the browser tools: each call waits for a client's answer or result.
        self.questions = Questions(self.sessions)
        self.browser_actions = BrowserActions(self.sessions, settings.browser_action_timeout)
        self.turns.tool_runner.tools["ask_user"] = AskUser(self.questions)
        self.turns.tool_runner.tools.update(browser_tools(self.browser_actions))
        # MCP servers: their tools come and go in the tool table; tool_search finds deferred ones.
        self.mcp = McpService(
            home / ".foya",
            Timeouts(
                settings.mcp_connect_timeout, settings.mcp_call_timeout, settings.mcp_ping_interval
            ),
            settings.mcp_registry_url,
            self.turns.tool_runner.tools,
            settings.web_fetch_allow_hosts,
            fetcher=lambda: self.web.fetcher,  # the registry goes through web_fetch's guard
        )
        self.turns.tool_runner.tools["tool_search"] = ToolSearch(self.turns.tool_runner)
        self.turns.tool_runner.tools.update((t.name, t) for t in control_tools(self.mcp))
        # web_search and web_fetch, and the /web-search settings behind them.
        self.web = WebSearch(settings.data_dir, settings.web_fetch_allow_hosts)
        self.turns.tool_runner.tools.update(web_tools(self.web))
        self.artifacts = SessionArtifacts(self.sessions)
        self.terminals = Terminals(
            self.sessions,
            metrics,
            per_session=settings.max_terminals_per_session,
            total=settings.max_terminals,
        )
        self.canvases = Canvases(
            settings.data_dir,
            self.broker,
            self.sessions,
            self.projects,
            self.connections,
            self.providers,
            metrics,
            lambda: self.web.fetcher,  # generated videos are downloaded through web_fetch's guard
        )
        self.automations = Automations(
            settings.data_dir,
            self.sessions,
            self.turns,
            self.broker,
            metrics,
            clock or SystemClock(),
        )
        self.automations.unanswerable = self.questions.cancel
        self.commands = Commands(
            home / ".foya",
            self.projects,
            self.sessions,
            self.turns.submit,
            self.workflows,
            plugin_dirs=self.plugins.enabled_dirs,
        )
        self.rewinds = Rewinds(self.sessions, self.store, self.turns, self.queues)
        self.reviews = Reviews(self.sessions, self.store, self.turns)
        self.workspaces = Workspaces(self.sessions, protected)
        # Other tools' histories in, portable archives out.
        self.imports = Imports(
            self.facts,
            self.sessions,
            self.turns,
            self.projects,
            self.user_context,
            self.connections,
            metrics,
            # Uploads are parsed in private folders under .staging, which a start sweeps.
            staging_root(settings.data_dir),
        )
        self.exports = Exports(self.sessions, self.user_context, settings.data_dir / "exports")
        self.maintenance = Maintenance(self.store, self.sessions.remove_files)
        self._started = False
        self._loop_lag: asyncio.Task[None] | None = None
        self._readiness: tuple[float, list[Check]] | None = None
        self._checks: list[CheckFn] = [
            database(self.store.ping),
            data_dir_writable(settings.data_dir),
            free_disk(settings.data_dir, settings.min_free_disk_mb),
        ]
        if replication is not None:
            metrics.watch_replication(replication)
            self._checks.append(replication_check(replication, settings.replica_max_lag))

    async def start(self) -> None:
        """Open the store and recover from any crash. Idempotent: the server calls it before
        listening (so a refusal such as a too-new database is a clean startup error), and the
        app's lifespan calls it for in-process use."""
        if self._started:
            return
        self.settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # What a crash left staging (an import's files, a plugin install's copy) is disposable.
        sweep_staging(self.settings.data_dir)
        self.plugins.sweep_staging()
        # Blocking, but nothing is served before start returns; a worker thread for it would
        # stay idle in the pool for good (resident memory).
        self.store.open()
        self._started = True
        if self.replication is not None:
            await self.store.defer_checkpoints()
        self.projects.load()
        self.workflows.load()
        self.connections.load()
        self.web.load()
        self.canvases.load()  # generations a crash cut short become `error`
        await self.automations.load()  # a run a crash cut short becomes `failed`
        self.context_journal.open()  # drops a torn last line, keeps the last 10,000 events
        await recover(self.store)
        await self.agents.start()  # runs a stop or crash cut short become `interrupted`
        self._loop_lag = asyncio.create_task(self.metrics.watch_loop_lag())
        # Cleanup a crash left undone (a deleted session's directories, a due prune) is not
        # needed to serve: it runs in the background, while the server starts answering.
        self.maintenance.start()
        self.automations.start()  # runs the automations missed while down, once each
        self.memory_keeper.start()  # condenses recent sessions into memory
        self.mcp.plugin_servers = self._plugin_mcp_servers()
        self.mcp.start()  # servers connect in the background: serving is not delayed

    def _plugin_mcp_servers(self) -> list[ServerConfig]:
        return [
            ServerConfig(**s.model_dump(exclude={"plugin_id"}, exclude_none=True))
            for s in self.plugins.mcp_servers()
        ]

    async def _plugins_changed(self) -> None:
        """A plugin was installed, removed, enabled or disabled: its MCP servers follow."""
        await self.mcp.set_plugin_servers(self._plugin_mcp_servers())

    async def begin_shutdown(self) -> None:
        """First step of a graceful stop: end long-lived work so streams close themselves."""
        await self.maintenance.stop()
        await self.memory_keeper.stop()
        await self.automations.stop()  # no new runs; runs going on end with their turns
        await self.agents.stop()  # their records stay; the next start marks them interrupted
        await self.turns.stop_all()
        await self.background.stop_all()  # every bash command's process group, recorded
        await self.hooks.close()  # `async` hooks still running
        await self.terminals.stop_all()  # every shell's session, then their streams end
        await self.canvases.stop()  # running generations
        await self.mcp.stop()  # every MCP server's process ends
        self.broker.close()

    async def close(self) -> None:
        """Release what `start` opened."""
        await self.automations.close()  # runs still followed are recorded `cancelled`
        await self.agents.stop()
        await cancel_and_wait(self._loop_lag)
        await self.maintenance.stop()
        await self.memory_keeper.stop()
        await self.terminals.stop_all()  # in-process use, where no begin_shutdown came first
        await self.background.stop_all()  # likewise
        await self.mcp.stop()  # likewise
        await self.providers.close()
        await self.web.close()  # the search and fetch connection pools
        if self._started:
            await asyncio.to_thread(self.store.close)
            self._started = False

    async def readiness(self) -> list[Check]:
        """Run every readiness check; raise `NotReady` listing the failures.

        Results are reused for `READINESS_TTL` seconds so a busy prober costs no disk work; each
        new result also sets the `foya_ready{check}` gauge."""
        now = time.monotonic()
        if self._readiness is None or now - self._readiness[0] > READINESS_TTL:
            self._readiness = (now, [await check() for check in self._checks])
            self.metrics.record_readiness(self._readiness[1])
        checks = self._readiness[1]
        if not all(c.ok for c in checks):
            raise NotReady(checks)
        return checks

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

    async def delete_session(self, session: str) -> None:
        """Stop the session's work and remove it, its children first."""
        await self.sessions.row(session)
        await self.agents.end_session(session)  # its runs end before their children go
        for child in await self.store.list_sessions(parent_id=session):
            await self.delete_session(child["id"])
        await self.turns.stop(session, "session_deleted")
        await self.terminals.end_session(session)  # no shell writes into what is removed
        await self.background.end_session(session)  # nor a bash command
        try:
            await self.sessions.remove(session)
            await self.workflows.end_session(session)
        finally:
            self.turns.forget(session)
            await self.terminals.end_session(session)  # one started meanwhile
            await self.background.end_session(session)

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
                raise BadGateway(exc.message, code="models_failed") from None
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
        await self.sessions.row(session)
        return self.queues.items(session)
