"""The `web_search` and `web_fetch` tools, with Foya's names, schemas and answers.

- `web_search {query, limit?}` answers `{"provider", "query", "results": [{"title", "url",
  "snippet"?, "source"?, "rank"}]}` (compact JSON); a failure is `web search failed: …`.
- `web_fetch {url}` answers the page's text (Markdown for HTML, cut at 200,000 characters);
  `invalid or unsafe URL`, `web fetch returned HTTP 404`, `web fetch failed: …` otherwise.

Approval, as in Foya, is the tool's own, action `network`, through the session's approval
mode: detail `Web search: <query>` / `Read web page: <url>`, resource the query / the URL; a
denial is `user denied web search` / `user denied web fetch`. A URL that can be refused
without a connection (not http(s), credentials, a private IP literal) is refused before asking.
Both tools change nothing, so a step's calls of them may run side by side.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.jsontypes import JSONObject
from app.kernel.approvals import Ask
from app.kernel.web.errors import FetchError, SearchFailed
from app.kernel.web.search import WebSearch
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import Action, ToolContext, schema

MAX_QUERY = 200


class _WebTool:
    """What both tools share: their approval."""

    name = ""
    parallel = True

    def __init__(self, web: WebSearch) -> None:
        self.web = web

    def action(self, args: JSONObject) -> Action:
        return "read"  # approval is asked in `run`, as action `network`

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def _approve(self, ctx: ToolContext, detail: str, resource: str, what: str) -> None:
        ask = Ask(ctx.session, self.name, "network", detail, resource, False, "internet")
        if await ctx.approve(ask) == "denied":
            raise ToolError(f"user denied {what}")


class WebSearchTool(_WebTool):
    name = "web_search"
    description = "Search the live web and return bounded source rows."
    parameters = schema(
        {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
        },
        ["query"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        query, limit = args.get("query"), args.get("limit")
        if not isinstance(query, str) or not 1 <= len(query) <= MAX_QUERY:
            raise ToolError(f"invalid arguments: query must be 1 to {MAX_QUERY} characters")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise ToolError("invalid arguments: limit must be an integer")
        await self._approve(ctx, f"Web search: {query}", query, "web search")
        try:
            results, provider = await self.web.search(query, limit)
        except SearchFailed as exc:
            raise ToolError(f"web search failed: {exc}") from None
        answer = {"provider": provider, "query": query, "results": results}
        return ToolResult(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


class WebFetchTool(_WebTool):
    name = "web_fetch"
    description = "Read the main textual content of a known HTTP or HTTPS URL."
    parameters = schema(
        {"url": {"type": "string", "format": "uri", "description": "HTTP or HTTPS URL"}}, ["url"]
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        raw = args.get("url")
        try:
            if not isinstance(raw, str):
                raise FetchError("invalid or unsafe URL")
            url = str(self.web.fetcher.precheck(raw))
            await self._approve(ctx, f"Read web page: {url}", url, "web fetch")
            return ToolResult(await self.web.fetcher.fetch(url))
        except FetchError as exc:
            raise ToolError(str(exc)) from None


def web_tools(web: WebSearch) -> dict[str, Tool]:
    """`web_search` and `web_fetch`, by name."""
    tools: list[Tool] = [WebSearchTool(web), WebFetchTool(web)]
    return {tool.name: tool for tool in tools}
