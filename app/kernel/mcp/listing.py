"""What a connected MCP server offers, listed through the official SDK: its tools, resources and
prompts, page by page (at most `PAGE_CAP` pages each). A server that offers no resources or
prompts (no capability, or "Method not found") lists none."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import mcp_types as types
from mcp import Client, MCPError

PAGE_CAP = 50
Page = TypeVar("Page", bound=types.PaginatedResult)


@dataclass
class Listing:
    """What a connected server offers."""

    tools: list[types.Tool] = field(default_factory=list)
    resources: int = 0
    prompts: int = 0


async def listing(client: Client) -> Listing:
    listing = Listing([t for page in await _pages(client.list_tools) for t in page.tools])
    listing.resources = len(await resources(client))
    listing.prompts = len(await prompts(client))
    return listing


async def resources(client: Client) -> list[types.Resource]:
    """Every resource the server lists (page by page, at most `PAGE_CAP` pages); none when it
    offers none."""
    if client.server_capabilities.resources is None:
        return []
    pages = await _unless_missing(_pages(client.list_resources))
    return [r for page in pages for r in page.resources]


async def prompts(client: Client) -> list[types.Prompt]:
    """Every prompt the server lists (page by page, at most `PAGE_CAP` pages); none when it
    offers none."""
    if client.server_capabilities.prompts is None:
        return []
    pages = await _unless_missing(_pages(client.list_prompts))
    return [p for page in pages for p in page.prompts]


async def _unless_missing(listing: Awaitable[list[Page]]) -> list[Page]:
    """The pages, or none when the server does not have the method (it advertised the
    capability all the same)."""
    try:
        return await listing
    except MCPError as exc:
        if exc.code == types.METHOD_NOT_FOUND:
            return []
        raise


async def _pages(list_page: Callable[..., Awaitable[Page]]) -> list[Page]:
    """The pages `list_page(cursor=…)` gives, following `next_cursor` (at most `PAGE_CAP`)."""
    pages: list[Page] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        pages.append(await list_page(cursor=cursor))
        cursor = pages[-1].next_cursor
        if not cursor:
            break
    return pages
