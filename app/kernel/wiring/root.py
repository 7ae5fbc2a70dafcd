"""The composition root's top: what drives the turn (automations, commands, rewinds, reviews),
the capabilities built on first use, and the one ordered list that drives the kernel's life.

`capabilities()` is that list: `start` runs it in order, every teardown in reverse (`Lifecycle`).

Most services are built on first use. The records of those in `_plugs` and in the list below
are always there, and their steps do nothing for a service never built (or, at start, for one
that recorded nothing: `ondisk`). `LAZY` ones join the list only once built, as nothing at start
needs them and most sessions never do: canvases (a generation a crash cut short is marked `error`
when first read), terminals, imports and exports.
"""

from __future__ import annotations

import asyncio
from functools import cached_property
from typing import TYPE_CHECKING

from app.kernel.lifecycle import cancel_and_wait
from app.kernel.recovery import recover
from app.kernel.review import Reviews
from app.kernel.rewind import Rewinds
from app.kernel.wiring import ondisk
from app.kernel.wiring.capability import Capability, Lifecycle, blocking
from app.kernel.wiring.lateturns import LateTurns
from app.kernel.wiring.push import PushWiring
from app.kernel.workspace import Workspaces
from app.staging import staging_root, sweep_staging

if TYPE_CHECKING:
    from app.kernel.automations import Automations
    from app.kernel.canvas import Canvases
    from app.kernel.exports import Exports
    from app.kernel.imports import Imports
    from app.kernel.terminals import Terminals
    from app.kernel.usercontext.commands import Commands
    from app.kernel.web.fetch import Fetcher

#: The capabilities built on first use, by attribute name.
LAZY = ("canvases", "terminals", "imports", "exports")
#: The services built with the kernel (the rest of what `capabilities()` names, and these).
EAGER = ("workspaces", "artifacts", "trust")


class Wiring(PushWiring):
    """Builds the kernel's services and runs their life; `Kernel` adds the operations that
    span them."""

    # -- what drives the turn --------------------------------------------------------------------

    @cached_property
    def automations(self) -> Automations:
        """Built at start if automations were recorded; otherwise on first use, its scheduler
        then started at once (there was nothing to load)."""
        from app.kernel.automations import Automations

        data, turns = self.settings.data_dir, LateTurns(self)
        args = (data, self.sessions, turns, self.broker, self.metrics, self.clock)
        automations = Automations(*args, unanswerable=self._unanswerable)
        self._when_serving(automations.start)
        return automations

    async def _unanswerable(self, session: str, batch: str) -> None:
        await self.questions.cancel(session, batch)

    @cached_property
    def commands(self) -> Commands:
        from app.kernel.usercontext.commands import Commands

        dirs = self._plugin_dirs
        args = (self.projects, self.sessions, LateTurns(self).submit, self.workflows)
        return Commands(self.home / ".foya", *args, plugin_dirs=dirs)

    @cached_property
    def rewinds(self) -> Rewinds:
        return Rewinds(self.sessions, self.store, self.turns, self.queues)

    @cached_property
    def reviews(self) -> Reviews:
        return Reviews(self.sessions, self.store, self.turns)

    @cached_property
    def workspaces(self) -> Workspaces:
        return Workspaces(self.sessions, self.protected)

    # -- lazy: built on first use ----------------------------------------------------------------
    # Each imports its package when first built: start-up does not pay for the modules (and the
    # libraries they load) of a capability nobody has used yet.

    @cached_property
    def canvases(self) -> Canvases:
        from app.kernel.canvas import Canvases

        canvases = Canvases(
            self.settings.data_dir,
            self.broker,
            self.sessions,
            self.projects,
            self.connections,
            self.providers,
            self.metrics,
            self._fetcher,  # generated videos are downloaded through web_fetch's guard
        )
        canvases.load()  # generations a crash cut short become `error`
        return canvases

    def _fetcher(self) -> Fetcher:
        return self.web.fetcher

    @cached_property
    def terminals(self) -> Terminals:
        from app.kernel.terminals import Terminals

        per_session, total = self.settings.max_terminals_per_session, self.settings.max_terminals
        return Terminals(self.sessions, self.metrics, per_session=per_session, total=total)

    @cached_property
    def imports(self) -> Imports:
        """Other tools' histories in; uploads are parsed under .staging, which a start sweeps."""
        from app.kernel.imports import Imports

        staging = staging_root(self.settings.data_dir)
        args = (self.facts, self.sessions, self.turns, self.projects, self.user_context)
        return Imports(*args, self.connections, self.metrics, staging)

    @cached_property
    def exports(self) -> Exports:
        """Portable archives out."""
        from app.kernel.exports import Exports

        out = self.settings.data_dir / "exports"
        return Exports(self.sessions, self.user_context, out)

    # -- the kernel's life -----------------------------------------------------------------------

    def capabilities(self) -> list[Capability]:
        """Every capability, in the order of setup; teardown runs it backwards."""
        lazy = []
        if self.built("canvases"):
            lazy.append(Capability("canvases", shutdown=self.canvases.stop))
        if self.built("terminals"):
            terminals = self.terminals
            lazy.append(
                Capability(
                    "terminals",
                    shutdown=terminals.stop_all,
                    close=terminals.stop_all,
                    end_session=terminals.end_session,
                    forget=terminals.end_session,  # one started meanwhile
                )
            )
        plugged = self._plugged
        at = next(i for i, c in enumerate(plugged) if c.name == "agents")
        return [
            Capability("store", start=self._open_store, close=self._close_store),
            Capability("broker", shutdown=self._close_broker),
            Capability("projects", start=blocking(self.projects.load)),
            Capability("connections", start=blocking(self.connections.load)),
            Capability("providers", close=self.providers.close),
            Capability("context_journal", start=blocking(self.context_journal.open)),
            Capability("hooks", shutdown=self._close_hooks),
            *lazy,
            *plugged[:at],
            # Teardown runs backwards: a session's children go once its sub-agents' runs ended.
            Capability("children", end_session=self._delete_children),
            *plugged[at:],
            Capability(
                "turns",
                start=self._recover,
                shutdown=self._stop_all_turns,
                end_session=self._stop_turns,
                forget=self._forget_turns,
            ),
            # Teardown runs backwards: the sub-agent runs stop (recording no end) before the
            # turns do, or a child's turn the shutdown ends would read as its run's own end,
            # where the next start is to mark the run interrupted.
            Capability("agent_runs", shutdown=self._stop_agents),
            Capability(
                "automations",
                start=self._start_automations,
                shutdown=self._stop_automations,
                close=self._close_automations,
            ),
            self.channels_capability(),  # its bots stop before the turns they drive
            self.push_capability(),
            Capability("loop_lag", start=self._watch_loop_lag, close=self._stop_loop_lag),
            Capability(
                "memory_keeper",
                start=blocking(self.memory_keeper.start),
                shutdown=self.memory_keeper.stop,
                close=self.memory_keeper.stop,
            ),
            Capability(
                "maintenance",
                start=blocking(self.maintenance.start),
                shutdown=self.maintenance.stop,
                close=self.maintenance.stop,
            ),
        ]

    @cached_property
    def lifecycle(self) -> Lifecycle:
        return Lifecycle(self.capabilities, self.observe)

    async def start(self) -> None:
        """Open the store, recover from any crash, then start each capability in order.
        Idempotent: the server calls it before listening (so a refusal such as a too-new
        database is a clean startup error), and the app's lifespan calls it for in-process
        use. Cleanup a crash left undone runs in the background, while the server answers."""
        if not self._started:
            await self.lifecycle.run("start")
            # From now on, a capability built on first use starts at once, on this loop.
            self._serving = asyncio.get_running_loop()

    async def begin_shutdown(self) -> None:
        """First step of a graceful stop: end long-lived work so streams close themselves
        (in the reverse of the setup order)."""
        self._serving = None
        await self.lifecycle.run("shutdown")

    async def close(self) -> None:
        """Release what `start` opened (in the reverse of the setup order)."""
        await self.lifecycle.run("close")

    async def delete_session(self, session: str) -> None:
        """Stop the session's work and remove it, its children first. The capabilities end
        the session's work in the reverse of their setup order."""
        await self.sessions.row(session)
        await self.lifecycle.run_session("end_session", session)
        try:
            await self.sessions.remove(session)
            await self.lifecycle.run_session("removed", session)
        finally:
            await self.lifecycle.run_session("forget", session)

    async def _delete_children(self, session: str) -> None:
        for child in await self.store.list_sessions(parent_id=session):
            await self.delete_session(child["id"])  # their runs ended: they go now

    async def _open_store(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # What a crash left staging (an import's files, a plugin install's copy) is disposable.
        sweep_staging(self.settings.data_dir)
        if self._plugins_present():
            self.plugins.sweep_staging()
        # Blocking, but nothing is served before start returns; a worker thread for it would
        # stay idle in the pool for good (resident memory).
        self.store.open()
        self._started = True
        if self.replication is not None:
            await self.store.defer_checkpoints()

    async def _close_store(self) -> None:
        if self._started:
            await asyncio.to_thread(self.store.close)
            self._started = False

    async def _close_broker(self) -> None:
        self.broker.close()

    async def _recover(self) -> None:
        await recover(self.store)  # turns a crash cut short are completed as interrupted
        if waiting := await self.store.waiting_queues():  # builds the turn core only if so
            for session in self.queues.restore_all(waiting):
                self.turns.runners.resume(session)  # as when the turn ahead of them ended

    async def _stop_all_turns(self) -> None:
        if self.built("turns"):  # none ran if the turn core was never built
            await self.turns.stop_all()

    async def _stop_turns(self, session: str) -> None:
        if self.built("turns"):
            await self.turns.stop(session, "session_deleted")

    async def _forget_turns(self, session: str) -> None:
        if self.built("turns"):
            self.turns.forget(session)

    async def _close_hooks(self) -> None:
        if self.built("hooks"):
            await self.hooks.close()

    async def _start_automations(self) -> None:
        if self.built("automations") or ondisk.automations(self.settings.data_dir):
            await self.automations.load()  # a run a crash cut short becomes `failed`
            self.automations.start()  # runs the automations missed while down, once each

    async def _stop_automations(self) -> None:
        if self.built("automations"):
            await self.automations.stop()

    async def _close_automations(self) -> None:
        if self.built("automations"):
            await self.automations.close()

    async def _watch_loop_lag(self) -> None:
        self._loop_lag = asyncio.create_task(self.metrics.watch_loop_lag())

    async def _stop_loop_lag(self) -> None:
        await cancel_and_wait(self._loop_lag)
