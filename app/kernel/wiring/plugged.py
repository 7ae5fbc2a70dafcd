"""What plugs into the turn, and the turn core built from it with its tool table complete.

Each capability here declares its tools, its limits on a session's tools and what it adds to
the system prompt in its `Capability` record (`_plugs`); the tool table and `Turns` are built
from those records, so nothing is added to the table after the turn core exists. A record names
its tools by a loader: the table, and the turn core with it, are built on first use (the first
turn), so a start imports no tool and no turn module. MCP servers' tools come and go through
the table's source (the service replaces its snapshot), never by editing a dictionary the turn
reads.

Two cycles are real and are broken by ports that exist before both sides: sub-agents and plan
mode start and stop turns but are built before the turn core (their tools and limits are in its
table), so they hold a `TurnControl` that answers with the turn core at call time; and skills
check their `required-tools` against the tool table, which holds the skill tools, so they ask
for the table's names at call time.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cached_property, partial
from typing import TYPE_CHECKING

from app.kernel.web.guard import AllowList
from app.kernel.wiring import ondisk, tools
from app.kernel.wiring.capability import Capability
from app.kernel.wiring.foundation import Foundation
from app.kernel.wiring.lateturns import LateTurns

if TYPE_CHECKING:
    from pathlib import Path

    from app.kernel.agents import Agents
    from app.kernel.background import BackgroundCommands
    from app.kernel.interactions import BrowserActions, Questions
    from app.kernel.mcp import McpService, ServerConfig
    from app.kernel.plugins import Plugins
    from app.kernel.sessionrow import SessionRow
    from app.kernel.turns.runner import Turns
    from app.kernel.turns.tooltable import ToolTable
    from app.kernel.usercontext.prompt import PromptContext
    from app.kernel.usercontext.skills import Skills
    from app.kernel.web import WebSearch
    from app.kernel.workflows import Workflows
    from app.tools import Tool


class Plugged(Foundation):
    """The capabilities that plug into the turn, the tool table and the turn core."""

    @cached_property
    def plugins(self) -> Plugins:
        """Plugins under ~/.foya/plugins: their skills, commands and agents join the user's.
        Built on first use: while none is installed, nothing asks (`_plugin_dirs`)."""
        from app.kernel.plugins import Plugins

        allow = AllowList.parse(self.settings.web_fetch_allow_hosts)  # git remotes: web_fetch's
        data = self.settings.data_dir
        return Plugins(self.home / ".foya", data, on_change=self._plugins_changed, allow=allow)

    def _plugins_present(self) -> bool:
        return ondisk.plugins(self.home / ".foya")

    def _plugin_dirs(self) -> list[Path]:
        """The enabled plugins' directories; none, with no plugin module loaded, while no
        plugin is installed."""
        if self.built("plugins") or self._plugins_present():
            return self.plugins.enabled_dirs()
        return []

    @cached_property
    def skills(self) -> Skills:
        from app.kernel.usercontext.skills import Skills

        dirs = self._plugin_dirs
        data = self.settings.data_dir
        return Skills(self.home, data, self.projects, self._tool_names, plugin_dirs=dirs)

    @cached_property
    def prompt(self) -> PromptContext:
        """The system prompt's parts: the user's context and skills (read with each turn)."""
        from app.kernel.usercontext.prompt import PromptContext

        return PromptContext(self.user_context, self.skills)

    @cached_property
    def web(self) -> WebSearch:
        """web_search and web_fetch, and the /web-search settings behind them; built (and its
        settings file read) on first use."""
        from app.kernel.web import WebSearch

        web = WebSearch(self.settings.data_dir, self.settings.web_fetch_allow_hosts)
        web.load()
        return web

    @cached_property
    def mcp(self) -> McpService:
        """MCP servers: their tools are a source of the tool table. Built at start only if
        servers are configured (`_start_mcp`); built later, it starts at once."""
        from app.kernel.mcp import McpService, Timeouts

        s = self.settings
        timeouts = Timeouts(s.mcp_connect_timeout, s.mcp_call_timeout, s.mcp_ping_interval)
        root, allow = self.home / ".foya", s.web_fetch_allow_hosts
        mcp = McpService(root, timeouts, s.mcp_registry_url, allow, web=self.web)
        self._when_serving(lambda: mcp.start(self._plugin_mcp_servers()))
        return mcp

    @cached_property
    def agents(self) -> Agents:
        """Sub-agents: child sessions of a session, their runs, limits and the agent tools.
        Built at start only if runs or limits were recorded (`_start_agents`)."""
        from app.kernel.agents import Agents, Definitions

        dirs = self._plugin_dirs
        definitions = Definitions(self.home, self.projects, plugin_dirs=dirs)
        turns = LateTurns(self)
        return Agents(
            self.settings,
            self.sessions,
            self.broker,
            turns,
            self.projects,
            definitions,
            self.metrics,
        )

    @cached_property
    def background(self) -> BackgroundCommands:
        """bash with its background mode, bash_status and bash_cancel, kept per session."""
        from app.kernel.background import BackgroundCommands

        return BackgroundCommands(self.sessions)

    @cached_property
    def workflows(self) -> Workflows:
        """Plan mode (it limits a planning session's tools) and the task list tools; built,
        and `workflows.json` read, with the first turn (or a workflow route)."""
        from app.kernel.workflows import Workflows

        workflows = Workflows(self.settings.data_dir, self.sessions, LateTurns(self))
        workflows.load()
        return workflows

    @cached_property
    def questions(self) -> Questions:
        """ask_user: each call waits for a client's answer."""
        from app.kernel.interactions import Questions

        return Questions(self.sessions)

    @cached_property
    def browser_actions(self) -> BrowserActions:
        from app.kernel.interactions import BrowserActions

        return BrowserActions(self.sessions, self.settings.browser_action_timeout)

    def built(self, name: str) -> bool:
        """Whether the service `name` has been built (one built on first use only once used)."""
        return name in self.__dict__

    # -- what a capability built on first use has to stop ----------------------------------------

    async def _stop_background(self) -> None:
        if self.built("background"):
            await self.background.stop_all()

    async def _end_background(self, session: str) -> None:
        if self.built("background"):
            await self.background.end_session(session)

    def _plan_policy(self, row: SessionRow) -> Collection[str] | None:
        return self.workflows.policy(row)

    def _plan_instructions(self, row: SessionRow) -> str | None:
        return self.workflows.instructions(row)

    async def _end_workflows(self, session: str) -> None:
        if self.built("workflows") or ondisk.workflows(self.settings.data_dir):
            await self.workflows.end_session(session)

    async def _close_web(self) -> None:
        if self.built("web"):
            await self.web.close()

    async def _start_agents(self) -> None:
        """Runs a stop left unfinished become `interrupted`: only if some were recorded."""
        if self.built("agents") or ondisk.agents(self.settings.data_dir):
            await self.agents.start()

    async def _stop_agents(self) -> None:
        if self.built("agents"):
            await self.agents.stop()

    async def _end_agents(self, session: str) -> None:
        if self.built("agents"):
            await self.agents.end_session(session)

    def _plugs(self) -> list[Capability]:
        """The capabilities whose tools, limits and instructions the turn core is built with."""
        return [
            Capability("files", partial(tools.files, self)),
            Capability("context", partial(tools.context, self)),
            Capability("web", partial(tools.web, self), close=self._close_web),
            Capability(
                "mcp",
                partial(tools.mcp, self),
                start=self._start_mcp,
                shutdown=self._stop_mcp,
                close=self._stop_mcp,
            ),
            Capability("interactions", partial(tools.interactions, self)),
            Capability(
                "background",
                partial(tools.background, self),
                shutdown=self._stop_background,
                close=self._stop_background,
                end_session=self._end_background,
                forget=self._end_background,  # one started meanwhile
            ),
            Capability(
                "workflows",
                partial(tools.tasks, self),
                policies=(self._plan_policy,),
                instructions=(self._plan_instructions,),
                removed=self._end_workflows,
            ),
            Capability(
                "agents",
                partial(tools.agents, self),
                start=self._start_agents,
                close=self._stop_agents,  # its shutdown is root.py's `agent_runs`
                end_session=self._end_agents,
            ),
        ]

    @cached_property
    def _plugged(self) -> list[Capability]:
        return self._plugs()

    @cached_property
    def tool_table(self) -> ToolTable:
        """Every tool a turn may be offered: the capabilities' own, then the MCP servers'."""
        from app.kernel.turns.toolsearch import ToolSearch
        from app.kernel.turns.tooltable import ToolTable

        static: dict[str, Tool] = {}
        for capability in self._plugged:
            static.update(capability.tools())
        return ToolTable(static, sources=(self.mcp,), readers=(ToolSearch,))

    def _tool_names(self) -> Collection[str]:
        return self.tool_table.names()

    @cached_property
    def turns(self) -> Turns:
        """The turn core, built on first use (a turn, or a question only it can answer)."""
        from app.kernel.turns.plugs import TurnPlugs
        from app.kernel.turns.runner import Turns

        plugs = TurnPlugs(
            self.tool_table,
            self.hooks,
            self.prompt,
            policies=[p for c in self._plugged for p in c.policies],
            instructions=[i for c in self._plugged for i in c.instructions],
            turn_completed=self.memory_keeper.wake,
            user_stopped=self.agents.cancel_tree,
            turn_answered=self.workflows.answered,
        )
        data, protected = self.settings.data_dir, self.protected
        args = (self.sessions, self.store, self.providers, self.approvals, self.queues)
        return Turns(*args, data, self.metrics, plugs, protected=protected)

    def _plugin_mcp_servers(self) -> list[ServerConfig]:
        if not (self.built("plugins") or self._plugins_present()):
            return []
        from app.kernel.mcp import ServerConfig

        return [
            ServerConfig(**s.model_dump(exclude={"plugin_id"}, exclude_none=True))
            for s in self.plugins.mcp_servers()
        ]

    async def _start_mcp(self) -> None:
        configured = ondisk.mcp(self.home / ".foya") or self._plugins_present()
        if self.built("mcp") or configured:
            self.mcp.start(self._plugin_mcp_servers())  # servers connect in the background

    async def _stop_mcp(self) -> None:
        if self.built("mcp"):
            await self.mcp.stop()

    async def _plugins_changed(self) -> None:
        """A plugin was installed, removed, enabled or disabled: its MCP servers follow."""
        await self.mcp.set_plugin_servers(self._plugin_mcp_servers())
