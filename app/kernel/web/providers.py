"""Search providers: one query in, ranked `SearchResult`s out.

- `searxng`: `GET <endpoint>/search?q=…&format=json` (the instance must allow the JSON
  format); results' `title`, `url`, `content`.
- `google_cse`: Google Custom Search JSON API (`key`, `cx`), or `endpoint` if set.
- `bing`: Bing Web Search API (`Ocp-Apim-Subscription-Key`), `endpoint` if set.
- `baidu` and `duckduckgo` (the fallback with no provider configured): their HTML result pages,
  parsed as Foya parses them.

A provider's answer is read up to `MAX_RESPONSE` bytes. A failure is `SearchFailed`, whose
message names the provider and the HTTP status or cause, never a key (Google's key travels in
the query string, so no URL is ever quoted).
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp

from app.jsontypes import JSONObject
from app.kernel.web.config import ProviderConfig
from app.kernel.web.errors import SearchFailed
from app.kernel.web.results import SearchResult, result

MAX_RESPONSE = 2 * 1024 * 1024
GOOGLE = "https://customsearch.googleapis.com/customsearch/v1"
BING = "https://api.bing.microsoft.com/v7.0/search"
BAIDU = "https://www.baidu.com/s"
DUCKDUCKGO = "https://lite.duckduckgo.com/lite/"


async def _get(
    session: aiohttp.ClientSession,
    name: str,
    url: str,
    params: dict[str, str],
    headers: dict[str, str] | None = None,
) -> bytes:
    try:
        async with session.get(url, params=params, headers=headers) as response:
            if response.status != 200:
                raise SearchFailed(f"{name} returned HTTP {response.status}")
            data = await response.content.read(MAX_RESPONSE)
    except aiohttp.ClientConnectorError as exc:
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        raise SearchFailed(f"{name} cannot be reached: {reason}") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SearchFailed(f"{name} failed: {type(exc).__name__}") from None
    return data


def _json(name: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise SearchFailed(f"{name} did not answer JSON") from None


def _items(value: Any, *path: str) -> list[JSONObject]:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


async def searxng(
    session: aiohttp.ClientSession, config: ProviderConfig, query: str, limit: int
) -> list[SearchResult]:
    endpoint = config["endpoint"].rstrip("/")
    if not endpoint.endswith("/search"):
        endpoint += "/search"
    data = await _get(session, "SearXNG", endpoint, {"q": query, "format": "json"})
    items = _items(_json("SearXNG", data), "results")[:limit]
    return [
        result(i, _text(r.get("title")), _text(r.get("url")), _text(r.get("content")))
        for i, r in enumerate(items)
    ]


async def google_cse(
    session: aiohttp.ClientSession, config: ProviderConfig, query: str, limit: int
) -> list[SearchResult]:
    if not config["api_key"] or not config["search_engine_id"]:
        raise SearchFailed("Google Custom Search requires api_key and search_engine_id")
    params = {
        "key": config["api_key"],
        "cx": config["search_engine_id"],
        "q": query,
        "num": str(limit),
    }
    data = await _get(session, "Google Custom Search", config["endpoint"] or GOOGLE, params)
    items = _items(_json("Google Custom Search", data), "items")
    return [
        result(i, _text(r.get("title")), _text(r.get("link")), _text(r.get("snippet")))
        for i, r in enumerate(items)
    ]


async def bing(
    session: aiohttp.ClientSession, config: ProviderConfig, query: str, limit: int
) -> list[SearchResult]:
    if not config["api_key"]:
        raise SearchFailed("Bing Web Search requires api_key")
    headers = {"Ocp-Apim-Subscription-Key": config["api_key"]}
    params = {"q": query, "count": str(limit)}
    data = await _get(session, "Bing Web Search", config["endpoint"] or BING, params, headers)
    items = _items(_json("Bing Web Search", data), "webPages", "value")
    return [
        result(i, _text(r.get("name")), _text(r.get("url")), _text(r.get("snippet")))
        for i, r in enumerate(items)
    ]


def _browser() -> dict[str, str]:
    # Foya's user agent for the HTML pages (a varying suffix, as Foya sends).
    return {"User-Agent": f"Mozilla/5.0 Foya/{random.randint(100, 999)}", "Accept": "text/html"}


async def baidu(
    session: aiohttp.ClientSession, config: ProviderConfig, query: str, limit: int
) -> list[SearchResult]:
    data = await _get(session, "Baidu", BAIDU, {"wd": query, "rn": str(limit)}, _browser())
    return parse_baidu(data.decode(errors="replace"), limit)


async def duckduckgo(
    session: aiohttp.ClientSession, config: ProviderConfig, query: str, limit: int
) -> list[SearchResult]:
    try:
        async with session.get(DUCKDUCKGO, params={"q": query}, headers=_browser()) as response:
            if response.status in (202, 429):
                raise SearchFailed("DuckDuckGo rate limited the search request")
            if response.status != 200:
                raise SearchFailed(f"DuckDuckGo returned HTTP {response.status}")
            data = await response.content.read(MAX_RESPONSE)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SearchFailed(f"DuckDuckGo failed: {type(exc).__name__}") from None
    return parse_duckduckgo(data.decode(errors="replace"), limit)


def parse_duckduckgo(html: str, limit: int) -> list[SearchResult]:
    """The results of a DuckDuckGo lite page."""
    parser = _DuckDuckGo(limit)
    parser.feed(html)
    return parser.done()


def parse_baidu(html: str, limit: int) -> list[SearchResult]:
    """The results of a Baidu result page."""
    parser = _Baidu(limit)
    parser.feed(html)
    parser.close()
    return parser.results


Search = Callable[[aiohttp.ClientSession, ProviderConfig, str, int], Awaitable[list[SearchResult]]]
PROVIDERS: dict[str, Search] = {
    "searxng": searxng,
    "google_cse": google_cse,
    "bing": bing,
    "baidu": baidu,
    "duckduckgo": duckduckgo,
}


def _classes(attrs: list[tuple[str, str | None]]) -> set[str]:
    return {c for name, value in attrs if name == "class" for c in (value or "").split()}


class _DuckDuckGo(HTMLParser):
    """`a.result-link` starts a result (its `uddg` redirect unwrapped), the next
    `td.result-snippet` is its snippet."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.rows: list[list[str]] = []  # [title, url, snippet]
        self._into: int | None = None  # 0: title, 2: snippet

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and "result-link" in _classes(attrs):
            href = next((v or "" for k, v in attrs if k == "href"), "")
            self.rows.append(["", _unwrap(href), ""])
            self._into = 0
        elif tag == "td" and "result-snippet" in _classes(attrs) and self.rows:
            self._into = 2

    def handle_endtag(self, tag: str) -> None:
        if tag in ("a", "td"):
            self._into = None

    def handle_data(self, data: str) -> None:
        if self._into is not None:
            self.rows[-1][self._into] += data + " "

    def done(self) -> list[SearchResult]:
        rows = [r for r in self.rows if r[1]][: self.limit]
        return [result(i, title, url, snippet) for i, (title, url, snippet) in enumerate(rows)]


def _unwrap(href: str) -> str:
    if href.startswith("//"):
        href = "https:" + href
    parts = urlsplit(href)
    if (parts.hostname or "").endswith("duckduckgo.com"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href


class _Baidu(HTMLParser):
    """Each `h3` holding a link is a result; the rest of the h3's parent is its snippet."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.results: list[SearchResult] = []
        self._stack: list[str] = []
        self._open: dict[str, Any] | None = None  # the result being read

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._stack.append(tag)
        if tag == "h3" and self._open is None and len(self.results) < self.limit:
            self._open = {"depth": len(self._stack) - 1, "title": "", "url": "", "rest": ""}
        elif tag == "a" and self._open is not None and not self._open["url"]:
            self._open["url"] = next((v or "" for k, v in attrs if k == "href"), "")

    def handle_endtag(self, tag: str) -> None:
        if tag not in self._stack:
            return
        while self._stack and self._stack.pop() != tag:
            pass
        current = self._open
        if current is not None and len(self._stack) < current["depth"]:  # the parent closed
            if current["url"] and current["title"].strip():
                self.results.append(
                    result(len(self.results), current["title"], current["url"], current["rest"])
                )
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is None:
            return
        inside = "h3" in self._stack[self._open["depth"] :]
        self._open["title" if inside else "rest"] += data + " "
