"""The one guarded way out to the network: every URL the kernel fetches on someone else's say-so
(a page for `web_fetch`, an image or video link a provider answers with, the MCP registry) is
fetched here, never by an HTTP client of its own (an import-linter contract keeps raw clients out
of the kernel and of the image path); `app.kernel.web.guard.resolve` is the same check for
connections made by other means (git, MCP over HTTP).

Only http(s) URLs with a host and without credentials are fetched. Every hop of a redirect
chain (at most `MAX_REDIRECTS`) is checked again, its URL and the addresses its host resolves
to (`app.kernel.web.guard`), so a public page cannot bounce the fetch to a private one. The
whole chain has `TIMEOUT` seconds; a body larger than `MAX_BYTES` (decompressed) is refused
without reading the rest; only textual content types are accepted. HTML becomes Markdown
(`to_markdown`), and text longer than `MAX_TEXT` characters is cut with a mark. No proxy from
the environment is used: a proxy would make the address checks meaningless.

Errors are `FetchError`s whose message is what the model is told, in Foya's words
(`web fetch returned HTTP 404`, `web fetch response exceeds 5 MB`, …).

`download` is the same guarded GET for a file (a generated canvas video), handed to a sink
as it arrives, bounded by its own size and time; its headers (a provider's key) go only to
the first URL's origin. `read` is `download` into memory, for a small answer (a generated
image, a registry's JSON). `post` sends a push message (app.kernel.push), no redirect taken.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from html_to_markdown import ConversionOptions, convert
from yarl import URL

from app.kernel.web.errors import FetchError
from app.kernel.web.guard import AllowList, Blocked, literal, resolve

MAX_BYTES = 5 * 1024 * 1024
MAX_TEXT = 200_000
MAX_REDIRECTS = 10
TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
USER_AGENT = "Mozilla/5.0 Foya/0.1"
TRUNCATED = "\n\n[content truncated]"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML = ("text/html", "application/xhtml+xml")
_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


def check_url(raw: str) -> URL:
    """`raw` as a URL `web_fetch` may ask for (http or https, a host, no credentials)."""
    try:
        url = URL(raw)
    except (ValueError, TypeError):
        raise FetchError("invalid or unsafe URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise FetchError("invalid or unsafe URL")
    if url.user is not None or url.password is not None:
        raise FetchError("invalid or unsafe URL")
    return url


def to_markdown(html: str, base_url: str) -> str:
    """A page's HTML as Markdown: scripts, styles, navigation, forms and images dropped,
    relative links made absolute against `base_url`."""
    options = ConversionOptions(base_url=base_url, extract_metadata=False, skip_images=True)
    return (convert(html, options).content or "").strip()


def _size(count: int) -> str:
    mib = 1024 * 1024
    return f"{count // mib} MB" if count % mib == 0 else f"{count} bytes"


class Fetcher:
    """Fetches what someone else named (pages, generated media, registry answers) within the
    guard, over one pool of connections (`close()` it)."""

    def __init__(
        self,
        allow: AllowList,
        *,
        max_bytes: int = MAX_BYTES,
        timeout: float = TIMEOUT,
        max_redirects: int = MAX_REDIRECTS,
    ) -> None:
        self.allow = allow
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self._session: aiohttp.ClientSession | None = None

    def precheck(self, raw: str) -> URL:
        """What can be refused before asking anyone: the URL, and a private IP literal."""
        url = check_url(raw)
        self._check_literal(url)
        return url

    async def fetch(self, raw: str) -> str:
        """The text of the page at `raw` (Markdown for HTML), or `FetchError`."""
        url = check_url(raw)
        try:
            async with asyncio.timeout(self.timeout), self._open(url) as response:
                data = await self._body(response)
                content_type = response.headers.get("Content-Type", "").lower()
                return await self._text(data, content_type, response.charset, url)
        except TimeoutError:
            raise FetchError(f"web fetch failed: no answer within {self.timeout:g} s") from None

    async def download(
        self,
        raw: str,
        sink: Callable[[bytes], Awaitable[None]],
        *,
        max_bytes: int,
        time_limit: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Hand the body at `raw` to `sink` as it arrives (at most `max_bytes`, within
        `time_limit` seconds), or `FetchError`; `headers` go to `raw`'s origin only."""
        url = check_url(raw)
        try:
            async with asyncio.timeout(time_limit), self._open(url, headers) as response:
                async for chunk in self._chunks(response, max_bytes):
                    await sink(chunk)
        except TimeoutError:
            raise FetchError(f"web fetch failed: not done within {time_limit:g} s") from None

    async def read(
        self,
        raw: str,
        *,
        max_bytes: int,
        time_limit: float,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """The body at `raw`, or `FetchError`: `download` collected in memory."""
        parts: list[bytes] = []

        async def keep(chunk: bytes) -> None:
            parts.append(chunk)

        await self.download(raw, keep, max_bytes=max_bytes, time_limit=time_limit, headers=headers)
        return b"".join(parts)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Resolved anew for every connection (no DNS cache), each answer checked.
            connector = aiohttp.TCPConnector(
                resolver=GuardedResolver(self.allow), use_dns_cache=False
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT),
                headers={"User-Agent": USER_AGENT},
                trust_env=False,
            )
        return self._session

    def _check_literal(self, url: URL) -> None:
        host = url.host or ""
        address = literal(host)
        if address is not None and not self.allow.allows(host, address):
            raise FetchError(f"web fetch failed: {host} is a private or reserved address")

    @contextlib.asynccontextmanager
    async def _open(
        self, url: URL, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """The 2xx response at the end of `url`'s redirects, every hop checked; errors
        while it is read are mapped here too."""
        origin = url.origin()
        for hop in range(self.max_redirects + 1):
            self._check_literal(url)
            sent = headers if headers and url.origin() == origin else None
            with _mapped(url):
                async with self._client().get(url, allow_redirects=False, headers=sent) as response:
                    location = response.headers.get("Location")
                    if response.status in _REDIRECTS and location:
                        if hop == self.max_redirects:
                            break
                        url = self._next(url, location)
                        continue
                    if not 200 <= response.status < 300:
                        raise FetchError(f"web fetch returned HTTP {response.status}")
                    yield response
                    return
        raise FetchError(f"web fetch exceeded {self.max_redirects} redirects")

    async def post(
        self, raw: str, body: bytes, headers: Mapping[str, str], *, time_limit: float
    ) -> int:
        """POST `body` to `raw` within `time_limit` seconds, following no redirect (a push
        message): the answer's status, or `FetchError` when none came."""
        url = self.precheck(raw)
        sent = self._client().post(url, data=body, headers=headers, allow_redirects=False)
        try:
            async with asyncio.timeout(time_limit):
                with _mapped(url):
                    async with sent as response:
                        await response.content.read(self.max_bytes)  # read, never kept
                        return response.status
        except TimeoutError:
            raise FetchError(f"web fetch failed: no answer within {time_limit:g} s") from None

    def _next(self, url: URL, location: str) -> URL:
        try:
            target = url.join(URL(location))
        except (ValueError, TypeError):
            raise FetchError("web fetch failed: redirect to an invalid URL") from None
        try:
            return check_url(str(target))
        except FetchError:
            raise FetchError("web fetch failed: redirect to an invalid or unsafe URL") from None

    async def _body(self, response: aiohttp.ClientResponse) -> bytes:
        return b"".join([chunk async for chunk in self._chunks(response, self.max_bytes)])

    @staticmethod
    async def _chunks(response: aiohttp.ClientResponse, max_bytes: int) -> AsyncIterator[bytes]:
        too_large = FetchError(f"web fetch response exceeds {_size(max_bytes)}")
        if response.content_length is not None and response.content_length > max_bytes:
            raise too_large
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > max_bytes:
                raise too_large
            yield chunk

    async def _text(self, data: bytes, content_type: str, charset: str | None, url: URL) -> str:
        if content_type and not any(t in content_type for t in ("text/", "json", "xml")):
            raise FetchError("web fetch response is not textual content")
        text = data.decode(_codec(charset), errors="replace")
        if any(t in content_type for t in _HTML):
            try:
                # Fast (a Rust core), but a 5 MB page still takes a moment: not on the loop.
                text = await asyncio.to_thread(to_markdown, text, str(url))
            except Exception as exc:  # the converter's own error types
                raise FetchError(f"web page parse failed: {exc}") from None
        if len(text) > MAX_TEXT:
            text = text[:MAX_TEXT] + TRUNCATED
        return text


@contextlib.contextmanager
def _mapped(url: URL) -> Iterator[None]:
    """aiohttp's errors while `url` is asked for or read, as `FetchError`s."""
    try:
        yield
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, Blocked):
            raise FetchError(f"web fetch failed: {exc.os_error}") from None
        reason = exc.os_error.strerror or type(exc.os_error).__name__
        raise FetchError(f"web fetch failed: cannot connect to {url.host}: {reason}") from None
    except aiohttp.ClientError as exc:
        raise FetchError(f"web fetch failed: {exc or type(exc).__name__}") from None


def _codec(charset: str | None) -> str:
    """The page's declared charset if Python knows it, else UTF-8."""
    if charset:
        try:
            return codecs.lookup(charset).name
        except LookupError:
            pass
    return "utf-8"


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver for fetches: the system's answer, refused if any address is."""

    def __init__(self, allow: AllowList) -> None:
        self.allow = allow

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await resolve(self.allow, host, port, family)
        return [
            ResolveResult(
                hostname=host,
                host=r.address,
                port=r.port,
                family=r.family,
                proto=r.proto,
                flags=_NUMERIC,
            )
            for r in found
        ]

    async def close(self) -> None:
        return None
