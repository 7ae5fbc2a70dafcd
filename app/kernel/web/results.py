"""A search answer's rows, as every provider gives them and the search tool answers them."""

from __future__ import annotations

from typing import NotRequired, TypedDict
from urllib.parse import urlsplit

DEFAULT_LIMIT, MAX_LIMIT = 5, 10


class SearchResult(TypedDict):
    """One row of a search answer (Foya's `SearchResult`; empty fields left out)."""

    title: str
    url: str
    snippet: NotRequired[str]
    source: NotRequired[str]
    rank: int


def limit_of(limit: int | None) -> int:
    """Foya's rule: none or below 1 is 5, above 10 is 10."""
    if not limit or limit <= 0:
        return DEFAULT_LIMIT
    return min(limit, MAX_LIMIT)


def result(index: int, title: str, url: str, snippet: str) -> SearchResult:
    row: SearchResult = {"title": " ".join(title.split()), "url": url.strip(), "rank": index + 1}
    if text := " ".join(snippet.split()):
        row["snippet"] = text
    if host := _host(url):
        row["source"] = host
    return row


def normalized(rows: list[SearchResult], limit: int) -> list[SearchResult]:
    """Only http(s) URLs, each once, at most `limit`, ranked 1..n."""
    out: list[SearchResult] = []
    seen: set[str] = set()
    for row in rows:
        if len(out) >= limit or not row["url"] or row["url"] in seen:
            continue
        if urlsplit(row["url"]).scheme not in ("http", "https"):
            continue
        seen.add(row["url"])
        out.append({**row, "rank": len(out) + 1})
    return out


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""
