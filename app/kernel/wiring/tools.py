"""What each capability gives the model: the loaders its `Capability` record names.

A loader runs once, when the tool table is built with the turn core (the first turn, or the
first use of the core), and imports its tools' modules then: a start pays neither for them nor
for the services only the tools use (questions, browser actions, background commands).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.files import ProtectedPaths
    from app.kernel.agents import Agents
    from app.kernel.background import BackgroundCommands
    from app.kernel.interactions import BrowserActions, Questions
    from app.kernel.mcp import McpService
    from app.kernel.projects import Projects
    from app.kernel.sessions import Sessions
    from app.kernel.usercontext import UserContext
    from app.kernel.usercontext.prompt import PromptContext
    from app.kernel.web import WebSearch
    from app.tools import Tool


class Root(Protocol):
    """The composition root, as far as the loaders need it (`app.kernel.wiring.plugged`)."""

    @property
    def protected(self) -> ProtectedPaths: ...
    @property
    def prompt(self) -> PromptContext: ...
    @property
    def user_context(self) -> UserContext: ...
    @property
    def projects(self) -> Projects: ...
    @property
    def sessions(self) -> Sessions: ...
    @property
    def web(self) -> WebSearch: ...
    @property
    def mcp(self) -> McpService: ...
    @property
    def questions(self) -> Questions: ...
    @property
    def browser_actions(self) -> BrowserActions: ...
    @property
    def background(self) -> BackgroundCommands: ...
    @property
    def agents(self) -> Agents: ...


def files(root: Root) -> Mapping[str, Tool]:
    from app.tools import registry

    return registry(root.protected)


def context(root: Root) -> Mapping[str, Tool]:
    from app.kernel.usercontext.tools import context_tools

    return context_tools(root.prompt, root.user_context, root.projects)


def web(root: Root) -> Mapping[str, Tool]:
    from app.kernel.web import web_tools

    return web_tools(root.web)


def mcp(root: Root) -> Mapping[str, Tool]:
    from app.kernel.mcp import control_tools

    return {t.name: t for t in control_tools(root.mcp)}


def interactions(root: Root) -> Mapping[str, Tool]:
    from app.kernel.interactions import AskUser, browser_tools

    return {"ask_user": AskUser(root.questions), **browser_tools(root.browser_actions)}


def background(root: Root) -> Mapping[str, Tool]:
    from app.tools.bash import bash_tools

    return bash_tools(root.background)


def tasks(root: Root) -> Mapping[str, Tool]:
    from app.kernel.workflows import task_tools

    return task_tools(root.sessions)


def agents(root: Root) -> Mapping[str, Tool]:
    from app.kernel.agents import agent_tools

    return agent_tools(root.agents)
