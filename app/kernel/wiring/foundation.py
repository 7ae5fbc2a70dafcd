"""The foundation of the composition root: the services every capability stands on (the store,
the broker, the facts' way out, sessions, projects, connections, providers, approvals, the
queues) and the user's own context (rules and memory, project trust, hooks, memory upkeep).

Each service is a `cached_property`: reading it builds it, and first what it needs, so the
order of construction follows from the dependencies themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from app.broker import Broker
from app.files import ProtectedPaths
from app.kernel.approvals import Approvals
from app.kernel.automations import Clock, SystemClock
from app.kernel.connections import Connections
from app.kernel.emit import Facts
from app.kernel.maintenance import Maintenance
from app.kernel.projects import Projects
from app.kernel.providers import Providers
from app.kernel.sessions import Sessions
from app.kernel.trust import ProjectTrust
from app.kernel.turns.inputs import SessionArtifacts
from app.kernel.turns.queue import Queues
from app.kernel.usercontext import ContextJournal, UserContext
from app.kernel.usercontext.keeper import MemoryKeeper
from app.kernel.wiring.capability import Observer
from app.metrics import Metrics, ReplicationStatus
from app.settings import Settings
from app.store import Store

if TYPE_CHECKING:
    from app.kernel.hooks import Hooks


class Foundation:
    """The services below every capability."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        *,
        clock: Clock | None = None,
        replication: Callable[[], ReplicationStatus] | None = None,
        observe: Observer | None = None,
    ) -> None:
        """`observe` is told each lifecycle step as it begins (tests watch the order)."""
        self.settings = settings
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.replication = replication
        self.observe = observe
        self.home = Path.home()  # the user's context: ~/.foya (and ~/.agents for skills)
        self._loop_lag: asyncio.Task[None] | None = None
        self._started = False  # the store is open
        # The kernel's loop once every capability's start step ran (until shutdown begins).
        self._serving: asyncio.AbstractEventLoop | None = None

    def _when_serving(self, start: Callable[[], object]) -> None:
        """Start a capability built after the kernel's start: now, on the kernel's loop, or
        soon, from another thread. Before the start, the start steps will."""
        loop = self._serving
        if loop is None:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            start()
        else:
            loop.call_soon_threadsafe(start)

    @cached_property
    def store(self) -> Store:
        return Store(self.settings.data_dir)

    @cached_property
    def broker(self) -> Broker:
        return Broker(self.metrics)

    @cached_property
    def facts(self) -> Facts:
        return Facts(self.store, self.broker)

    @cached_property
    def projects(self) -> Projects:
        return Projects(self.settings.data_dir)

    @cached_property
    def connections(self) -> Connections:
        return Connections(self.settings.data_dir)

    @cached_property
    def providers(self) -> Providers:
        return Providers(self.connections)

    @cached_property
    def sessions(self) -> Sessions:
        data = self.settings.data_dir
        return Sessions(self.store, self.facts, self.projects, self.connections, data)

    @cached_property
    def approvals(self) -> Approvals:
        return Approvals(self.metrics)

    @cached_property
    def queues(self) -> Queues:
        return Queues()

    @cached_property
    def protected(self) -> ProtectedPaths:
        """Foya's own data and secrets, but the managed workspaces tools work in."""
        return ProtectedPaths(self.settings.protected_paths, (self.sessions.workspaces,))

    @cached_property
    def artifacts(self) -> SessionArtifacts:
        return SessionArtifacts(self.sessions)

    @cached_property
    def maintenance(self) -> Maintenance:
        return Maintenance(self.store, self.sessions.remove_files)

    # -- the user's context ----------------------------------------------------------------------

    @cached_property
    def context_journal(self) -> ContextJournal:
        return ContextJournal(self.settings.data_dir, self.broker)

    @cached_property
    def user_context(self) -> UserContext:
        data = self.settings.data_dir
        return UserContext(self.home / ".foya", data, self.projects, self.context_journal)

    @cached_property
    def trust(self) -> ProjectTrust:
        """A project's own executable configuration runs once the user trusts its content."""
        return ProjectTrust(self.settings.data_dir, self.projects, self.context_journal)

    @cached_property
    def hooks(self) -> Hooks:
        """The user's and trusted projects' hooks, read by the turn core (built with it)."""
        from app.kernel.hooks import Hooks

        return Hooks(self.home / ".foya", self.sessions, self.trust)

    @cached_property
    def memory_keeper(self) -> MemoryKeeper:
        data, ctx = self.settings.data_dir, self.user_context
        return MemoryKeeper(data, self.store, self.connections, self.providers, ctx)
